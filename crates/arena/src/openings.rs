//! Generating opening suites (koma_shogi::OpeningSuite reads them). The generator plays short random openings
//! (no captures-only lines, no repeated positions) and keeps those a short search of the given
//! evaluator scores as balanced, so that colour-swapped pairs start from fair positions.

use std::collections::HashSet;

use koma_base::Rng;
use koma_mcts::{EvalError, Evaluator, Search, SearchConfig};
use koma_shogi::rules::GameRules;
use koma_shogi::usi::position_command;
use koma_shogi::Position;
use rand::{RngExt, SeedableRng};

#[derive(Clone, Debug)]
pub struct SuiteSpec {
    pub count: usize,
    /// Plies of each opening.
    pub plies: usize,
    /// Keep openings whose searched value for the side to move is within ±this.
    pub max_abs_value: f32,
    pub simulations: u32,
    pub seed: u64,
}

/// Generates `spec.count` distinct balanced openings as USI position lines (an evaluator error
/// ends it with that error).
pub fn generate_suite(spec: &SuiteSpec, evaluator: &dyn Evaluator) -> Result<Vec<String>, EvalError> {
    let mut rng = Rng::seed_from_u64(spec.seed);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut attempts = 0;
    while out.len() < spec.count && attempts < spec.count * 200 {
        attempts += 1;
        let mut pos = Position::startpos();
        for _ in 0..spec.plies {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            pos.do_move(moves[rng.random_range(0..moves.len())]);
        }
        if pos.plies_from_root() != spec.plies || pos.legal_moves().is_empty() || !seen.insert(pos.hash()) {
            continue;
        }
        let mut search = Search::new(SearchConfig::evaluation(), GameRules::default(), rng.random());
        let mut probe = pos.clone();
        search.run(&mut probe, evaluator, spec.simulations.max(1), 8)?;
        if search.root_value().abs() <= spec.max_abs_value {
            out.push(position_command(&pos));
        }
    }
    Ok(out)
}
