//! One self-play game in progress: its position, its search tree, the samples recorded so far,
//! and the resignation bookkeeping.

use koma_base::Rng;
use koma_data::{flags, result_for, GameSamples, PackedPosition, RootValues, Sample};
use koma_mcts::{Evaluation, LeafId, RootValue, Search, Selection};
use koma_shogi::rules::GameRules;
use koma_shogi::{Color, EndReason, GameResult, Move, Position, Status};
use rand::RngExt;

use crate::config::SelfPlayConfig;
use crate::resign::{LevelTracker, SideLevel};

pub(crate) struct Game {
    pos: Position,
    search: Search,
    start_sfen: String,
    moves: Vec<Move>,
    samples: Vec<Sample>,
    sample_sides: Vec<Color>,
    /// Every estimate of each sample's root value (`RootValue::ALL`), for calibration.
    root_values: Vec<RootValues>,
    /// Playing without resignation (to measure false resignations).
    no_resign: bool,
    low_value_streak: [u32; 2],
    /// In a no-resign game: the first side that would have resigned.
    would_have_resigned: Option<Color>,
    /// Each side's resignation level (the threshold it would have resigned at), by color index.
    resign_levels: [LevelTracker; 2],
    /// This move's search: full (recorded) or cheap, target and progress.
    full_search: bool,
    target: u32,
    done: u32,
    pending: Vec<LeafId>,
    stalled: bool,
    /// The model that played the first move: the game's label in the shards.
    model: String,
    /// The model whose evaluations the tree and cache hold.
    searched_with: String,
}

/// A finished game with what the statistics need.
pub(crate) struct Finished {
    pub(crate) samples: GameSamples,
    pub(crate) resigned: bool,
    pub(crate) no_resign: bool,
    /// A no-resign game in which a side would have resigned.
    pub(crate) would_have_resigned: bool,
    /// A no-resign game whose would-be resigner did not lose.
    pub(crate) false_resignation: bool,
    /// A no-resign game: both sides' resignation levels, for the threshold's adjustment.
    pub(crate) resign_levels: Option<[SideLevel; 2]>,
}

impl Game {
    pub(crate) fn new(pos: Position, config: &SelfPlayConfig, rules: GameRules, model: &str, rng: &mut Rng) -> Game {
        let mut search = Search::new(config.search.clone(), rules, rng.random());
        let cache_entries = config.cache_entries_per_game();
        if cache_entries > 0 {
            search = search.with_cache(cache_entries);
        }
        let mut game = Game {
            start_sfen: pos.to_sfen(),
            pos,
            search,
            moves: Vec::new(),
            samples: Vec::new(),
            sample_sides: Vec::new(),
            root_values: Vec::new(),
            no_resign: rng.random::<f64>() < config.no_resign_fraction as f64,
            low_value_streak: [0; 2],
            would_have_resigned: None,
            resign_levels: [LevelTracker::new(), LevelTracker::new()],
            full_search: true,
            target: 0,
            done: 0,
            pending: Vec::new(),
            stalled: false,
            model: model.to_string(),
            searched_with: model.to_string(),
        };
        game.start_move(config, model, rng);
        game
    }

    /// Prepares the next move's search: full (a training sample) or cheap (playout cap
    /// randomization), with `model` the network that will evaluate it.
    fn start_move(&mut self, config: &SelfPlayConfig, model: &str, rng: &mut Rng) {
        self.full_search = rng.random::<f64>() < config.full_search_fraction as f64;
        self.target = if self.full_search { config.simulations } else { config.cheap_simulations }.max(1);
        self.done = 0;
        self.stalled = false;
        if model != self.searched_with {
            // A new network: the old one's priors and values would mix into this one's targets.
            self.search.clear_evaluations();
            self.searched_with = model.to_string();
        }
        if self.full_search {
            // The training targets hold this search's visits only, not those of earlier cheap
            // (noise-free) searches kept by tree reuse; the cache spares the repeated evaluations.
            self.search.clear_tree();
        }
        self.search.set_cheap(!self.full_search);
        self.search.start(&self.pos, self.target);
        if self.search.root_mate().is_some() {
            // The mate is played whatever a search would say: no simulations needed.
            self.target = 0;
        }
    }

    /// Adds up to `limit` leaves of this game to the batch being built.
    pub(crate) fn gather(
        &mut self,
        limit: usize,
        batch: &mut Vec<Position>,
        owners: &mut Vec<(usize, LeafId)>,
        me: usize,
    ) {
        let mut gathered = 0;
        while gathered < limit && self.done + (self.pending.len() as u32) < self.target {
            match self.search.select_leaf(&mut self.pos, |leaf| batch.push(leaf.without_history())) {
                Selection::Leaf(id) => {
                    self.pending.push(id);
                    owners.push((me, id));
                    gathered += 1;
                }
                Selection::Resolved => self.done += 1,
                Selection::Collision | Selection::Waiting | Selection::NoMoves => {
                    if self.pending.is_empty() {
                        self.stalled = true;
                    }
                    break;
                }
            }
        }
    }

    pub(crate) fn complete(&mut self, leaf: LeafId, evaluation: &Evaluation) {
        self.search.complete(leaf, evaluation);
        self.pending.retain(|&l| l != leaf);
        self.done += 1;
    }

    pub(crate) fn move_ready(&self) -> bool {
        self.pending.is_empty() && (self.done >= self.target || self.stalled)
    }

    /// Plays the searched move, resigning at `resign_value` (the threshold now); returns the
    /// finished game if it ended.
    pub(crate) fn play(
        &mut self,
        config: &SelfPlayConfig,
        rules: &GameRules,
        model: &str,
        resign_value: f32,
        rng: &mut Rng,
    ) -> Option<Finished> {
        let us = self.pos.side_to_move();
        let ply = self.moves.len() as u32;
        let temperature = if ply < config.temperature_plies { config.temperature } else { 0.0 };
        let Some(mv) = self.search.select_move(temperature) else {
            // No legal move: the position was already lost (handled by status below).
            return Some(self.finish(GameResult { winner: Some(!us), reason: EndReason::Checkmate }));
        };
        // The configured estimate decides resignation and becomes the value target's search part.
        // As AlphaGo Zero resigned: when the root's value and the best child's value (the most
        // visited move's, which a Gumbel root plays) are both below the threshold. A search that
        // visited no move (a mate played at once) is no reason to resign.
        let value = self.search.root_value_as(config.root_value);
        let best_child =
            self.search.root_children().into_iter().filter(|c| c.visits > 0).max_by_key(|c| c.visits).and_then(|c| c.q);
        // Both below t ⟺ the larger below t: one number per move decides at every threshold.
        // (A NaN value or q is never low.)
        let decisive = best_child.filter(|q| !q.is_nan() && !value.is_nan()).map_or(f32::INFINITY, |q| q.max(value));
        self.resign_levels[us.index()].push(decisive, config.resign_consecutive);
        let low = decisive < resign_value;
        let streak = &mut self.low_value_streak[us.index()];
        *streak = if low { *streak + 1 } else { 0 };
        let resigns = *streak >= config.resign_consecutive.max(1);
        if resigns && self.no_resign {
            self.would_have_resigned.get_or_insert(us);
        }
        let resigning = resigns && !self.no_resign;
        if self.full_search {
            let policy: Vec<(Move, f32)> = self.search.policy_target().into_iter().filter(|&(_, w)| w > 0.0).collect();
            if let Ok(position) = PackedPosition::pack(&self.pos) {
                self.samples.push(Sample {
                    position,
                    // A resigning player plays nothing; its searched position is still a sample.
                    played: (!resigning).then_some(mv),
                    policy,
                    root_wdl: self.search.root_wdl_as(config.root_value),
                    result: 0,
                    ply: ply.min(u16::MAX as u32) as u16,
                    flags: flags::FULL_SEARCH | if self.no_resign { flags::NO_RESIGN } else { 0 },
                });
                self.sample_sides.push(us);
                self.root_values.push(RootValue::ALL.map(|kind| self.search.root_value_as(kind)));
            }
        }
        if resigning {
            return Some(self.finish(GameResult { winner: Some(!us), reason: EndReason::Resignation }));
        }
        self.pos.do_move(mv);
        self.moves.push(mv);
        let to_move = self.pos.side_to_move();
        let status = self.pos.status(rules);
        if let Some(result) = GameResult::from_status(status, to_move) {
            return Some(self.finish(result));
        }
        if status == Status::DeclarationWin {
            // A self-play player always declares (or makes the Try move) when it may.
            return Some(self.finish(GameResult { winner: Some(to_move), reason: declaration_reason(rules) }));
        }
        self.start_move(config, model, rng);
        None
    }

    fn finish(&mut self, result: GameResult) -> Finished {
        let mut samples = std::mem::take(&mut self.samples);
        for (s, &side) in samples.iter_mut().zip(&self.sample_sides) {
            s.result = result_for(side, result.winner);
        }
        let false_resignation = self.would_have_resigned.is_some_and(|c| result.winner != Some(!c));
        let side_level =
            |c: Color| SideLevel { level: self.resign_levels[c.index()].level(), lost: result.winner == Some(!c) };
        let resign_levels = self.no_resign.then(|| [side_level(Color::Black), side_level(Color::White)]);
        Finished {
            samples: GameSamples {
                start_sfen: self.start_sfen.clone(),
                result,
                length: self.moves.len().min(u16::MAX as usize) as u16,
                model: self.model.clone(),
                moves: std::mem::take(&mut self.moves),
                samples,
                root_values: std::mem::take(&mut self.root_values),
            },
            resigned: result.reason == EndReason::Resignation,
            no_resign: self.no_resign,
            would_have_resigned: self.would_have_resigned.is_some(),
            false_resignation,
            resign_levels,
        }
    }
}

fn declaration_reason(rules: &GameRules) -> EndReason {
    if rules.impasse.is_try() {
        EndReason::Try
    } else {
        EndReason::Declaration
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koma_mcts::{Evaluator, UniformEvaluator};
    use rand::SeedableRng;

    /// Searches the game's current move to the end with `evaluator`.
    fn search_move(game: &mut Game, evaluator: &dyn Evaluator) {
        while !game.move_ready() {
            let (mut batch, mut owners) = (Vec::new(), Vec::new());
            game.gather(4, &mut batch, &mut owners, 0);
            let refs: Vec<&Position> = batch.iter().collect();
            for ((_, leaf), e) in owners.iter().zip(evaluator.evaluate(&refs).unwrap()) {
                game.complete(*leaf, &e);
            }
        }
    }

    #[test]
    fn resignation_needs_the_root_and_its_best_child_low_and_no_resign_games_record_it() {
        // Uniform evaluations value every position at 0: below a threshold of 0.5, not below −0.5.
        let rules = SelfPlayConfig::default().rules().unwrap();
        let play_one = |resign_value: f32, no_resign_fraction: f32| {
            let config = SelfPlayConfig {
                simulations: 16,
                cheap_simulations: 4,
                resign_value,
                resign_consecutive: 1,
                no_resign_fraction,
                ..SelfPlayConfig::default()
            };
            let mut rng = Rng::seed_from_u64(3);
            let mut game = Game::new(Position::startpos(), &config, rules, "m", &mut rng);
            search_move(&mut game, &UniformEvaluator);
            let best = game.search.root_children().into_iter().max_by_key(|c| c.visits).unwrap();
            assert_eq!(best.q, Some(0.0), "the best child was searched");
            let ended = game.play(&config, &rules, "m", config.resign_value, &mut rng);
            (game, ended)
        };
        // Resignation on, both values below: the side to move resigns.
        let (_, ended) = play_one(0.5, 0.0);
        let ended = ended.expect("resigned");
        assert!(ended.resigned && !ended.no_resign && !ended.would_have_resigned);
        assert_eq!(ended.samples.result.winner, Some(Color::White));
        // A no-resign game plays on and records that Black would have resigned: a false
        // resignation unless Black loses.
        let (mut game, ended) = play_one(0.5, 1.0);
        assert!(ended.is_none());
        let drawn = game.finish(GameResult { winner: None, reason: EndReason::MaxMoves });
        assert!(drawn.no_resign && drawn.would_have_resigned && drawn.false_resignation);
        // Its sides' resignation levels: Black's one move valued 0 (it resigns at any threshold
        // above 0), White never moved.
        let [black, white] = drawn.resign_levels.expect("a no-resign game reports its levels");
        assert_eq!((black.level, black.lost), (0.0, false));
        assert_eq!(white.level, f32::INFINITY);
        assert!(ended_levels_absent_when_resigning(&play_one(0.5, 0.0).1));
        let (mut game, _) = play_one(0.5, 1.0);
        let lost = game.finish(GameResult { winner: Some(Color::White), reason: EndReason::Checkmate });
        assert!(lost.would_have_resigned && !lost.false_resignation);
        // Values above the threshold: nobody resigns or would have.
        let (mut game, ended) = play_one(-0.5, 1.0);
        assert!(ended.is_none());
        assert!(!game.finish(GameResult { winner: None, reason: EndReason::MaxMoves }).would_have_resigned);
    }

    #[test]
    fn a_new_model_clears_the_tree_and_cache_and_the_label_stays_the_first_model() {
        let config =
            SelfPlayConfig { simulations: 16, cheap_simulations: 4, resign_value: -2.0, ..SelfPlayConfig::default() };
        let rules = config.rules().unwrap();
        let mut rng = Rng::seed_from_u64(1);
        let mut game = Game::new(Position::startpos(), &config, rules, "model-a", &mut rng);
        search_move(&mut game, &UniformEvaluator);
        assert!(game.search.cache().is_some_and(|c| !c.is_empty()));
        assert!(game.play(&config, &rules, "model-a", config.resign_value, &mut rng).is_none());
        assert!(game.search.cache().is_some_and(|c| !c.is_empty()), "the same model keeps its cache");
        search_move(&mut game, &UniformEvaluator);
        assert!(game.play(&config, &rules, "model-b", config.resign_value, &mut rng).is_none());
        assert!(game.search.cache().is_some_and(|c| c.is_empty()), "model-a's evaluations survived the swap");
        assert_eq!(game.search.root_visits(), 0, "model-a's tree survived the swap");
        let finished = game.finish(GameResult { winner: None, reason: EndReason::MaxMoves });
        assert_eq!(finished.samples.model, "model-a");
    }

    /// Games with resignation on report no levels (only no-resign games calibrate).
    fn ended_levels_absent_when_resigning(ended: &Option<Finished>) -> bool {
        ended.as_ref().is_some_and(|f| f.resign_levels.is_none())
    }
}
