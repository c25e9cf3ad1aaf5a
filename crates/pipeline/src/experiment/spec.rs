//! What an experiment is: its variants (a name and a run config each), the budget every variant
//! trains for, and the settings of the round robin that rates them. It comes from a TOML file
//! (`koma experiment --spec FILE`), from command-line flags, or both; the resolved spec is written
//! into the experiment directory as `experiment.toml`, so one file reproduces the experiment.
//!
//! ```toml
//! cpu_minutes = 10          # or minutes = 10 (wall clock), or evals = 5000000; exactly one
//! games = 32                # per pairing of the round robin
//! [[variant]]
//! name = "base"
//! config = "../configs/tiny-cpu.toml"   # relative to this file
//! [[variant]]
//! name = "gumbel"
//! config = "gumbel.toml"
//! ```

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::PipelineConfig;
use crate::error::{io, PipelineError, Result};
use crate::players::reference_factory;
use koma_shogi::OpeningSuite;

/// The reference every experiment includes; the ratings' anchor (0 Elo).
pub const ANCHOR: &str = "greedy";

/// Names a variant may not take: they would clash with players of the round robin.
const RESERVED: [&str; 5] = ["greedy", "random", "mcts-material", "alphabeta", "model0"];

/// One variant: a name (a run directory `runs/NAME` and a player `NAME@SIMS`) and its config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    /// Names the variant's run (`runs/NAME`) and its player (`NAME@SIMS`); letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// The run config (as `koma pipeline --config` reads); in a spec file relative to the file.
    pub config: PathBuf,
}

/// The whole experiment as a file holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ExperimentSpec {
    /// Budget per variant in wall-clock minutes (set this or `cpu_minutes`).
    pub minutes: f64,
    /// Budget per variant in minutes of process CPU time (user + system, all threads): fair even
    /// when the machine's load changes between variants.
    pub cpu_minutes: f64,
    /// Budget per variant in positions its self-play evaluates with the network (`koma pipeline
    /// --evals`): the same work on every machine, where minutes differ.
    pub evals: u64,
    /// Games per pairing of the round robin (rounded up to colour-swapped pairs).
    pub games: usize,
    /// Simulations per move of every network player.
    pub simulations: u32,
    /// Opening suite of every match (`builtin:balanced-8`, a file of USI lines, or "" for the
    /// start position only).
    #[serde(with = "crate::config_fields::opening_suite")]
    #[schemars(with = "String")]
    pub openings: OpeningSuite,
    /// Reference players besides `greedy` (which is always in): `random`, `mcts-material[@N]`,
    /// `alphabeta@D`.
    pub references: Vec<String>,
    /// Intermediate checkpoints per variant on the Elo-over-time plot (evenly spaced in time).
    pub curve_points: usize,
    /// Games each of those plays against `greedy` and against model 0 (0: no curve).
    pub curve_games: usize,
    /// Games played at once in the matches.
    pub concurrency: usize,
    /// Game length limit of the matches, in plies (a draw when reached).
    pub max_plies: u32,
    /// Runs of each variant (≥ 1). With N > 1 each variant is trained N times, as `NAME.r1` …
    /// `NAME.rN`, from the same model 0 with different seeds (`[train] seed` + k; self-play draws
    /// a fresh seed per run), all in the round robin; the report gives the spread of each
    /// variant's Elo across its runs and claims a gain only when the interval across runs
    /// excludes 0: run-to-run spread is as large as most effects.
    pub replicates: usize,
    /// The variants, two or more, each as a `[[variant]]` table.
    #[serde(rename = "variant")]
    pub variants: Vec<VariantSpec>,
}

impl Default for ExperimentSpec {
    fn default() -> ExperimentSpec {
        ExperimentSpec {
            minutes: 0.0,
            cpu_minutes: 0.0,
            evals: 0,
            games: 32,
            simulations: 32,
            openings: OpeningSuite::builtin("balanced-8"),
            references: Vec::new(),
            curve_points: 4,
            curve_games: 8,
            concurrency: 2,
            max_plies: 256,
            replicates: 1,
            variants: Vec::new(),
        }
    }
}

/// How a variant's budget is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    Wall,
    Cpu,
    /// Self-play evaluations.
    Evals,
}

impl BudgetKind {
    pub fn label(self) -> &'static str {
        match self {
            BudgetKind::Wall => "wall-clock",
            BudgetKind::Cpu => "CPU",
            BudgetKind::Evals => "evaluation",
        }
    }

    /// A budget of `amount` (minutes, or evaluations) in the unit a variant's use of it is
    /// counted in: seconds, or evaluations.
    pub fn units(self, amount: f64) -> f64 {
        match self {
            BudgetKind::Wall | BudgetKind::Cpu => amount * 60.0,
            BudgetKind::Evals => amount,
        }
    }

    /// Budget in the unit of [`VariantState::used`](crate::experiment::state::VariantState::used)
    /// (seconds, or evaluations), for people: `1.5 minutes`, `4142 evaluations`.
    pub fn units_text(self, units: f64) -> String {
        match self {
            BudgetKind::Evals => format!("{} evaluations", evals_text(units)),
            _ => format!("{:.1} minutes", units / 60.0),
        }
    }

    /// `amount` of this budget for people: `10 CPU minutes`, `5.00 M evaluations`.
    pub fn describe(self, amount: f64) -> String {
        match self {
            BudgetKind::Evals => format!("{} evaluations", evals_text(amount)),
            kind => format!("{amount} {} minutes", kind.label()),
        }
    }
}

/// A count of evaluations for people: `4142`, `5.00 M`.
pub fn evals_text(evals: f64) -> String {
    if evals >= 1e6 {
        format!("{:.2} M", evals / 1e6)
    } else {
        format!("{evals:.0}")
    }
}

/// Settings given on the command line; each one given replaces the spec file's (or, with
/// `--resume`, must agree with the experiment's).
#[derive(Clone, Debug, Default)]
pub struct SpecOverrides {
    pub minutes: Option<f64>,
    pub cpu_minutes: Option<f64>,
    pub evals: Option<u64>,
    pub games: Option<usize>,
    pub simulations: Option<u32>,
    pub openings: Option<String>,
    pub references: Vec<String>,
    pub curve_points: Option<usize>,
    pub curve_games: Option<usize>,
    pub concurrency: Option<usize>,
    pub max_plies: Option<u32>,
    pub replicates: Option<usize>,
    /// `NAME=CONFIG` or `CONFIG` (named after the file's stem), paths relative to the working
    /// directory.
    pub variants: Vec<String>,
}

impl SpecOverrides {
    pub fn is_empty(&self) -> bool {
        self.minutes.is_none()
            && self.cpu_minutes.is_none()
            && self.evals.is_none()
            && self.games.is_none()
            && self.simulations.is_none()
            && self.openings.is_none()
            && self.references.is_empty()
            && self.curve_points.is_none()
            && self.curve_games.is_none()
            && self.concurrency.is_none()
            && self.max_plies.is_none()
            && self.replicates.is_none()
            && self.variants.is_empty()
    }
}

/// A variant with its config read and validated: one run of the experiment (with replicates, one
/// of a spec variant's runs).
#[derive(Clone, Debug)]
pub struct Variant {
    /// The run's name: the spec variant's, with `.rK` for replicate K when there are several.
    pub name: String,
    /// The spec variant's name (the same as `name` without replicates).
    pub family: String,
    /// Where the config was read from.
    pub source: PathBuf,
    pub text: String,
    pub config: PipelineConfig,
}

fn bad(origin: &str, message: impl Into<String>) -> PipelineError {
    PipelineError::Config { origin: origin.to_string(), message: message.into() }
}

/// `NAME=PATH`, or `PATH` named after its file stem.
pub fn parse_variant_arg(arg: &str) -> Result<VariantSpec> {
    let (name, path) = match arg.split_once('=') {
        Some((name, path)) => (name.trim().to_string(), path.trim()),
        None => {
            let stem = Path::new(arg).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            (stem, arg.trim())
        }
    };
    if path.is_empty() {
        return Err(bad("--variant", format!("{arg:?}: expected NAME=CONFIG (a run config file)")));
    }
    Ok(VariantSpec { name, config: PathBuf::from(path) })
}

impl ExperimentSpec {
    /// Parses a spec file's text; variant configs are taken relative to `base` (the file's
    /// directory).
    pub fn parse(text: &str, origin: &str, base: &Path) -> Result<ExperimentSpec> {
        let mut spec: ExperimentSpec = toml::from_str(text).map_err(|e| bad(origin, e.message().to_string()))?;
        for v in &mut spec.variants {
            if v.config.is_relative() {
                v.config = base.join(&v.config);
            }
        }
        Ok(spec)
    }

    pub fn from_file(path: &Path) -> Result<ExperimentSpec> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        ExperimentSpec::parse(&text, &path.display().to_string(), &base)
    }

    /// This spec with the command line's settings applied. Variants come from one place only.
    pub fn with_overrides(mut self, o: &SpecOverrides) -> Result<ExperimentSpec> {
        // A budget given on the command line replaces the file's, whatever its kind.
        if o.minutes.is_some() || o.cpu_minutes.is_some() || o.evals.is_some() {
            self.minutes = o.minutes.unwrap_or(0.0);
            self.cpu_minutes = o.cpu_minutes.unwrap_or(0.0);
            self.evals = o.evals.unwrap_or(0);
        }
        macro_rules! set {
            ($($field:ident),*) => { $(if let Some(v) = &o.$field { self.$field = v.clone(); })* };
        }
        set!(games, simulations, curve_points, curve_games, concurrency, max_plies, replicates);
        if let Some(name) = &o.openings {
            self.openings = OpeningSuite::named(name).map_err(|e| bad("--openings", e.to_string()))?;
        }
        if !o.references.is_empty() {
            self.references = o.references.clone();
        }
        if !o.variants.is_empty() {
            if !self.variants.is_empty() {
                return Err(bad(
                    "--variant",
                    "the spec file already lists variants: give them in one place (the file or --variant)",
                ));
            }
            self.variants = o.variants.iter().map(|v| parse_variant_arg(v)).collect::<Result<_>>()?;
        }
        Ok(self)
    }

    /// The budget's kind and amount (minutes, or evaluations).
    pub fn budget(&self) -> (BudgetKind, f64) {
        if self.evals > 0 {
            (BudgetKind::Evals, self.evals as f64)
        } else if self.cpu_minutes > 0.0 {
            (BudgetKind::Cpu, self.cpu_minutes)
        } else {
            (BudgetKind::Wall, self.minutes)
        }
    }

    /// The reference players of the round robin: `greedy` first, then the others once each.
    pub fn reference_players(&self) -> Vec<String> {
        let mut out = vec![ANCHOR.to_string()];
        for r in &self.references {
            if !out.contains(r) {
                out.push(r.clone());
            }
        }
        out
    }

    /// Checks the settings and reads every variant's config; errors name what is wrong.
    pub fn load(&self) -> Result<Vec<Variant>> {
        let origin = "experiment";
        let budgets = [self.minutes, self.cpu_minutes];
        if budgets.iter().any(|m| !(m.is_finite() && *m >= 0.0)) {
            return Err(bad(origin, "the budget (minutes, cpu_minutes) must be a number of minutes ≥ 0"));
        }
        match [self.minutes > 0.0, self.cpu_minutes > 0.0, self.evals > 0].iter().filter(|&&given| given).count() {
            0 => {
                return Err(bad(
                    origin,
                    "no budget: give --minutes M (wall clock), --cpu-minutes M (CPU time) or --evals N (self-play \
                     evaluations) per variant",
                ))
            }
            1 => {}
            _ => return Err(bad(origin, "two budgets: give one of minutes, cpu_minutes and evals")),
        }
        if self.games == 0 {
            return Err(bad(origin, "games (per pairing) must be ≥ 1"));
        }
        if self.simulations == 0 {
            return Err(bad(origin, "simulations must be ≥ 1"));
        }
        if self.concurrency == 0 {
            return Err(bad(origin, "concurrency must be ≥ 1"));
        }
        if self.max_plies == 0 {
            return Err(bad(origin, "max_plies must be ≥ 1"));
        }
        if self.replicates == 0 {
            return Err(bad(origin, "replicates must be ≥ 1 (the runs of each variant)"));
        }
        for r in &self.references {
            reference_factory(r, self.simulations, koma_shogi::rules::GameRules::default())
                .map_err(|e| bad("references", e.to_string()))?;
        }
        if self.variants.len() < 2 {
            return Err(bad(
                origin,
                format!(
                    "an experiment compares at least two variants, got {}: give --variant NAME=CONFIG for each",
                    self.variants.len()
                ),
            ));
        }
        let mut variants = Vec::new();
        for v in &self.variants {
            check_name(&v.name)?;
            if variants.iter().any(|w: &Variant| w.family == v.name) {
                return Err(bad("variants", format!("two variants are named {:?}: names must differ", v.name)));
            }
            let text = std::fs::read_to_string(&v.config).map_err(|e| {
                bad(&format!("variant {:?}", v.name), format!("cannot read its config {}: {e}", v.config.display()))
            })?;
            let config = PipelineConfig::parse(&text, &format!("variant {:?} ({})", v.name, v.config.display()))?;
            if self.replicates == 1 {
                variants.push(Variant {
                    name: v.name.clone(),
                    family: v.name.clone(),
                    source: v.config.clone(),
                    text,
                    config,
                });
                continue;
            }
            for k in 1..=self.replicates {
                // Replicate 1 is the config as written; the others differ in the trainer's seed
                // and, where the config fixes one, self-play's (unset, self-play draws a fresh
                // seed in every run anyway).
                let (config, text) = if k == 1 {
                    (config.clone(), text.clone())
                } else {
                    let mut c = config.clone();
                    let offset = k as u64 - 1;
                    c.train.seed = config.train.seed.wrapping_add(offset);
                    c.selfplay.seed = config.selfplay.seed.map(|s| s.wrapping_add(offset));
                    let body = toml::to_string(&c).map_err(|e| bad(&v.name, format!("writing replicate {k}: {e}")))?;
                    let selfplay_seed = c.selfplay.seed.map_or(String::new(), |s| format!(", [selfplay] seed = {s}"));
                    let text = format!(
                        "# replicate {k} of variant {:?}: {} with [train] seed = {}{selfplay_seed}\n{body}",
                        v.name,
                        v.config.display(),
                        c.train.seed
                    );
                    (c, text)
                };
                variants.push(Variant {
                    name: replicate_name(&v.name, k),
                    family: v.name.clone(),
                    source: v.config.clone(),
                    text,
                    config,
                });
            }
        }
        Ok(variants)
    }

    /// The spec as written into the experiment directory: variant configs point at the copies
    /// in `configs/` (relative to the directory).
    pub fn resolved_text(&self) -> String {
        let mut spec = self.clone();
        for v in &mut spec.variants {
            v.config = PathBuf::from("configs").join(format!("{}.toml", v.name));
        }
        let body = toml::to_string(&spec).expect("an experiment spec serialises");
        format!(
            "# koma experiment: the resolved spec (docs/experiment.md). Rerun it elsewhere with\n\
             #   koma experiment --spec THIS_FILE --dir NEW_DIR\n\
             # Variant configs are copies, relative to this file.\n{body}"
        )
    }

    /// Settings that differ from `other`'s (variant configs compared by content), as
    /// `field: this → other` lines.
    pub fn differences(&self, mine: &[Variant], other: &ExperimentSpec, theirs: &[Variant]) -> Vec<String> {
        let mut out = Vec::new();
        let a = serde_json::to_value(ExperimentSpec { variants: Vec::new(), ..self.clone() }).expect("serialises");
        let b = serde_json::to_value(ExperimentSpec { variants: Vec::new(), ..other.clone() }).expect("serialises");
        if let (Some(a), Some(b)) = (a.as_object(), b.as_object()) {
            for (k, va) in a {
                if b.get(k) != Some(va) {
                    out.push(format!("{k}: {va} here, {} in the experiment", b.get(k).cloned().unwrap_or_default()));
                }
            }
        }
        let names = |v: &[Variant]| v.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
        if names(mine) != names(theirs) {
            out.push(format!("variants: {:?} here, {:?} in the experiment", names(mine), names(theirs)));
        } else {
            for (x, y) in mine.iter().zip(theirs) {
                if x.config != y.config {
                    out.push(format!(
                        "variant {:?}: its config ({}) differs from the experiment's copy",
                        x.name,
                        x.source.display()
                    ));
                }
            }
        }
        out
    }
}

/// The run name of replicate `k` of variant `family` (when there are several): `NAME.rK`.
pub fn replicate_name(family: &str, k: usize) -> String {
    format!("{family}.r{k}")
}

/// Variant names become directory and player names: letters, digits, `-`, `_`, `.`.
fn check_name(name: &str) -> Result<()> {
    let ok_chars = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if !ok_chars {
        return Err(bad("variants", format!("{name:?} is not a usable variant name (letters, digits, '-', '_', '.')")));
    }
    // NAME.rK names replicate K's run and config copy: a variant of that name would share them.
    if name.rsplit_once(".r").is_some_and(|(_, k)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit())) {
        return Err(bad(
            "variants",
            format!("{name:?} ends like a replicate's run name (NAME.rK, which --replicates uses); choose another variant name"),
        ));
    }
    if RESERVED.contains(&name) {
        return Err(bad(
            "variants",
            format!("{name:?} is the name of a player of the round robin; choose another variant name"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn spec_files_resolve_configs_relative_to_themselves() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        write(&dir.path().join("sub"), "a.toml", "[run]\nseed = 1\n");
        write(&dir.path().join("sub"), "b.toml", "[run]\nseed = 2\n");
        let spec_file = write(
            &dir.path().join("sub"),
            "exp.toml",
            "cpu_minutes = 2\ngames = 4\n[[variant]]\nname = \"a\"\nconfig = \"a.toml\"\n[[variant]]\nname = \"b\"\nconfig = \"b.toml\"\n",
        );
        let spec = ExperimentSpec::from_file(&spec_file).unwrap();
        assert_eq!(spec.budget(), (BudgetKind::Cpu, 2.0));
        assert_eq!(spec.games, 4);
        assert_eq!(spec.simulations, 32, "defaults fill the rest");
        let variants = spec.load().unwrap();
        assert_eq!(variants[1].config.run.seed, 2);
        // The resolved text parses back to the same settings, with configs under configs/.
        let back = ExperimentSpec::parse(&spec.resolved_text(), "resolved", Path::new("X")).unwrap();
        assert_eq!(back.variants[0].config, Path::new("X/configs/a.toml"));
        assert_eq!(
            ExperimentSpec { variants: Vec::new(), ..back },
            ExperimentSpec { variants: Vec::new(), ..spec.clone() }
        );
        // Overrides: the command line's budget replaces the file's kind of budget.
        let o = SpecOverrides { minutes: Some(3.0), games: Some(10), ..SpecOverrides::default() };
        let s2 = spec.clone().with_overrides(&o).unwrap();
        assert_eq!((s2.budget(), s2.games), ((BudgetKind::Wall, 3.0), 10));
        let o = SpecOverrides { variants: vec!["x=a.toml".into()], ..SpecOverrides::default() };
        assert!(spec.with_overrides(&o).unwrap_err().to_string().contains("one place"));
    }

    /// Replicates: each variant becomes N runs `NAME.rK`, the same config but for the trainer's
    /// seed (replicate 1 is the config as written), whose texts parse back to those configs.
    #[test]
    fn replicates_are_runs_that_differ_only_in_their_seeds() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.toml", "# a\n[train]\nseed = 5\n");
        let b = write(dir.path(), "b.toml", "[selfplay]\nsimulations = 8\ncheap_simulations = 2\nseed = 40\n");
        let spec = ExperimentSpec::default()
            .with_overrides(&SpecOverrides {
                cpu_minutes: Some(1.0),
                replicates: Some(3),
                variants: vec![format!("a={}", a.display()), format!("b={}", b.display())],
                ..Default::default()
            })
            .unwrap();
        let runs = spec.load().unwrap();
        let names: Vec<&str> = runs.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["a.r1", "a.r2", "a.r3", "b.r1", "b.r2", "b.r3"]);
        assert!(runs.iter().take(3).all(|v| v.family == "a") && runs.iter().skip(3).all(|v| v.family == "b"));
        let seeds: Vec<u64> = runs.iter().map(|v| v.config.train.seed).collect();
        assert_eq!(seeds[..3], [5, 6, 7]);
        // A self-play seed fixed by the config moves with the replicate too; unset, it stays unset.
        let selfplay_seeds: Vec<Option<u64>> = runs.iter().map(|v| v.config.selfplay.seed).collect();
        assert_eq!(selfplay_seeds, [None, None, None, Some(40), Some(41), Some(42)]);
        assert_eq!(runs[0].text, "# a\n[train]\nseed = 5\n");
        for v in &runs {
            let back = PipelineConfig::parse(&v.text, &v.name).unwrap();
            assert_eq!(back, v.config, "{}", v.name);
            let same_but_seed = |mut c: PipelineConfig| {
                c.train.seed = 0;
                c.selfplay.seed = None;
                c
            };
            let first = &runs[if v.family == "a" { 0 } else { 3 }].config;
            assert_eq!(same_but_seed(back), same_but_seed(first.clone()));
        }
        let zero = SpecOverrides { replicates: Some(0), ..Default::default() };
        assert!(spec.with_overrides(&zero).unwrap().load().unwrap_err().to_string().contains("replicates"));
    }

    #[test]
    fn bad_specs_are_errors_that_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.toml", "");
        let b = write(dir.path(), "b.toml", "[selfplay]\nsimulatons = 3\n");
        let spec = |variants: &[&str], budget: f64| {
            ExperimentSpec::default()
                .with_overrides(&SpecOverrides {
                    cpu_minutes: Some(budget),
                    variants: variants.iter().map(|s| s.to_string()).collect(),
                    ..Default::default()
                })
                .unwrap()
        };
        let err = |s: ExperimentSpec| s.load().unwrap_err().to_string();
        let a_arg = format!("x={}", a.display());
        assert!(err(spec(&[&a_arg], 1.0)).contains("at least two variants"));
        assert!(err(spec(&[&a_arg, &a_arg], 1.0)).contains("two variants are named \"x\""));
        assert!(err(spec(&[&a_arg, "y=/no/such/file.toml"], 1.0)).contains("/no/such/file.toml"));
        let e = err(spec(&[&a_arg, &format!("y={}", b.display())], 1.0));
        assert!(e.contains("variant \"y\"") && e.contains("simulatons"), "{e}");
        assert!(err(spec(&[&a_arg, &format!("greedy={}", a.display())], 1.0)).contains("greedy"));
        assert!(err(spec(&[&a_arg, &format!("a.r2={}", a.display())], 1.0)).contains("replicate"));
        spec(&[&a_arg, &format!("a.r2b={}", a.display())], 1.0).load().unwrap();
        assert!(err(spec(&[&a_arg, &format!("a/b={}", a.display())], 1.0)).contains("variant name"));
        assert!(err(spec(&[&a_arg, &format!("y={}", a.display())], 0.0)).contains("no budget"));
        // A bare path is named after its stem.
        let s = spec(&[&a.display().to_string(), &format!("y={}", a.display())], 1.0);
        assert_eq!(s.variants[0].name, "a");
        assert_eq!(s.load().unwrap().len(), 2);
        let mut both = s.clone();
        both.minutes = 1.0;
        assert!(err(both).contains("two budgets"));
        let mut evals = s.clone();
        evals.evals = 1000;
        assert!(err(evals.clone()).contains("two budgets"));
        evals.cpu_minutes = 0.0;
        assert_eq!(evals.budget(), (BudgetKind::Evals, 1000.0));
        evals.load().unwrap();
        let mut r = s;
        r.references = vec!["stockfish".into()];
        assert!(err(r).contains("stockfish"));
        let e = ExperimentSpec::parse("gmaes = 3\n", "x.toml", Path::new(".")).unwrap_err().to_string();
        assert!(e.contains("x.toml") && e.contains("gmaes"), "{e}");
    }
}
