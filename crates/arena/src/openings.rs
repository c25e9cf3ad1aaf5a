//! Opening suites: USI position lines, one per line. The generator plays short random openings
//! (no captures-only lines, no repeated positions) and keeps those a short search of the given
//! evaluator scores as balanced, so that colour-swapped pairs start from fair positions.

use std::collections::HashSet;

use koma_mcts::{EvalError, Evaluator, Rng, Search, SearchConfig};
use koma_shogi::rules::GameRules;
use koma_shogi::usi::{parse_position, position_command};
use koma_shogi::Position;
use rand::{RngExt, SeedableRng};

/// Reads a suite: blank lines and `#` comments are skipped; errors name the line.
pub fn read_suite(text: &str) -> Result<Vec<Position>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(parse_position(line).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(out)
}

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
