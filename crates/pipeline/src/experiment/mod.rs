//! `koma experiment`: measures a change to the training loop. Two or more variants (run configs)
//! each train with `koma pipeline` for the same budget on this machine, one after another, from
//! the same model 0; then their final models, `greedy` and any other references play a round
//! robin, intermediate checkpoints play for an Elo-over-time curve, and a report is written. Every
//! step is recorded in `EXPDIR/state.json`, so a killed experiment continues with `--resume`.
//!
//! - [`spec`]: the variants and settings (a TOML file and/or flags), validated.
//! - [`state`]: the progress file and the resume logic.
//! - [`training`]: one variant's `koma pipeline` processes under the budget.
//! - [`matches`]: the round robin and the curve, played in resumable pieces.
//! - [`report`]: `report.json` and `report.md`.
//!
//! ```text
//! EXPDIR/experiment.toml   the resolved spec (configs/NAME.toml: copies of the variants' configs;
//!                          with replicates also configs/NAME.rK.toml, each run's)
//! EXPDIR/state.json        progress (atomic)
//! EXPDIR/model0/           model 0 (one per network shape)
//! EXPDIR/runs/NAME/        each variant's pipeline run directory
//! EXPDIR/players/          the checkpoints the matches play, named as they appear in the results
//! EXPDIR/results.jsonl     round-robin games     EXPDIR/curve.jsonl   Elo-curve games
//! EXPDIR/arena/games/      every match game as KIF
//! EXPDIR/logs/             each pipeline process's stdout (NAME-K.json) and stderr (NAME-K.log)
//! EXPDIR/report.md, report.json, elo-over-time.png
//! ```

pub mod matches;
pub mod replicates;
pub mod report;
pub mod spec;
pub mod state;
pub mod training;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crossbeam::channel::Sender;

use crate::error::{io, PipelineError, Result};
use crate::evaluation::MatchRunner;
use crate::run_dir::RunDir;
pub use report::ExperimentReport;
pub use spec::{evals_text, BudgetKind, ExperimentSpec, SpecOverrides, Variant, VariantSpec};
use state::ExperimentState;

/// The files of an experiment directory.
#[derive(Clone, Debug)]
pub struct ExpDir {
    pub root: PathBuf,
}

impl ExpDir {
    pub fn new(root: &Path) -> ExpDir {
        ExpDir { root: root.to_path_buf() }
    }
    pub fn spec_file(&self) -> PathBuf {
        self.root.join("experiment.toml")
    }
    pub fn state_file(&self) -> PathBuf {
        self.root.join("state.json")
    }
    pub fn config_copy(&self, name: &str) -> PathBuf {
        self.root.join("configs").join(format!("{name}.toml"))
    }
    pub fn run(&self, name: &str) -> PathBuf {
        self.root.join("runs").join(name)
    }
    pub fn model_zero_dir(&self) -> PathBuf {
        self.root.join("model0")
    }
    pub fn players(&self) -> PathBuf {
        self.root.join("players")
    }
    /// The final model of a variant as the round robin plays it (`NAME@SIMS`).
    pub fn player(&self, name: &str) -> PathBuf {
        self.players().join(format!("{name}.safetensors"))
    }
    /// An intermediate checkpoint on the curve (`NAME-STEP@SIMS`).
    pub fn curve_player(&self, name: &str, step: u64) -> PathBuf {
        self.players().join(format!("{name}-{step:08}.safetensors"))
    }
    pub fn results(&self) -> PathBuf {
        self.root.join("results.jsonl")
    }
    pub fn curve(&self) -> PathBuf {
        self.root.join("curve.jsonl")
    }
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    pub fn report_json(&self) -> PathBuf {
        self.root.join("report.json")
    }
    pub fn report_md(&self) -> PathBuf {
        self.root.join("report.md")
    }
    pub fn plot(&self) -> PathBuf {
        self.root.join("elo-over-time.png")
    }
}

/// What the experiment reports while it runs.
#[derive(Clone, Debug)]
pub enum ExperimentEvent {
    /// A `koma pipeline` process for variant `index` started (segment 1, or later on resume).
    VariantStarted {
        name: String,
        index: usize,
        segment: usize,
        command: String,
    },
    /// Budget used of `budget` seconds (of the budget's kind), its wall and CPU seconds, the
    /// newest checkpoint's step.
    VariantProgress {
        name: String,
        used: f64,
        budget: f64,
        wall: f64,
        cpu: f64,
        step: Option<u64>,
    },
    VariantEnded {
        name: String,
        reason: String,
        used: f64,
        budget: f64,
    },
    /// A match is being played: `played` of its `games`; `done` of `total` games of all matches.
    Match {
        label: String,
        index: usize,
        count: usize,
        played: usize,
        games: usize,
        done: usize,
        total: usize,
    },
    Note(String),
}

/// Whether a phase ran to its end or was stopped (Ctrl-C); a stopped experiment continues with
/// `--resume`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Interrupted,
}

#[derive(Clone, Debug)]
pub struct ExperimentOptions {
    pub dir: PathBuf,
    pub spec_file: Option<PathBuf>,
    pub overrides: SpecOverrides,
    pub resume: bool,
    /// The `koma` binary the variants' pipelines run with.
    pub exe: PathBuf,
    /// Set from outside (Ctrl-C): the running pipeline is stopped cleanly, matches stop between
    /// games.
    pub stop: Arc<AtomicBool>,
    /// The command line, for the report.
    pub command_line: String,
}

/// An experiment ready to run (or continue).
#[derive(Clone, Debug)]
pub struct Prepared {
    pub dir: ExpDir,
    pub spec: ExperimentSpec,
    pub variants: Vec<Variant>,
    pub state: ExperimentState,
    pub resumed: bool,
    /// Model 0 files and the variants (indices) each one serves.
    pub model_zero: Vec<(PathBuf, Vec<usize>)>,
}

/// What a run of the experiment came to.
#[derive(Clone, Debug)]
pub enum Outcome {
    Complete(Box<ExperimentReport>),
    /// Stopped (Ctrl-C); `koma experiment --dir DIR --resume` continues.
    Interrupted,
}

/// The state shared by the phases.
pub struct Context<'a> {
    pub dir: ExpDir,
    pub spec: &'a ExperimentSpec,
    pub state: ExperimentState,
    pub exe: PathBuf,
    pub stop: Arc<AtomicBool>,
    pub events: &'a Sender<ExperimentEvent>,
}

impl Context<'_> {
    pub fn save(&self) -> Result<()> {
        self.state.save(&self.dir.state_file())
    }
    pub fn send(&self, e: ExperimentEvent) {
        let _ = self.events.send(e);
    }
    /// A line for the log and the screen (the front end logs it).
    pub fn note(&self, s: String) {
        self.send(ExperimentEvent::Note(s));
    }
}

/// The spec the command line describes (a spec file and/or flags; with `--resume` and nothing
/// else, the experiment's own).
fn given_spec(options: &ExperimentOptions, stored: Option<&ExperimentSpec>) -> Result<ExperimentSpec> {
    let base = match (&options.spec_file, stored) {
        (Some(file), _) => ExperimentSpec::from_file(file)?,
        (None, Some(stored)) if !options.overrides.variants.is_empty() => {
            ExperimentSpec { variants: Vec::new(), ..stored.clone() }
        }
        (None, Some(stored)) => stored.clone(),
        (None, None) => ExperimentSpec::default(),
    };
    base.with_overrides(&options.overrides)
}

/// Model 0 files: one for all variants when they share `[model]`, else one per network shape
/// (named after its first variant). All from the first variant's `[run] seed`.
pub fn model_zero_plan(dir: &ExpDir, variants: &[Variant]) -> Vec<(PathBuf, Vec<usize>)> {
    let mut groups: Vec<(serde_json::Value, Vec<usize>)> = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        let key = serde_json::to_value(&v.config.model).expect("a model config serialises");
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let single = groups.len() == 1;
    groups
        .into_iter()
        .map(|(_, members)| {
            let sub = if single { PathBuf::new() } else { PathBuf::from(&variants[members[0]].name) };
            (dir.model_zero_dir().join(sub).join(koma_nn::checkpoint::file_name(0)), members)
        })
        .collect()
}

/// The model-0 player of a group (`model0`, or `model0-FIRSTVARIANT` when shapes differ).
fn model_zero_player(dir: &ExpDir, plan: &[(PathBuf, Vec<usize>)], group: usize, variants: &[Variant]) -> PathBuf {
    if plan.len() == 1 {
        dir.players().join("model0.safetensors")
    } else {
        dir.players().join(format!("model0-{}.safetensors", variants[plan[group].1[0]].name))
    }
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).map(|mut d| d.next().is_none()).unwrap_or(true)
}

/// Writes the config copies that are missing: each run's (`configs/RUN.toml`, what it trains
/// with) and, with replicates, each variant's as written (`configs/NAME.toml`, which
/// `experiment.toml` names; replicate 1's text).
fn write_config_copies(dir: &ExpDir, variants: &[Variant]) -> Result<()> {
    let spec_copies = variants.iter().filter(|v| v.name == spec::replicate_name(&v.family, 1));
    let copies = variants.iter().map(|v| (&v.name, v)).chain(spec_copies.map(|v| (&v.family, v)));
    for (name, v) in copies {
        let path = dir.config_copy(name);
        if !path.is_file() {
            koma_base::durable::write(&path, v.text.as_bytes())?;
        }
    }
    Ok(())
}

/// Experiments with replicates started before koma wrote `configs/NAME.toml` named it in
/// `experiment.toml` all the same: restores it from replicate 1's copy (the config as written).
fn restore_spec_copies(dir: &ExpDir, stored: &ExperimentSpec) -> Result<()> {
    if stored.replicates < 2 {
        return Ok(());
    }
    for v in &stored.variants {
        let first = dir.config_copy(&spec::replicate_name(&v.name, 1));
        if !v.config.is_file() && first.is_file() {
            let text = std::fs::read(&first).map_err(io(&first))?;
            koma_base::durable::write(&v.config, &text)?;
        }
    }
    Ok(())
}

/// Checks the spec, sets up (or reopens) the experiment directory and writes model 0. With
/// `--resume`, a larger `--replicates` grows the experiment: the new runs are added.
pub fn prepare(options: &ExperimentOptions) -> Result<Prepared> {
    let dir = ExpDir::new(&options.dir);
    let exists = dir.spec_file().is_file();
    let refuse = |message: String| PipelineError::Run { path: dir.root.clone(), message };
    let (spec, variants, state) = if options.resume {
        if !exists {
            return Err(refuse("--resume: not an experiment (no experiment.toml); start one without --resume".into()));
        }
        let stored = ExperimentSpec::from_file(&dir.spec_file())?;
        restore_spec_copies(&dir, &stored)?;
        let (spec, variants) = if options.spec_file.is_some() || !options.overrides.is_empty() {
            let given = given_spec(options, Some(&stored))?;
            // Variants the experiment lacks are added to it; those it has keep their place (and
            // must have the same config). More replicates than it has grows it too; anything
            // else that differs is another experiment.
            let added: Vec<VariantSpec> =
                given.variants.iter().filter(|v| !stored.variants.iter().any(|s| s.name == v.name)).cloned().collect();
            let as_given = |s: &VariantSpec| given.variants.iter().find(|v| v.name == s.name).unwrap_or(s).clone();
            let given = ExperimentSpec {
                variants: stored.variants.iter().map(as_given).chain(added.iter().cloned()).collect(),
                ..given
            };
            let given_variants = given.load()?;
            let grown = ExperimentSpec {
                replicates: given.replicates.max(stored.replicates),
                variants: stored.variants.iter().chain(&added).cloned().collect(),
                ..stored.clone()
            };
            let grown_variants = grown.load()?;
            let diffs = given.differences(&given_variants, &grown, &grown_variants);
            if !diffs.is_empty() {
                return Err(refuse(format!(
                    "--resume: this experiment was started with other settings ({}); resume it with `--resume` alone, or start a new one in another --dir",
                    diffs.join("; ")
                )));
            }
            let is_added = |v: &Variant| added.iter().any(|a| a.name == v.family);
            if !added.is_empty() {
                // The old runs keep their model 0: a new network shape would rename it.
                let old: Vec<Variant> = grown_variants.iter().filter(|v| !is_added(v)).cloned().collect();
                let old_plan = model_zero_plan(&dir, &old);
                let new_plan = model_zero_plan(&dir, &grown_variants);
                if old_plan.iter().any(|(path, _)| !new_plan.iter().any(|(p, _)| p == path)) {
                    return Err(refuse(format!(
                        "--resume --variant {}: its [model] differs from every variant's here, and the experiment's model 0 was written for theirs; start a new experiment in another --dir",
                        added[0].name
                    )));
                }
            }
            if grown.replicates > stored.replicates && stored.replicates == 1 {
                return Err(refuse(format!(
                    "--resume --replicates {}: this experiment trained one run per variant, named after the variant (runs/{}), not NAME.rK; start a new experiment with --replicates in another --dir",
                    grown.replicates, stored.variants[0].name
                )));
            }
            if grown.replicates > stored.replicates || !added.is_empty() {
                // An added variant has not trained yet: copies an interrupted addition left are
                // replaced by the config given now.
                for v in grown_variants.iter().filter(|v| is_added(v)) {
                    for copy in [dir.config_copy(&v.name), dir.config_copy(&v.family)] {
                        if copy.is_file() {
                            std::fs::remove_file(&copy).map_err(io(&copy))?;
                        }
                    }
                }
                write_config_copies(&dir, &grown_variants)?;
                // Last: from now on the experiment has the new runs.
                koma_base::durable::write(&dir.spec_file(), grown.resolved_text().as_bytes())?;
                let mut growth = Vec::new();
                if grown.replicates > stored.replicates {
                    growth.push(format!("from {} to {} replicates per variant", stored.replicates, grown.replicates));
                }
                if !added.is_empty() {
                    let names: Vec<&str> = added.iter().map(|v| v.name.as_str()).collect();
                    growth.push(format!("by the variant(s) {}", names.join(", ")));
                }
                tracing::info!(
                    "{}: grows {}: the new runs train, then only their pairings play",
                    dir.root.display(),
                    growth.join(" and ")
                );
            }
            (grown, grown_variants)
        } else {
            let variants = stored.load()?;
            (stored, variants)
        };
        let state = if dir.state_file().is_file() {
            ExperimentState::load(&dir.state_file())?
        } else {
            ExperimentState::default()
        };
        (spec, variants, state)
    } else {
        let given = given_spec(options, None)?;
        let variants = given.load()?;
        if exists {
            let stored = ExperimentSpec::from_file(&dir.spec_file())?;
            let same = stored.load().map(|sv| given.differences(&variants, &stored, &sv)).unwrap_or_default();
            return Err(refuse(if same.is_empty() {
                "already holds this experiment: continue it with --resume, or choose another --dir".into()
            } else {
                format!(
                    "holds a different experiment ({}): choose another --dir (or continue that one with --resume)",
                    same.join("; ")
                )
            }));
        }
        if dir.root.exists() && !is_empty_dir(&dir.root) {
            return Err(refuse(
                "is not empty and holds no experiment (no experiment.toml): choose a new or empty --dir".into(),
            ));
        }
        for path in [dir.root.join("configs"), dir.root.join("runs"), dir.model_zero_dir(), dir.players(), dir.logs()] {
            std::fs::create_dir_all(&path).map_err(io(&path))?;
        }
        write_config_copies(&dir, &variants)?;
        let state = ExperimentState::default();
        state.save(&dir.state_file())?;
        // Last: from now on the directory holds this experiment.
        koma_base::durable::write(&dir.spec_file(), given.resolved_text().as_bytes())?;
        (given, variants, state)
    };
    let mut state = state;
    state.invocations.push(options.command_line.clone());
    state.save(&dir.state_file())?;
    let model_zero = model_zero_plan(&dir, &variants);
    let seed = variants[0].config.run.seed;
    for (path, members) in &model_zero {
        if !path.is_file() {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            crate::run::write_model_zero(path, &variants[members[0]].config.model, seed)?;
        }
    }
    Ok(Prepared { dir, spec, variants, state, resumed: options.resume, model_zero })
}

/// Trains every variant that still needs it, plays the matches, and builds the report
/// (`report.json`; the caller draws the plot and writes `report.md` with [`write_markdown`]).
pub fn run(prepared: &Prepared, options: &ExperimentOptions, events: &Sender<ExperimentEvent>) -> Result<Outcome> {
    let variants = &prepared.variants;
    let mut ctx = Context {
        dir: prepared.dir.clone(),
        spec: &prepared.spec,
        state: prepared.state.clone(),
        exe: options.exe.clone(),
        stop: options.stop.clone(),
        events,
    };
    // 1. Training, one variant after another.
    for (index, v) in variants.iter().enumerate() {
        let m0 = &prepared
            .model_zero
            .iter()
            .find(|(_, members)| members.contains(&index))
            .expect("every variant has a model 0")
            .0;
        if training::train(&mut ctx, index, v, m0)? == Flow::Interrupted {
            return Ok(Outcome::Interrupted);
        }
    }
    // 2. The matches.
    let mut m0_players = Vec::new();
    for (group, (path, members)) in prepared.model_zero.iter().enumerate() {
        let player = model_zero_player(&ctx.dir, &prepared.model_zero, group, variants);
        if !player.is_file() {
            crate::run_dir::copy_checkpoint(path, &player)?;
        }
        m0_players.push((player, members.clone()));
    }
    let plan = matches::plan(&ctx, variants, &m0_players)?;
    let mut arena_config = variants[0].config.clone();
    arena_config.arena.simulations = prepared.spec.simulations;
    arena_config.arena.concurrency = prepared.spec.concurrency;
    arena_config.arena.max_plies = prepared.spec.max_plies;
    arena_config.arena.openings = prepared.spec.openings.clone();
    let games_dir = RunDir::new(&ctx.dir.root);
    let mut arena = MatchRunner::new(&games_dir, &arena_config, options.stop.clone())?;
    if matches::play(&mut ctx, &mut arena, &plan)? == Flow::Interrupted {
        return Ok(Outcome::Interrupted);
    }
    drop(arena);
    // 3. The report.
    let seed = variants[0].config.run.seed;
    let notes: Vec<report::ModelZero> = prepared
        .model_zero
        .iter()
        .enumerate()
        .map(|(group, (_, members))| report::ModelZero {
            file: model_zero_player(&ctx.dir, &prepared.model_zero, group, variants)
                .strip_prefix(&ctx.dir.root)
                .map(Path::to_path_buf)
                .unwrap_or_default()
                .display()
                .to_string(),
            variants: members.iter().map(|&i| variants[i].name.clone()).collect(),
            seed,
        })
        .collect();
    let report = report::build(&ctx.dir, &prepared.spec, variants, &ctx.state, &notes)?;
    Ok(Outcome::Complete(Box::new(report)))
}

/// Writes `report.md`; `plot` is the Elo-over-time image or why there is none.
pub fn write_markdown(
    dir: &ExpDir,
    report: &ExperimentReport,
    plot: std::result::Result<&Path, &str>,
) -> Result<PathBuf> {
    let text = report::markdown(report, plot);
    koma_base::durable::write(&dir.report_md(), text.as_bytes())?;
    Ok(dir.report_md())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(dir: &Path, variants: &[String], resume: bool) -> ExperimentOptions {
        ExperimentOptions {
            dir: dir.to_path_buf(),
            spec_file: None,
            overrides: SpecOverrides {
                cpu_minutes: Some(0.1),
                variants: variants.to_vec(),
                ..SpecOverrides::default()
            },
            resume,
            exe: PathBuf::from("koma"),
            stop: Arc::new(AtomicBool::new(false)),
            command_line: "koma experiment …".into(),
        }
    }

    #[test]
    fn prepare_sets_up_once_and_refuses_other_experiments() {
        let tmp = tempfile::tempdir().unwrap();
        let small = "[model]\nblocks = 1\nchannels = 8\n";
        std::fs::write(tmp.path().join("a.toml"), small).unwrap();
        std::fs::write(
            tmp.path().join("b.toml"),
            format!("{small}[selfplay]\nsimulations = 4\ncheap_simulations = 2\n"),
        )
        .unwrap();
        std::fs::write(tmp.path().join("c.toml"), "[model]\nblocks = 1\nchannels = 16\n").unwrap();
        let arg = |n: &str, f: &str| format!("{n}={}", tmp.path().join(f).display());
        let exp = tmp.path().join("exp");
        let ab = [arg("a", "a.toml"), arg("b", "b.toml")];
        let p = prepare(&options(&exp, &ab, false)).unwrap();
        assert_eq!(p.model_zero.len(), 1, "same [model]: one model 0");
        assert!(p.model_zero[0].0.is_file());
        assert!(exp.join("experiment.toml").is_file() && exp.join("configs/b.toml").is_file());
        // Again without --resume: refused, and told to resume.
        let e = prepare(&options(&exp, &ab, false)).unwrap_err().to_string();
        assert!(e.contains("--resume"), "{e}");
        // A different experiment in the same directory: refused, naming the difference.
        let ac = [arg("a", "a.toml"), arg("c", "c.toml")];
        let e = prepare(&options(&exp, &ac, false)).unwrap_err().to_string();
        assert!(e.contains("different experiment") && e.contains("variants"), "{e}");
        // Adding c to it on --resume: refused, c's network has no model 0 here.
        let e = prepare(&options(&exp, &ac, true)).unwrap_err().to_string();
        assert!(e.contains("--variant c") && e.contains("[model]") && e.contains("another --dir"), "{e}");
        assert_eq!(ExperimentSpec::from_file(&exp.join("experiment.toml")).unwrap().variants.len(), 2);
        // A variant it has, with another config: refused, naming it.
        let e = prepare(&options(&exp, &[arg("b", "c.toml")], true)).unwrap_err().to_string();
        assert!(e.contains("other settings") && e.contains("variant \"b\""), "{e}");
        // --resume alone reopens it from its own files, even if the user's config changed since.
        std::fs::write(tmp.path().join("b.toml"), "[selfplay]\nsimulations = 5\ncheap_simulations = 2\n").unwrap();
        let mut o = options(&exp, &[], true);
        o.overrides = SpecOverrides::default();
        let p2 = prepare(&o).unwrap();
        assert_eq!(p2.variants[1].config.selfplay.simulations, 4);
        assert_eq!(p2.state.invocations.len(), 2);
        // Different [model]: one model 0 per shape.
        let exp2 = tmp.path().join("exp2");
        let p3 = prepare(&options(&exp2, &ac, false)).unwrap();
        assert_eq!(p3.model_zero.len(), 2);
        assert!(p3.model_zero[1].0.ends_with("model0/c/model-00000000.safetensors"));
        // A non-empty directory that is not an experiment is refused.
        let e = prepare(&options(tmp.path(), &ab, false)).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
        let e = prepare(&options(&tmp.path().join("nothing"), &ab, true)).unwrap_err().to_string();
        assert!(e.contains("not an experiment"), "{e}");
    }

    #[test]
    fn replicated_experiments_resume_and_grow_by_their_new_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let a_text = "# a as written\n[model]\nblocks = 1\nchannels = 8\n[train]\nseed = 7\n";
        std::fs::write(tmp.path().join("a.toml"), a_text).unwrap();
        std::fs::write(tmp.path().join("b.toml"), "[model]\nblocks = 1\nchannels = 8\n").unwrap();
        let ab = ["a", "b"].map(|n| format!("{n}={}", tmp.path().join(format!("{n}.toml")).display()));
        let exp = tmp.path().join("exp");
        let with_replicates = |n: usize, variants: &[String]| {
            let mut o = options(&exp, variants, true);
            o.overrides.replicates = Some(n);
            o
        };
        let resume_alone = || {
            let mut o = options(&exp, &[], true);
            o.overrides = SpecOverrides::default();
            o
        };
        let mut start = with_replicates(2, &ab);
        start.resume = false;
        let p = prepare(&start).unwrap();
        let names = |p: &Prepared| p.variants.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&p), ["a.r1", "a.r2", "b.r1", "b.r2"]);
        // experiment.toml names each variant's config as written, and that copy exists: the
        // resolved spec reruns elsewhere and --resume alone reopens the experiment.
        assert_eq!(std::fs::read_to_string(exp.join("configs/a.toml")).unwrap(), a_text);
        let rerun = ExperimentSpec::from_file(&exp.join("experiment.toml")).unwrap();
        assert_eq!(rerun.load().unwrap().len(), 4);
        assert_eq!(names(&prepare(&resume_alone()).unwrap()), names(&p));
        // One started before those copies were written: restored from replicate 1's.
        std::fs::remove_file(exp.join("configs/a.toml")).unwrap();
        std::fs::remove_file(exp.join("configs/b.toml")).unwrap();
        assert_eq!(prepare(&resume_alone()).unwrap().variants.len(), 4);
        assert_eq!(std::fs::read_to_string(exp.join("configs/a.toml")).unwrap(), a_text);
        // Progress so far, which growing must keep.
        let mut state = ExperimentState::load(&exp.join("state.json")).unwrap();
        state.variant("a.r1").finished = true;
        state.matches.insert("round robin: a.r1@32 vs a.r2@32".into(), state::MatchState { pairs_done: 4 });
        state.save(&exp.join("state.json")).unwrap();
        // --resume --replicates 3 adds a.r3 and b.r3 (seed + 2), keeps what was done, and
        // records the new count.
        let grown = prepare(&with_replicates(3, &[])).unwrap();
        assert_eq!(names(&grown), ["a.r1", "a.r2", "a.r3", "b.r1", "b.r2", "b.r3"]);
        assert_eq!(grown.spec.replicates, 3);
        assert_eq!(grown.variants[2].config.train.seed, 9);
        assert!(exp.join("configs/a.r3.toml").is_file() && exp.join("configs/b.r3.toml").is_file());
        assert!(grown.state.variants["a.r1"].finished);
        assert_eq!(grown.state.pairs_done("round robin: a.r1@32 vs a.r2@32"), 4);
        assert_eq!(ExperimentSpec::from_file(&exp.join("experiment.toml")).unwrap().replicates, 3);
        assert_eq!(names(&prepare(&resume_alone()).unwrap()), names(&grown));
        // The same again is a plain resume; the variants given again agree too.
        assert_eq!(prepare(&with_replicates(3, &ab)).unwrap().variants.len(), 6);
        // Fewer runs than trained, or other settings with the growth: refused, naming them.
        let e = prepare(&with_replicates(2, &[])).unwrap_err().to_string();
        assert!(e.contains("replicates: 2 here, 3 in the experiment"), "{e}");
        let mut other = with_replicates(4, &[]);
        other.overrides.games = Some(2);
        let e = prepare(&other).unwrap_err().to_string();
        assert!(e.contains("games"), "{e}");
        assert_eq!(ExperimentSpec::from_file(&exp.join("experiment.toml")).unwrap().replicates, 3);
        // --resume --variant c=… adds variant c with as many replicates; the rest is kept, and
        // the experiment lists c from now on.
        std::fs::write(tmp.path().join("c.toml"), "[model]\nblocks = 1\nchannels = 8\n[train]\nseed = 3\n").unwrap();
        let c = [format!("c={}", tmp.path().join("c.toml").display())];
        // A copy an interrupted addition left behind is replaced.
        std::fs::write(exp.join("configs/c.r1.toml"), "# stale\n").unwrap();
        let added = prepare(&options(&exp, &c, true)).unwrap();
        assert!(std::fs::read_to_string(exp.join("configs/c.r1.toml")).unwrap().contains("seed = 3"));
        assert_eq!(names(&added), ["a.r1", "a.r2", "a.r3", "b.r1", "b.r2", "b.r3", "c.r1", "c.r2", "c.r3"]);
        assert_eq!(added.variants[8].config.train.seed, 5);
        assert_eq!(added.model_zero.len(), 1);
        assert!(added.state.variants["a.r1"].finished);
        assert_eq!(added.state.pairs_done("round robin: a.r1@32 vs a.r2@32"), 4);
        assert!(exp.join("configs/c.toml").is_file() && exp.join("configs/c.r3.toml").is_file());
        let stored = ExperimentSpec::from_file(&exp.join("experiment.toml")).unwrap();
        assert_eq!(stored.variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(names(&prepare(&resume_alone()).unwrap()), names(&added));
        // One run per variant (runs/NAME) cannot become NAME.r1 …: refused.
        let single = tmp.path().join("single");
        let mut o = options(&single, &ab, false);
        prepare(&o).unwrap();
        o.resume = true;
        o.overrides.replicates = Some(2);
        let e = prepare(&o).unwrap_err().to_string();
        assert!(e.contains("one run per variant"), "{e}");
    }
}
