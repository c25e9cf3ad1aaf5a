//! What the stages report while they run. The front end (the `koma pipeline` status lines, or a
//! test) receives them on a channel; stages never block on it.

use serde::Serialize;

/// One finished match (gating, an evaluation during the run, or part of the report).
#[derive(Clone, Debug, Serialize)]
pub struct MatchSummary {
    pub a: String,
    pub b: String,
    pub games: usize,
    pub wins: usize,
    pub draws: usize,
    pub losses: usize,
    /// A's score in [0, 1].
    pub score: f64,
    /// Elo of A over B with its 95% interval, once it can be estimated.
    pub elo: Option<f64>,
    pub elo_lower: Option<f64>,
    pub elo_upper: Option<f64>,
}

impl MatchSummary {
    pub fn from_state(s: &koma_arena::matches::MatchState) -> MatchSummary {
        let elo = s.elo();
        MatchSummary {
            a: s.a_name.clone(),
            b: s.b_name.clone(),
            games: s.played,
            wins: s.wins,
            draws: s.draws,
            losses: s.losses,
            score: s.score(),
            elo: elo.map(|e| e.elo),
            elo_lower: elo.map(|e| e.lower),
            elo_upper: elo.map(|e| e.upper),
        }
    }

    /// `model-00000400@32 vs model-00000000@32: +12 =3 -5 (0.675), Elo +128 [+20, +260]`.
    pub fn line(&self) -> String {
        let elo = match (self.elo, self.elo_lower, self.elo_upper) {
            (Some(e), Some(l), Some(u)) => format!(", Elo {e:+.0} [{l:+.0}, {u:+.0}]"),
            _ => String::new(),
        };
        format!("{} vs {}: +{} ={} -{} ({:.3}){elo}", self.a, self.b, self.wins, self.draws, self.losses, self.score)
    }
}

#[derive(Clone, Debug)]
pub enum Event {
    /// Self-play is waiting for a model to appear in models/.
    SelfPlayWaiting,
    /// Self-play's running totals, as its workers report them.
    SelfPlay(koma_selfplay::Progress),
    /// Self-play switched to a new model (it starts the next games with it).
    ModelSwitched { model: String },
    /// The trainer's progress, as it reports it.
    Train(koma_train::Progress),
    /// The gatekeeper's verdict on a candidate.
    Gating { summary: MatchSummary, accepted: bool },
    /// A match of an evaluation (during the run or in the end report), with its purpose.
    Arena { label: String, summary: MatchSummary },
    /// The end-of-run report is playing `planned` matches; `done` are finished.
    ReportProgress { done: usize, planned: usize, current: String, games: usize },
    /// A note worth a line in the log and on the screen.
    Note(String),
    /// A stage made no progress for `[run] stall_minutes` (see `watchdog`).
    Stalled { stage: &'static str, activity: &'static str, seconds: f64 },
    /// A stalled stage progresses again.
    Unstalled { stage: &'static str },
}
