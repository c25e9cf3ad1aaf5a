//! The resignation threshold, adjusted during the run as AlphaGo Zero did: "v_resign is selected
//! automatically to keep the fraction of false positives below 5%", measured on the games played
//! without resignation (`no_resign_fraction`).
//!
//! Each side of a no-resign game has a *resignation level*: the lowest threshold at which it would
//! have resigned. A side resigns at threshold t once `resign_consecutive` of its moves in a row
//! have both the root value and the most visited move's value below t, so its level is the
//! minimum, over runs of that many consecutive moves, of the largest of those values in the run
//! (+∞ for a side that never had that many searched moves). At threshold t the sides with a level
//! below t would have resigned; those that did not lose are false resignations. The threshold is
//! the highest one (at most [`CEILING`]) whose false-resignation rate over the newest
//! [`KEPT_SIDES`] sides is within the target, once at least [`MIN_WOULD_RESIGN`] sides would
//! have resigned there; until the data says that much, the configured `resign_value` stands.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// The highest threshold the adjustment may reach: a side resigns only below this value.
pub const CEILING: f32 = -0.5;
/// Sides of the newest no-resign games the threshold is fitted on.
pub const KEPT_SIDES: usize = 2000;
/// Would-resign sides a threshold needs before its false-resignation rate is trusted.
pub const MIN_WOULD_RESIGN: usize = 50;

/// One side of a no-resign game: its resignation level and whether it lost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SideLevel {
    pub level: f32,
    pub lost: bool,
}

/// The threshold self-play resigns at, shared by the workers of one self-play process.
pub struct ResignThreshold {
    /// The false-resignation rate to keep under; 0: the threshold stays as configured.
    target: f64,
    /// The configured threshold: the fit never goes above it when the data speak against every
    /// threshold.
    start: f32,
    bits: AtomicU32,
    sides: Mutex<VecDeque<SideLevel>>,
}

impl ResignThreshold {
    /// Starts at `start` (`resign_value`), adjusted towards `target` (0: never adjusted; nor when
    /// `start` is −1 or below, which turns resignation off).
    pub fn new(start: f32, target: f64) -> ResignThreshold {
        let target = if start > -1.0 { target } else { 0.0 };
        ResignThreshold { target, start, bits: AtomicU32::new(start.to_bits()), sides: Mutex::new(VecDeque::new()) }
    }

    /// The threshold now.
    pub fn value(&self) -> f32 {
        f32::from_bits(self.bits.load(Ordering::Relaxed))
    }

    /// Takes both sides of a finished no-resign game and adjusts the threshold.
    pub fn record(&self, sides: [SideLevel; 2]) {
        if self.target <= 0.0 {
            return;
        }
        let mut kept = self.sides.lock().unwrap_or_else(|e| e.into_inner());
        for side in sides {
            if kept.len() == KEPT_SIDES {
                kept.pop_front();
            }
            kept.push_back(side);
        }
        if let Some(t) = fit(kept.iter().copied(), self.target, self.start) {
            self.bits.store(t.to_bits(), Ordering::Relaxed);
        }
    }
}

/// The highest threshold (at most [`CEILING`]) whose false-resignation rate among `sides` is at
/// most `target`, with at least [`MIN_WOULD_RESIGN`] sides resigning at it; when none is, below
/// every level (no side of the data would resign) and not above `start`; `None` while fewer than
/// [`MIN_WOULD_RESIGN`] sides have a level under the ceiling (too little to say).
pub fn fit(sides: impl Iterator<Item = SideLevel>, target: f64, start: f32) -> Option<f32> {
    let mut low: Vec<SideLevel> = sides.filter(|s| s.level < CEILING).collect();
    if low.len() < MIN_WOULD_RESIGN {
        return None;
    }
    low.sort_by(|a, b| a.level.total_cmp(&b.level));
    // Thresholds between distinct levels: at t ∈ (low[k−1], low[k]] exactly the first k resign.
    let mut best = None;
    let mut wrong = 0usize;
    for k in 1..=low.len() {
        wrong += usize::from(!low[k - 1].lost);
        let boundary = k == low.len() || low[k].level > low[k - 1].level;
        if boundary && k >= MIN_WOULD_RESIGN && wrong as f64 <= target * k as f64 {
            best = Some(k);
        }
    }
    Some(match best {
        Some(k) if k == low.len() => CEILING,
        Some(k) => low[k].level,
        None => low[0].level.min(start).max(-1.0),
    })
}

/// Tracks one side's resignation level over a game (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct LevelTracker {
    window: VecDeque<f32>,
    level: f32,
}

impl LevelTracker {
    pub(crate) fn new() -> LevelTracker {
        LevelTracker { window: VecDeque::new(), level: f32::INFINITY }
    }

    /// One move of the side: `value` is the larger of the root value and the most visited move's
    /// value (+∞ when no move was searched); `consecutive` is `resign_consecutive`.
    pub(crate) fn push(&mut self, value: f32, consecutive: u32) {
        let n = consecutive.max(1) as usize;
        if self.window.len() == n {
            self.window.pop_front();
        }
        self.window.push_back(value);
        if self.window.len() == n {
            let highest = self.window.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            self.level = self.level.min(highest);
        }
    }

    pub(crate) fn level(&self) -> f32 {
        self.level
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(level: f32, lost: bool) -> SideLevel {
        SideLevel { level, lost }
    }

    fn level(i: usize) -> f32 {
        -0.99 + 0.004 * i as f32
    }

    #[test]
    fn the_threshold_is_the_highest_that_keeps_false_resignations_under_the_target() {
        // 100 sides at rising levels: the 70 lowest lost, the 30 above did not.
        let sides: Vec<SideLevel> = (0..100).map(|i| side(level(i), i < 70)).collect();
        // Resigning the first k sides is wrong for k − 70 of them: 3 in 73 (4.1%) is within 5%,
        // 4 in 74 (5.4%) is not, so 73 sides resign: the threshold is the 74th level.
        assert_eq!(fit(sides.iter().copied(), 0.05, -0.95), Some(level(73)));
        // A stricter target (0): only the lost ones.
        assert_eq!(fit(sides.iter().copied(), 0.0, -0.95), Some(level(70)));
        // All lost: the ceiling.
        let all_lost: Vec<SideLevel> = (0..60).map(|i| side(level(i), true)).collect();
        assert_eq!(fit(all_lost.into_iter(), 0.05, -0.95), Some(CEILING));
        // Mostly wrong: below every level of the data, and not above the configured threshold.
        let wrong: Vec<SideLevel> = (0..60).map(|i| side(-0.9 + 0.001 * i as f32, i % 2 == 0)).collect();
        assert_eq!(fit(wrong.iter().copied(), 0.05, -0.95), Some(-0.95));
        assert_eq!(fit(wrong.iter().copied(), 0.05, -0.5), Some(-0.9));
        // Too few sides below the ceiling: no opinion.
        let few: Vec<SideLevel> = (0..MIN_WOULD_RESIGN - 1).map(|i| side(level(i), true)).collect();
        assert_eq!(fit(few.into_iter().chain([side(f32::INFINITY, false); 50]), 0.05, -0.95), None);
    }

    #[test]
    fn ties_move_together_and_the_threshold_adjusts_only_with_a_target_and_resignation_on() {
        // 60 sides at one level, 4 of them wrong (6.7%): no threshold at that level keeps 5%.
        let tied: Vec<SideLevel> = (0..60).map(|i| side(-0.8, i >= 4)).collect();
        assert_eq!(fit(tied.iter().copied(), 0.05, -0.95), Some(-0.95));
        assert_eq!(fit(tied.iter().copied(), 0.10, -0.95), Some(CEILING));
        let lost_game = [side(-0.99, true), side(f32::INFINITY, false)];
        for (start, target, after) in [(-0.95, 0.0, -0.95), (-2.0, 0.05, -2.0), (-0.95, 0.05, CEILING)] {
            let threshold = ResignThreshold::new(start, target);
            for _ in 0..MIN_WOULD_RESIGN {
                threshold.record(lost_game);
            }
            assert_eq!(threshold.value(), after, "start {start}, target {target}");
        }
    }

    #[test]
    fn a_sides_level_is_the_lowest_highest_value_of_its_consecutive_moves() {
        let mut t = LevelTracker::new();
        for v in [0.0, -0.97, -0.99, -0.5, -0.96, -0.98, -0.97] {
            t.push(v, 3);
        }
        // Runs of 3: (0, −.97, −.99) → 0; (−.97, −.99, −.5) → −.5; …; (−.96, −.98, −.97) → −.96.
        assert!((t.level() - (-0.96)).abs() < 1e-6, "{}", t.level());
        let mut short = LevelTracker::new();
        short.push(-0.99, 3);
        assert_eq!(short.level(), f32::INFINITY);
    }
}
