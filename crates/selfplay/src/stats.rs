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
    /// Games played with resignation disabled; those in which a side would have resigned; and
    /// those where the side that would have resigned did not lose (false resignations).
    pub no_resign_games: usize,
    pub would_resign_games: usize,
    pub false_resignations: usize,
    /// The resignation threshold now (adjusted from the no-resign games; `resign_false_target`).
    pub resign_value: f32,
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
        self.would_resign_games += f.would_have_resigned as usize;
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

    /// The false-positive rate of resignation, as AlphaGo Zero measured it: of the no-resign games
    /// in which a side would have resigned, the share that side did not lose.
    pub fn false_resignation_rate(&self) -> Option<f64> {
        (self.would_resign_games > 0).then(|| self.false_resignations as f64 / self.would_resign_games as f64)
    }

    pub fn reason_count(&self, reason: EndReason) -> usize {
        self.endings.get(&format!("{reason:?}")).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koma_data::GameSamples;
    use koma_shogi::GameResult;

    fn finished(no_resign: bool, would: bool, wrong: bool) -> Finished {
        Finished {
            samples: GameSamples {
                start_sfen: String::new(),
                result: GameResult { winner: Some(Color::Black), reason: EndReason::Checkmate },
                length: 10,
                model: String::new(),
                moves: Vec::new(),
                samples: Vec::new(),
                root_values: Vec::new(),
            },
            resigned: false,
            no_resign,
            would_have_resigned: would,
            false_resignation: wrong,
            resign_levels: None,
        }
    }

    #[test]
    fn the_false_resignation_rate_counts_the_games_that_would_have_resigned() {
        let mut stats = SelfPlayStats::default();
        assert_eq!(stats.false_resignation_rate(), None);
        // Ten no-resign games: four would have resigned, one of them wrongly; and resigning games.
        for k in 0..10 {
            stats.add(&finished(true, k < 4, k == 0));
        }
        stats.add(&finished(false, false, false));
        assert_eq!((stats.no_resign_games, stats.would_resign_games, stats.false_resignations), (10, 4, 1));
        assert_eq!(stats.false_resignation_rate(), Some(0.25));
    }
}
