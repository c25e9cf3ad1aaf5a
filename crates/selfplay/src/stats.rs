//! What self-play produced, for progress lines and the summary.

use koma_shogi::{Color, EndReason};
use serde::Serialize;

use crate::game::Finished;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SelfPlayStats {
    pub games: usize,
    pub samples: usize,
    pub plies: usize,
    pub black_wins: usize,
    pub white_wins: usize,
    pub draws: usize,
    pub resignations: usize,
    /// Games played with resignation disabled, and those where the side that would have resigned
    /// did not lose (false resignations).
    pub no_resign_games: usize,
    pub false_resignations: usize,
    /// Games by how they ended (EndReason names).
    pub endings: std::collections::BTreeMap<String, usize>,
}

impl SelfPlayStats {
    pub(crate) fn add(&mut self, f: &Finished) {
        let g = &f.samples;
        self.games += 1;
        self.samples += g.samples.len();
        self.plies += g.length as usize;
        match g.result.winner {
            Some(Color::Black) => self.black_wins += 1,
            Some(Color::White) => self.white_wins += 1,
            None => self.draws += 1,
        }
        self.resignations += f.resigned as usize;
        self.no_resign_games += f.no_resign as usize;
        self.false_resignations += f.false_resignation as usize;
        *self.endings.entry(format!("{:?}", g.result.reason)).or_default() += 1;
    }

    pub fn average_length(&self) -> f64 {
        if self.games == 0 {
            0.0
        } else {
            self.plies as f64 / self.games as f64
        }
    }

    /// Share of no-resign games in which resigning would have been wrong.
    pub fn false_resignation_rate(&self) -> Option<f64> {
        (self.no_resign_games > 0).then(|| self.false_resignations as f64 / self.no_resign_games as f64)
    }

    pub fn reason_count(&self, reason: EndReason) -> usize {
        self.endings.get(&format!("{reason:?}")).copied().unwrap_or(0)
    }
}
