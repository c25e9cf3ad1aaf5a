//! The experiment's progress, `EXPDIR/state.json` (written atomically after every step): each
//! variant's pipeline processes (segments) with the time they used and when each checkpoint
//! appeared, and how many pairs of each match are done together with the length of the results
//! files at that point. `--resume` continues from it; lines a killed process appended after the
//! last commit are cut off before the matches go on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{io, PipelineError, Result};
use crate::experiment::spec::BudgetKind;

pub const STATE_VERSION: u32 = 1;

/// Less budget than this left: the variant is done (a pipeline given `--minutes 0` would never
/// stop).
pub const MIN_SEGMENT_SECONDS: f64 = 1.0;

/// One `koma pipeline` process of a variant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// The command, program first, exactly as run.
    pub command: Vec<String>,
    pub pid: u32,
    pub started_unix: u64,
    /// Wall-clock and process CPU seconds it used (updated while it runs).
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    /// Whether it has exited (and was waited for).
    pub ended: bool,
    /// `time_limit`, `cpu_limit`, `steps_reached`, `interrupted` from its summary; None when it
    /// left none (killed).
    pub stop_reason: Option<String>,
    pub exit_code: Option<i32>,
    /// The 1/5/15-minute load averages when it started and ended.
    pub load_start: Option<[f64; 3]>,
    pub load_end: Option<[f64; 3]>,
    /// Its stdout (the JSON summary) and stderr, relative to the experiment directory.
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

/// When a checkpoint appeared, in the variant's own time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointTime {
    pub step: u64,
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    /// The run's self-play evaluations when it appeared (state files of before kept none).
    #[serde(default)]
    pub evals: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VariantState {
    /// Trained for its whole budget (or reached its `[run] steps`).
    pub finished: bool,
    pub segments: Vec<Segment>,
    pub checkpoints: Vec<CheckpointTime>,
    /// The run's self-play evaluations as last read from it (`evals.json`).
    #[serde(default)]
    pub evals: u64,
    /// The step of the model the round robin plays (set when finished).
    pub final_step: Option<u64>,
}

impl VariantState {
    pub fn wall_seconds(&self) -> f64 {
        self.segments.iter().map(|s| s.wall_seconds).sum()
    }

    pub fn cpu_seconds(&self) -> f64 {
        self.segments.iter().map(|s| s.cpu_seconds).sum()
    }

    /// Budget used so far, in seconds of the budget's kind, or evaluations.
    pub fn used(&self, kind: BudgetKind) -> f64 {
        match kind {
            BudgetKind::Wall => self.wall_seconds(),
            BudgetKind::Cpu => self.cpu_seconds(),
            BudgetKind::Evals => self.evals as f64,
        }
    }

    /// Budget left of `budget` (minutes, or evaluations), in the unit of [`Self::used`] (never
    /// negative).
    pub fn remaining(&self, kind: BudgetKind, budget: f64) -> f64 {
        (kind.units(budget) - self.used(kind)).max(0.0)
    }

    /// Whether another pipeline process should run: not finished and some budget left (a second,
    /// or an evaluation).
    pub fn needs_training(&self, kind: BudgetKind, budget: f64) -> bool {
        !self.finished && self.remaining(kind, budget) >= MIN_SEGMENT_SECONDS
    }

    /// Records a checkpoint seen for the first time, at the variant's time so far (None if
    /// known already).
    pub fn note_checkpoint(&mut self, step: u64) -> bool {
        if self.checkpoints.iter().any(|c| c.step == step) {
            return false;
        }
        let (wall_seconds, cpu_seconds, evals) =
            if step == 0 { (0.0, 0.0, 0) } else { (self.wall_seconds(), self.cpu_seconds(), self.evals) };
        self.checkpoints.push(CheckpointTime { step, wall_seconds, cpu_seconds, evals });
        self.checkpoints.sort_by_key(|c| c.step);
        true
    }

    /// The segment still marked as running (the experiment was killed while it ran).
    pub fn dangling(&self) -> Option<&Segment> {
        self.segments.last().filter(|s| !s.ended)
    }
}

/// A match of the round robin or of the Elo curve: pairs done so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MatchState {
    pub pairs_done: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentState {
    pub version: u32,
    /// Every `koma experiment` command line that worked on this directory.
    pub invocations: Vec<String>,
    pub variants: BTreeMap<String, VariantState>,
    /// By match label.
    pub matches: BTreeMap<String, MatchState>,
    /// Bytes of each results file (by file name) that belong to committed games.
    pub committed: BTreeMap<String, u64>,
}

impl Default for ExperimentState {
    fn default() -> ExperimentState {
        ExperimentState {
            version: STATE_VERSION,
            invocations: Vec::new(),
            variants: BTreeMap::new(),
            matches: BTreeMap::new(),
            committed: BTreeMap::new(),
        }
    }
}

impl ExperimentState {
    pub fn load(path: &Path) -> Result<ExperimentState> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let state: ExperimentState = serde_json::from_str(&text).map_err(|e| PipelineError::Run {
            path: path.to_path_buf(),
            message: format!("not an experiment state: {e}"),
        })?;
        if state.version != STATE_VERSION {
            return Err(PipelineError::Run {
                path: path.to_path_buf(),
                message: format!("state version {} (this koma writes {STATE_VERSION})", state.version),
            });
        }
        Ok(state)
    }

    /// Writes the state under a temporary name and renames it into place.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("the state serialises");
        koma_base::durable::write(path, text.as_bytes())?;
        Ok(())
    }

    pub fn variant(&mut self, name: &str) -> &mut VariantState {
        self.variants.entry(name.to_string()).or_default()
    }

    pub fn pairs_done(&self, label: &str) -> usize {
        self.matches.get(label).map_or(0, |m| m.pairs_done)
    }

    /// Cuts `file` back to its committed length: games appended by a process killed before it
    /// committed them are dropped (they are played again). Errors if the file is shorter than
    /// recorded (it was edited or replaced).
    /// The cut holds the lock that every arena append holds (koma-arena's `append_line`), so a
    /// line another process is appending is never cut in half.
    pub fn truncate_uncommitted(&self, file: &Path) -> Result<()> {
        let key = file_key(file);
        let committed = self.committed.get(&key).copied().unwrap_or(0);
        let shorter = |len: u64| PipelineError::Run {
            path: file.to_path_buf(),
            message: format!("holds {len} bytes but {committed} were committed: it was changed outside koma"),
        };
        let f = match std::fs::OpenOptions::new().write(true).open(file) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return if committed > 0 { Err(shorter(0)) } else { Ok(()) };
            }
            Err(e) => return Err(io(file)(e)),
        };
        f.lock().map_err(io(file))?;
        let cut = (|| {
            let len = f.metadata()?.len();
            if len > committed {
                f.set_len(committed)?;
                f.sync_all()?;
            }
            Ok::<u64, std::io::Error>(len)
        })();
        let unlocked = f.unlock();
        let len = cut.map_err(io(file))?;
        unlocked.map_err(io(file))?;
        if len < committed {
            return Err(shorter(len));
        }
        Ok(())
    }

    /// Records that `label` has `pairs_done` pairs and `file` its current length.
    pub fn commit(&mut self, label: &str, pairs_done: usize, file: &Path) -> Result<()> {
        let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        self.committed.insert(file_key(file), len);
        self.matches.entry(label.to_string()).or_default().pairs_done = pairs_done;
        Ok(())
    }
}

fn file_key(file: &Path) -> String {
    file.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Pairs each piece of a match plays: `pairs` in all, `done` already, at most `chunk` at a time.
pub fn remaining_chunks(pairs: usize, done: usize, chunk: usize) -> Vec<(usize, usize)> {
    let chunk = chunk.max(1);
    let mut out = Vec::new();
    let mut first = done;
    while first < pairs {
        let n = chunk.min(pairs - first);
        out.push((first, n));
        first += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(wall: f64, cpu: f64, ended: bool) -> Segment {
        Segment { wall_seconds: wall, cpu_seconds: cpu, ended, ..Segment::default() }
    }

    #[test]
    fn budget_left_counts_every_segment_of_the_budgets_kind() {
        let mut v = VariantState::default();
        assert!(v.needs_training(BudgetKind::Cpu, 1.0));
        v.segments.push(segment(50.0, 30.0, true));
        v.segments.push(segment(20.0, 25.0, false));
        assert_eq!(v.remaining(BudgetKind::Cpu, 1.0), 5.0);
        assert_eq!(v.remaining(BudgetKind::Wall, 1.0), 0.0);
        assert!(v.needs_training(BudgetKind::Cpu, 1.0));
        assert!(!v.needs_training(BudgetKind::Wall, 1.0), "no wall time left");
        assert!(v.dangling().is_some());
        v.segments[1].cpu_seconds = 29.5;
        assert!(!v.needs_training(BudgetKind::Cpu, 1.0), "under a second left");
        v.segments[1].cpu_seconds = 10.0;
        // Evaluations: the run's count against the budget's.
        v.evals = 4_000_000;
        assert_eq!(v.remaining(BudgetKind::Evals, 5e6), 1e6);
        assert!(v.needs_training(BudgetKind::Evals, 5e6));
        assert!(!v.needs_training(BudgetKind::Evals, 4e6), "no evaluations left");
        v.finished = true;
        assert!(!v.needs_training(BudgetKind::Cpu, 1.0));
        // Checkpoints are timed when first seen; model 0 at zero.
        assert!(v.note_checkpoint(0));
        assert!(v.note_checkpoint(100));
        assert!(!v.note_checkpoint(100));
        assert_eq!(
            v.checkpoints[1],
            CheckpointTime { step: 100, wall_seconds: 70.0, cpu_seconds: 40.0, evals: 4_000_000 }
        );
        assert_eq!(v.checkpoints[0].cpu_seconds, 0.0);
    }

    #[test]
    fn state_round_trips_and_uncommitted_games_are_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let results = dir.path().join("results.jsonl");
        let mut state = ExperimentState::default();
        state.variant("a").segments.push(segment(1.0, 2.0, true));
        std::fs::write(&results, "{\"g\":1}\n{\"g\":2}\n").unwrap();
        state.commit("a vs greedy", 1, &results).unwrap();
        state.save(&path).unwrap();
        let back = ExperimentState::load(&path).unwrap();
        assert_eq!(back, state);
        assert_eq!(back.pairs_done("a vs greedy"), 1);
        assert_eq!(back.pairs_done("b vs greedy"), 0);
        // A killed match appended one game and half of another.
        std::fs::write(&results, "{\"g\":1}\n{\"g\":2}\n{\"g\":3}\n{\"g\"").unwrap();
        back.truncate_uncommitted(&results).unwrap();
        assert_eq!(std::fs::read_to_string(&results).unwrap(), "{\"g\":1}\n{\"g\":2}\n");
        // A file never committed is emptied; a shortened one is an error.
        let other = dir.path().join("curve.jsonl");
        std::fs::write(&other, "x\n").unwrap();
        back.truncate_uncommitted(&other).unwrap();
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "");
        std::fs::write(&results, "").unwrap();
        assert!(back.truncate_uncommitted(&results).unwrap_err().to_string().contains("changed outside koma"));
        std::fs::write(&path, "{\"version\": 99}").unwrap();
        assert!(ExperimentState::load(&path).is_err());
    }

    #[test]
    fn matches_resume_in_chunks_after_the_pairs_done() {
        assert_eq!(remaining_chunks(10, 0, 4), vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(remaining_chunks(10, 4, 4), vec![(4, 4), (8, 2)]);
        assert_eq!(remaining_chunks(10, 10, 4), vec![]);
        assert_eq!(remaining_chunks(3, 1, 0), vec![(1, 1), (2, 1)]);
    }
}
