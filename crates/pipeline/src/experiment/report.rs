//! The experiment's report: `EXPDIR/report.json` (everything, for scripts and the plot) and
//! `EXPDIR/report.md` (the table with Elo and 95% intervals, the Elo-over-time plot, model 0, the
//! config fields that differ between variants, and the exact commands run).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use koma_arena::ratings::{fit, read_results, GameOutcome, Rating};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::experiment::matches::{curve_checkpoints, model_player, player_name, position};
use crate::experiment::replicates::{summarize, ReplicateSummary};
use crate::experiment::spec::{BudgetKind, ExperimentSpec, Variant, ANCHOR};
use crate::experiment::state::ExperimentState;
use crate::experiment::ExpDir;
use crate::run_dir::RunDir;

/// One row of the table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariantRow {
    pub variant: String,
    /// The final model's name in the games (`NAME@SIMS`).
    pub player: String,
    pub config: String,
    pub elo: Option<f64>,
    /// Half-width of the 95% interval.
    pub margin: Option<f64>,
    pub score_vs_anchor: Option<f64>,
    pub games_vs_anchor: usize,
    /// Games in the round robin.
    pub games: usize,
    pub selfplay_games: usize,
    pub samples: usize,
    pub trainer_steps: u64,
    pub cpu_minutes: f64,
    pub wall_minutes: f64,
    /// Positions its self-play evaluated.
    #[serde(default)]
    pub evals: u64,
    /// Load averages (1, 5, 15 minutes) when its first pipeline started and its last ended.
    pub load_start: Option<[f64; 3]>,
    pub load_end: Option<[f64; 3]>,
    /// Pipeline processes it took (more than one after an interruption).
    pub segments: usize,
}

/// A player's rating.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlayerRating {
    pub player: String,
    pub elo: f64,
    pub margin: f64,
    pub games: f64,
    pub points: f64,
}

impl From<Rating> for PlayerRating {
    fn from(r: Rating) -> PlayerRating {
        PlayerRating { player: r.player, elo: r.elo, margin: r.margin, games: r.games, points: r.points }
    }
}

/// A point of a variant's Elo-over-time line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CurvePoint {
    pub player: String,
    pub step: u64,
    /// Where the checkpoint appeared on the budget's axis: minutes of its kind, or millions of
    /// self-play evaluations.
    #[serde(alias = "minutes")]
    pub at: f64,
    pub elo: f64,
    pub margin: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Curve {
    pub variant: String,
    pub points: Vec<CurvePoint>,
}

/// A model 0 and the variants that start from it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelZero {
    pub file: String,
    pub variants: Vec<String>,
    pub seed: u64,
}

/// A config field whose value differs between variants.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigDifference {
    pub field: String,
    /// By variant; the value as TOML would write it (or `(default)` where a variant lacks it).
    pub values: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExperimentReport {
    pub directory: String,
    pub budget_kind: BudgetKind,
    /// Per variant: minutes of its kind, or evaluations.
    #[serde(alias = "budget_minutes")]
    pub budget: f64,
    /// The player at 0 Elo.
    pub anchor: String,
    pub simulations: u32,
    pub games_per_pairing: usize,
    pub openings: String,
    pub variants: Vec<VariantRow>,
    /// Every player of the round robin (references included), best first.
    pub ratings: Vec<PlayerRating>,
    /// The axis of the curves: `CPU minutes`, `wall-clock minutes` or `million self-play
    /// evaluations`.
    pub x_axis: String,
    pub curves: Vec<Curve>,
    /// Ratings of the reference players in the fit of the curves (horizontal lines on the plot).
    pub curve_references: Vec<PlayerRating>,
    pub model_zero: Vec<ModelZero>,
    pub config_differences: Vec<ConfigDifference>,
    /// The `koma experiment` command lines, then every `koma pipeline` command, as run.
    pub experiment_commands: Vec<String>,
    pub pipeline_commands: Vec<String>,
    /// With replicates: each spec variant's Elo across its runs and its gain over the first.
    #[serde(default)]
    pub replicates: Vec<ReplicateSummary>,
}

fn read_games(path: &Path) -> Result<Vec<GameOutcome>> {
    if !path.is_file() {
        return Ok(Vec::new());
    }
    Ok(read_results(path)?)
}

/// Self-play games and samples in a run's shards (unreadable shards are skipped).
fn selfplay_totals(run: &RunDir) -> (usize, usize) {
    let Ok(entries) = std::fs::read_dir(run.selfplay_dir()) else { return (0, 0) };
    let mut games = 0;
    let mut samples = 0;
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "h5") {
            if let Ok(reader) = koma_data::ShardReader::open(&path) {
                samples += reader.len();
                games += reader.dataset_raw::<i8>("game_winner").map(|v| v.len()).unwrap_or(0);
            }
        }
    }
    (games, samples)
}

/// `path.to.field` → value, for every leaf of a JSON value.
fn flatten(prefix: &str, value: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// The effective config fields (defaults filled in) whose values differ between variants.
pub fn config_differences(variants: &[Variant]) -> Vec<ConfigDifference> {
    let flat: Vec<BTreeMap<String, String>> = variants
        .iter()
        .map(|v| {
            let mut m = BTreeMap::new();
            flatten("", &serde_json::to_value(&v.config).expect("a config serialises"), &mut m);
            m
        })
        .collect();
    let mut fields: Vec<&String> = flat.iter().flat_map(|m| m.keys()).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .filter(|f| flat.iter().any(|m| m.get(*f) != flat[0].get(*f)))
        .map(|f| ConfigDifference {
            field: f.clone(),
            values: variants
                .iter()
                .zip(&flat)
                .map(|(v, m)| (v.name.clone(), m.get(f).cloned().unwrap_or_else(|| "(none)".into())))
                .collect(),
        })
        .collect()
}

/// Builds the report from the directory's results and the state; writes `report.json`.
pub fn build(
    dir: &ExpDir,
    spec: &ExperimentSpec,
    variants: &[Variant],
    state: &ExperimentState,
    model_zero: &[ModelZero],
) -> Result<ExperimentReport> {
    let sims = spec.simulations;
    let (kind, budget) = spec.budget();
    let anchor = player_name(&crate::evaluation::Contestant::Reference(ANCHOR.into()), sims);
    let round_robin = read_games(&dir.results())?;
    let ratings: Vec<Rating> = fit(&round_robin, &anchor);
    let mut all = round_robin.clone();
    all.extend(read_games(&dir.curve())?);
    let curve_ratings = fit(&all, &anchor);
    let find = |rs: &[Rating], p: &str| rs.iter().find(|r| r.player == p).cloned();

    let mut rows = Vec::new();
    let mut curves = Vec::new();
    for v in variants {
        let player = player_name(&model_player(dir.player(&v.name)), sims);
        let s = state.variants.get(&v.name).cloned().unwrap_or_default();
        let rating = find(&ratings, &player);
        let vs_anchor: Vec<f64> = round_robin
            .iter()
            .filter_map(|g| match (g.first.as_str(), g.second.as_str()) {
                (a, b) if a == player && b == anchor => Some(g.score),
                (a, b) if a == anchor && b == player => Some(1.0 - g.score),
                _ => None,
            })
            .collect();
        let (selfplay_games, samples) = selfplay_totals(&RunDir::new(&dir.run(&v.name)));
        rows.push(VariantRow {
            variant: v.name.clone(),
            player: player.clone(),
            config: v.source.display().to_string(),
            elo: rating.as_ref().map(|r| r.elo),
            margin: rating.as_ref().map(|r| r.margin),
            score_vs_anchor: (!vs_anchor.is_empty()).then(|| vs_anchor.iter().sum::<f64>() / vs_anchor.len() as f64),
            games_vs_anchor: vs_anchor.len(),
            games: round_robin.iter().filter(|g| g.first == player || g.second == player).count(),
            selfplay_games,
            samples,
            trainer_steps: s.final_step.unwrap_or(0),
            cpu_minutes: s.cpu_seconds() / 60.0,
            wall_minutes: s.wall_seconds() / 60.0,
            evals: s.evals,
            load_start: s.segments.first().and_then(|g| g.load_start),
            load_end: s.segments.last().and_then(|g| g.load_end),
            segments: s.segments.len(),
        });
        // The curve: model 0 at 0, the picked checkpoints, the final model at the end.
        let mut points = Vec::new();
        if let Some(m0) = model_zero.iter().find(|m| m.variants.contains(&v.name)) {
            let p = player_name(&model_player(dir.root.join(&m0.file)), sims);
            if let Some(r) = find(&curve_ratings, &p) {
                points.push(CurvePoint { player: p, step: 0, at: 0.0, elo: r.elo, margin: r.margin });
            }
        }
        for c in curve_checkpoints(&s, kind, spec.curve_points) {
            let p = player_name(&model_player(dir.curve_player(&v.name, c.step)), sims);
            if let Some(r) = find(&curve_ratings, &p) {
                points.push(CurvePoint {
                    player: p,
                    step: c.step,
                    at: position(&c, kind),
                    elo: r.elo,
                    margin: r.margin,
                });
            }
        }
        if let (Some(r), Some(step)) = (find(&curve_ratings, &player), s.final_step) {
            let at = match kind {
                BudgetKind::Wall => s.wall_seconds() / 60.0,
                BudgetKind::Cpu => s.cpu_seconds() / 60.0,
                BudgetKind::Evals => s.evals as f64 / 1e6,
            };
            points.push(CurvePoint { player: player.clone(), step, at, elo: r.elo, margin: r.margin });
        }
        curves.push(Curve { variant: v.name.clone(), points });
    }
    let reference_names: Vec<String> = spec
        .reference_players()
        .iter()
        .map(|r| player_name(&crate::evaluation::Contestant::Reference(r.clone()), sims))
        .collect();
    let curve_references =
        curve_ratings.iter().filter(|r| reference_names.contains(&r.player)).cloned().map(PlayerRating::from).collect();
    let pipeline_commands = variants
        .iter()
        .flat_map(|v| {
            state
                .variants
                .get(&v.name)
                .map(|s| s.segments.iter().map(|g| g.command.join(" ")).collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .collect();
    let replicates = if spec.replicates > 1 {
        let mut families: Vec<(String, Vec<f64>)> = Vec::new();
        for (v, row) in variants.iter().zip(&rows) {
            match families.iter_mut().find(|(name, _)| *name == v.family) {
                Some((_, elos)) => elos.extend(row.elo),
                None => families.push((v.family.clone(), row.elo.into_iter().collect())),
            }
        }
        summarize(&families)
    } else {
        Vec::new()
    };
    let report = ExperimentReport {
        directory: dir.root.display().to_string(),
        budget_kind: kind,
        budget,
        anchor,
        simulations: sims,
        games_per_pairing: spec.games.div_ceil(2) * 2,
        openings: spec.openings.name().to_string(),
        variants: rows,
        ratings: ratings.into_iter().map(PlayerRating::from).collect(),
        x_axis: match kind {
            BudgetKind::Evals => "million self-play evaluations".to_string(),
            kind => format!("{} minutes", kind.label()),
        },
        curves,
        curve_references,
        model_zero: model_zero.to_vec(),
        config_differences: config_differences(variants),
        experiment_commands: state.invocations.clone(),
        pipeline_commands,
        replicates,
    };
    let text = serde_json::to_string_pretty(&report).expect("the report serialises");
    koma_base::durable::write(&dir.report_json(), text.as_bytes())?;
    Ok(report)
}

fn load(l: Option<[f64; 3]>) -> String {
    l.map(|l| format!("{:.2}", l[0])).unwrap_or_else(|| "?".into())
}

/// `report.md`; `plot` is the Elo-over-time image, or why there is none.
pub fn markdown(r: &ExperimentReport, plot: std::result::Result<&Path, &str>) -> String {
    let mut md = String::new();
    let n = r.variants.len();
    let budget = match r.budget_kind {
        BudgetKind::Cpu => format!("{} minutes of process CPU time (user + system, all threads)", r.budget),
        BudgetKind::Wall => format!("{} wall-clock minutes", r.budget),
        BudgetKind::Evals => format!("{} self-play evaluations", r.budget),
    };
    let _ = writeln!(md, "# Experiment `{}`\n", r.directory);
    let _ = writeln!(
        md,
        "{n} variants, each trained by `koma pipeline` for {budget} on this machine, one after another; \
         then a round robin of their final models and the reference players, {} games per pairing in \
         colour-swapped pairs over `{}`, {} simulations per move for every network.\n",
        r.games_per_pairing,
        if r.openings.is_empty() { "the start position" } else { &r.openings },
        r.simulations
    );
    let _ = writeln!(md, "## Result\n");
    let _ = writeln!(
        md,
        "| variant | Elo | 95% CI | score vs {a} | games | self-play games | samples | trainer steps | CPU min | wall min | load start → end |",
        a = r.anchor
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut rows: Vec<&VariantRow> = r.variants.iter().collect();
    rows.sort_by(|a, b| b.elo.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.elo.unwrap_or(f64::NEG_INFINITY)));
    for v in rows {
        let (elo, ci) = match (v.elo, v.margin) {
            (Some(e), Some(m)) => (format!("{e:+.0}"), format!("[{:+.0}, {:+.0}]", e - m, e + m)),
            _ => ("–".into(), "–".into()),
        };
        let score =
            v.score_vs_anchor.map(|s| format!("{s:.3} ({} games)", v.games_vs_anchor)).unwrap_or_else(|| "–".into());
        let _ = writeln!(
            md,
            "| {} | {elo} | {ci} | {score} | {} | {} | {} | {} | {:.1} | {:.1} | {} → {} |",
            v.variant,
            v.games,
            v.selfplay_games,
            v.samples,
            v.trainer_steps,
            v.cpu_minutes,
            v.wall_minutes,
            load(v.load_start),
            load(v.load_end)
        );
    }
    let _ = writeln!(
        md,
        "\nElo: a Bradley–Terry fit over the round robin's games (`results.jsonl`), `{}` = 0, 95% intervals \
         from the fit's curvature (docs/arena.md). Load: the 1-minute load average when the variant's \
         first pipeline started and its last one ended; a busy machine makes wall-clock budgets unequal.\n",
        r.anchor
    );
    if !r.replicates.is_empty() {
        let _ = writeln!(md, "### Across replicates\n");
        let _ = writeln!(
            md,
            "Each variant was trained {} times (`NAME.rK`, different seeds, the same model 0). Mean Elo of its runs \
             with the 95% interval of the mean (Student's t), and the gain over `{}` with Welch's 95% interval: \
             a gain (or a loss: \"worse\") is claimed only when that interval excludes 0. Runs without a rating \
             are left out of their variant.\n",
            r.replicates.iter().map(|s| s.elos.len()).max().unwrap_or(0),
            r.replicates.first().map_or("", |s| s.variant.as_str())
        );
        let _ = writeln!(md, "| variant | runs' Elo | mean | ± | sd | gain | ± | claimed |");
        let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---|");
        let opt = |x: Option<f64>, sign: bool| {
            x.map_or("–".to_string(), |x| if sign { format!("{x:+.0}") } else { format!("{x:.0}") })
        };
        for s in &r.replicates {
            let elos: Vec<String> = s.elos.iter().map(|e| format!("{e:+.0}")).collect();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {:.0} | {} | {} | {} |",
                s.variant,
                elos.join(", "),
                opt((!s.elos.is_empty()).then_some(s.mean), true),
                opt(s.margin, false),
                s.sd,
                opt(s.gain, true),
                opt(s.gain_margin, false),
                if s.gain.is_none() {
                    "baseline"
                } else if s.significant && s.gain.is_some_and(|g| g > 0.0) {
                    "**yes**"
                } else if s.significant {
                    "**worse**"
                } else {
                    "no"
                }
            );
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "Every player of the round robin:\n");
    let _ = writeln!(md, "| player | Elo | ± | games | points |");
    let _ = writeln!(md, "|---|---:|---:|---:|---:|");
    for p in &r.ratings {
        let _ = writeln!(md, "| {} | {:+.0} | {:.0} | {:.0} | {:.1} |", p.player, p.elo, p.margin, p.games, p.points);
    }
    let _ = writeln!(md, "\n## Elo over time\n");
    match plot {
        Ok(path) => {
            let name = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let _ = writeln!(md, "![Elo over {}]({name})\n", r.x_axis);
        }
        Err(why) => {
            let _ = writeln!(md, "(no plot: {why}; `report.json` holds the points)\n");
        }
    }
    let _ = writeln!(
        md,
        "Each line is one variant: model 0 at 0, intermediate checkpoints evenly spaced along the budget \
         (each played against `{}` and against model 0), and the final model, by the {} at which the \
         checkpoint appeared. Ratings from one fit over `results.jsonl` and `curve.jsonl`.\n",
        r.anchor, r.x_axis
    );
    let unit = if r.budget_kind == BudgetKind::Evals { "M evals" } else { "min" };
    for c in &r.curves {
        let pts: Vec<String> =
            c.points.iter().map(|p| format!("{:.1} {unit}: {:+.0} ± {:.0}", p.at, p.elo, p.margin)).collect();
        let _ = writeln!(md, "- {}: {}", c.variant, if pts.is_empty() { "no points".into() } else { pts.join(" · ") });
    }
    let _ = writeln!(md, "\n## Model 0\n");
    if r.model_zero.len() == 1 {
        let _ = writeln!(
            md,
            "Every variant starts from the same model 0, `{}` (seed {}).",
            r.model_zero[0].file, r.model_zero[0].seed
        );
    } else {
        let _ =
            writeln!(md, "The variants differ in `[model]`, so each network shape has its own model 0 (same seed):\n");
        for m in &r.model_zero {
            let _ = writeln!(md, "- `{}` (seed {}): {}", m.file, m.seed, m.variants.join(", "));
        }
    }
    let _ = writeln!(md, "\n## Config differences\n");
    if r.config_differences.is_empty() {
        let _ = writeln!(md, "The variants' effective configs are identical.");
    } else {
        let names: Vec<&String> = r.variants.iter().map(|v| &v.variant).collect();
        let _ = writeln!(md, "| field | {} |", names.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" | "));
        let _ = writeln!(md, "|---|{}", "---|".repeat(names.len()));
        for d in &r.config_differences {
            let vals: Vec<String> =
                names.iter().map(|n| format!("`{}`", d.values.get(*n).map(String::as_str).unwrap_or(""))).collect();
            let _ = writeln!(md, "| {} | {} |", d.field, vals.join(" | "));
        }
    }
    let _ = writeln!(
        md,
        "\nThe configs: {}.",
        r.variants.iter().map(|v| format!("{} = `{}`", v.variant, v.config)).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(md, "\n## Commands\n");
    let _ = writeln!(md, "```sh");
    for c in &r.experiment_commands {
        let _ = writeln!(md, "{c}");
    }
    let _ = writeln!(md, "# which ran, one after another:");
    for c in &r.pipeline_commands {
        let _ = writeln!(md, "{c}");
    }
    let _ = writeln!(md, "```");
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_differences_name_the_fields_that_differ() {
        let variant = |name: &str, text: &str| Variant {
            name: name.into(),
            family: name.into(),
            source: format!("{name}.toml").into(),
            text: text.into(),
            config: crate::PipelineConfig::parse(text, name).unwrap(),
        };
        let vs = [
            variant("a", "[selfplay]\nsimulations = 8\ncheap_simulations = 4\n"),
            variant("b", "[selfplay]\nsimulations = 16\ncheap_simulations = 4\n[run]\nseed = 1\n"),
        ];
        let d = config_differences(&vs);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].field, "selfplay.simulations");
        assert_eq!(d[0].values["a"], "8");
        assert_eq!(d[0].values["b"], "16");
    }
}
