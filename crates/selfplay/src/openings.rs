//! Where self-play games start: the normal position, a share from handicap starts, and a share
//! from an opening suite (USI position lines such as `startpos moves 7g7f 3c3d`).

use koma_base::Rng;
use koma_shogi::{Handicap, OpeningSuite, Position};
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

    /// Adds the positions of an opening suite.
    pub fn with_suite(mut self, suite: &OpeningSuite) -> StartPositions {
        self.openings.extend_from_slice(suite.positions());
        self
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
