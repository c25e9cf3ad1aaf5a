//! Where self-play games start: the normal position, a share from handicap starts, and a share
//! from an opening suite (USI position lines such as `startpos moves 7g7f 3c3d`).

use koma_mcts::Rng;
use koma_shogi::usi::{parse_position, UsiPositionError};
use koma_shogi::{Handicap, Position};
use rand::RngExt;

#[derive(Clone, Debug, Default)]
pub struct StartPositions {
    openings: Vec<Position>,
    handicap_fraction: f64,
    openings_fraction: f64,
}

impl StartPositions {
    pub fn new(handicap_fraction: f32, openings_fraction: f32) -> StartPositions {
        StartPositions {
            openings: Vec::new(),
            handicap_fraction: handicap_fraction as f64,
            openings_fraction: openings_fraction as f64,
        }
    }

    /// Adds an opening suite: one USI position per line (blank lines and `#` comments skipped).
    /// Errors name the line.
    pub fn with_suite(mut self, text: &str) -> Result<StartPositions, String> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let pos =
                parse_position(line).map_err(|e: UsiPositionError| format!("opening suite line {}: {e}", i + 1))?;
            self.openings.push(pos);
        }
        Ok(self)
    }

    pub fn pick(&self, rng: &mut Rng) -> Position {
        let r = rng.random::<f64>();
        if r < self.openings_fraction && !self.openings.is_empty() {
            return self.openings[rng.random_range(0..self.openings.len())].clone();
        }
        if r < self.openings_fraction + self.handicap_fraction {
            let handicaps = &Handicap::ALL[1..];
            return handicaps[rng.random_range(0..handicaps.len())].position();
        }
        Position::startpos()
    }
}
