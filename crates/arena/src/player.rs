//! Players: anything that picks a move in a position. The built-in reference players never
//! change, so Elo measured against them is comparable across runs and versions.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock::{Timing, TurnClock};
use koma_base::Rng;
use koma_mcts::{EvalError, Evaluation, Evaluator, Search, SearchConfig};
use koma_shogi::material::material;
use koma_shogi::rules::GameRules;
use koma_shogi::{Move, Position, Status};
use rand::{RngExt, SeedableRng};

/// What a player does on its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Play(Move),
    Resign,
    /// Declare a win under the impasse rule.
    Declare,
}

/// Why a player could not produce a move: it forfeits the game, unless the failure is `fatal`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayerError {
    pub timeout: bool,
    /// Our own network failed (an error, NaN): no game result can be trusted, so the match stops
    /// with this error instead of scoring a forfeit.
    pub fatal: bool,
    pub message: String,
}

impl PlayerError {
    pub fn failure(message: impl Into<String>) -> PlayerError {
        PlayerError { timeout: false, fatal: false, message: message.into() }
    }

    pub fn timeout(message: impl Into<String>) -> PlayerError {
        PlayerError { timeout: true, fatal: false, message: message.into() }
    }

    pub fn fatal(message: impl Into<String>) -> PlayerError {
        PlayerError { timeout: false, fatal: true, message: message.into() }
    }
}

impl std::fmt::Display for PlayerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PlayerError {}

pub trait Player: Send {
    /// A short name for tables and records.
    fn name(&self) -> String;
    /// Called before each game. An error means the player cannot play on: the match stops with
    /// it (unless `cancel` is set).
    fn new_game(&mut self, _cancel: &AtomicBool) -> Result<(), PlayerError> {
        Ok(())
    }
    /// Chooses an action in `pos` (its history included, for repetition awareness). `cancel` set
    /// means the match is being cancelled: a player that thinks for long should give up early
    /// (with any error; the game is dropped unscored).
    fn act(&mut self, pos: &Position, cancel: &AtomicBool) -> Result<Action, PlayerError>;
    /// The player's time control, if it plays on a clock: the arena then times every move and
    /// asks for it with [`Player::act_on_clock`]. None: it plays on its own budget (simulations,
    /// a fixed time per move), untimed.
    fn timing(&self) -> Option<Timing> {
        None
    }
    /// [`Player::act`] with both clocks as they stand (a USI engine sends them with `go`, a
    /// search plans its time on them). The arena measures the time taken and judges it.
    fn act_on_clock(&mut self, pos: &Position, _clock: &TurnClock, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        self.act(pos, cancel)
    }
}

/// A player with what its spec sets over its own: a name (from a player file, or `#2` added to
/// tell apart two engines that report the same `id name`) and a time control (a checkpoint or
/// reference given a clock in its player file).
pub struct Overridden {
    pub name: Option<String>,
    pub timing: Option<Timing>,
    pub inner: Box<dyn Player>,
}

impl Player for Overridden {
    fn name(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.inner.name())
    }

    fn new_game(&mut self, cancel: &AtomicBool) -> Result<(), PlayerError> {
        self.inner.new_game(cancel)
    }

    fn act(&mut self, pos: &Position, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        self.inner.act(pos, cancel)
    }

    fn timing(&self) -> Option<Timing> {
        self.timing.or_else(|| self.inner.timing())
    }

    fn act_on_clock(&mut self, pos: &Position, clock: &TurnClock, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        self.inner.act_on_clock(pos, clock, cancel)
    }
}

/// Uniformly random legal moves.
pub struct RandomPlayer {
    rng: Rng,
}

impl RandomPlayer {
    pub fn new(seed: u64) -> RandomPlayer {
        RandomPlayer { rng: Rng::seed_from_u64(seed) }
    }
}

impl Player for RandomPlayer {
    fn name(&self) -> String {
        "random".into()
    }

    fn act(&mut self, pos: &Position, _cancel: &AtomicBool) -> Result<Action, PlayerError> {
        let moves = pos.legal_moves();
        if moves.is_empty() {
            return Ok(Action::Resign);
        }
        Ok(Action::Play(moves[self.rng.random_range(0..moves.len())]))
    }
}

/// Mates in one when it can, else takes the move that leaves it the most material (ties at
/// random). It sees nothing of the reply.
pub struct GreedyPlayer {
    rng: Rng,
}

impl GreedyPlayer {
    pub fn new(seed: u64) -> GreedyPlayer {
        GreedyPlayer { rng: Rng::seed_from_u64(seed) }
    }
}

impl Player for GreedyPlayer {
    fn name(&self) -> String {
        "greedy".into()
    }

    fn act(&mut self, pos: &Position, _cancel: &AtomicBool) -> Result<Action, PlayerError> {
        let mut pos = pos.clone();
        if let Some(m) = pos.mate_in_one() {
            return Ok(Action::Play(m));
        }
        let us = pos.side_to_move();
        let moves: Vec<Move> = pos.legal_moves().iter().copied().collect();
        if moves.is_empty() {
            return Ok(Action::Resign);
        }
        let mut best = Vec::new();
        let mut best_score = i32::MIN;
        for m in moves {
            pos.do_move(m);
            let score = material(&pos, us);
            pos.undo_move();
            if score > best_score {
                best_score = score;
                best.clear();
            }
            if score == best_score {
                best.push(m);
            }
        }
        Ok(Action::Play(best[self.rng.random_range(0..best.len())]))
    }
}

/// Uniform priors and a material value (tanh of the balance over 10 pawns): the evaluator of the
/// `mcts-material` reference player.
pub struct MaterialEvaluator;

impl Evaluator for MaterialEvaluator {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(positions
            .iter()
            .map(|p| {
                let v = (material(p, p.side_to_move()) as f32 / 10.0).tanh();
                Evaluation { priors: Vec::new(), wdl: [(1.0 + v) / 2.0, 0.0, (1.0 - v) / 2.0] }
            })
            .collect())
    }
}

/// A player's evaluator that fails once the match is cancelled, so that a long search stops at
/// its next batch instead of running to the end of its budget.
struct UntilCancelled<'a> {
    evaluator: &'a dyn Evaluator,
    cancel: &'a AtomicBool,
}

impl Evaluator for UntilCancelled<'_> {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(EvalError::Cancelled("the match was cancelled"));
        }
        self.evaluator.evaluate(positions)
    }
}

/// How long an [`MctsPlayer`] searches each move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    Simulations(u32),
    /// Milliseconds per move (searched in rounds of 32 simulations until the time is up).
    Millis(u64),
}

/// Any evaluator searched with MCTS for a fixed budget per move: the `mcts-material` reference
/// player, and koma checkpoints.
pub struct MctsPlayer {
    name: String,
    evaluator: std::sync::Arc<dyn Evaluator>,
    search: Search,
    budget: Budget,
    batch: usize,
    /// Resign when the root value falls below this (None: never).
    resign_value: Option<f32>,
    rules: GameRules,
}

impl MctsPlayer {
    pub fn new(
        name: &str,
        evaluator: std::sync::Arc<dyn Evaluator>,
        simulations: u32,
        batch: usize,
        rules: GameRules,
        seed: u64,
    ) -> MctsPlayer {
        MctsPlayer::with_budget(name, evaluator, Budget::Simulations(simulations), batch, rules, seed)
    }

    pub fn with_budget(
        name: &str,
        evaluator: std::sync::Arc<dyn Evaluator>,
        budget: Budget,
        batch: usize,
        rules: GameRules,
        seed: u64,
    ) -> MctsPlayer {
        MctsPlayer {
            name: name.to_string(),
            evaluator,
            search: Search::new(SearchConfig::evaluation(), rules, seed),
            budget,
            batch,
            resign_value: None,
            rules,
        }
    }

    /// Searches with `config` (default: [`SearchConfig::evaluation`]); self-play's randomness
    /// does not belong in a match, so `root_noise` is turned off.
    pub fn with_search(mut self, config: SearchConfig) -> MctsPlayer {
        self.search = Search::new(SearchConfig { root_noise: false, ..config }, self.rules, 0);
        self
    }

    pub fn search_config(&self) -> &SearchConfig {
        self.search.config()
    }

    pub fn with_resignation(mut self, value: f32) -> MctsPlayer {
        self.resign_value = Some(value);
        self
    }
}

impl Player for MctsPlayer {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn new_game(&mut self, _cancel: &AtomicBool) -> Result<(), PlayerError> {
        self.search = Search::new(self.search.config().clone(), self.rules, 0);
        Ok(())
    }

    fn act(&mut self, pos: &Position, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        self.search_for(pos, self.budget, cancel)
    }

    /// On a clock (given by its spec, see [`Overridden`]) it searches for
    /// [`TurnClock::move_budget`] instead of its fixed budget.
    fn act_on_clock(&mut self, pos: &Position, clock: &TurnClock, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        let budget = Budget::Millis(clock.move_budget().as_millis().max(1) as u64);
        self.search_for(pos, budget, cancel)
    }
}

impl MctsPlayer {
    fn search_for(&mut self, pos: &Position, budget: Budget, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        if pos.declaration(self.rules.impasse) == Some(Status::DeclarationWin) && !self.rules.impasse.is_try() {
            return Ok(Action::Declare);
        }
        let mut pos = pos.clone();
        let evaluator = UntilCancelled { evaluator: self.evaluator.as_ref(), cancel };
        let searched = match budget {
            Budget::Simulations(n) => self.search.run(&mut pos, &evaluator, n, self.batch),
            Budget::Millis(ms) => {
                // Each round keeps the tree (same root), so the rounds add up to one search. The
                // first round always runs, so there is a move to play.
                let start = std::time::Instant::now();
                let mut searched = self.search.run(&mut pos, &evaluator, 32, self.batch);
                while searched.is_ok() && start.elapsed().as_millis() < ms as u128 {
                    searched = self.search.run(&mut pos, &evaluator, 32, self.batch);
                }
                searched
            }
        };
        searched.map_err(|e| PlayerError::fatal(format!("{}: {e}", self.name)))?;
        if self.resign_value.is_some_and(|r| self.search.root_value() < r) {
            return Ok(Action::Resign);
        }
        self.search.select_move(0.0).map(Action::Play).ok_or_else(|| PlayerError::failure("no legal move"))
    }
}
