//! When a timed search stops: never past the hard limit (with the batches in flight), early when
//! the runner-up cannot catch up before the soft limit, and past the soft limit only while the
//! choice is unsure (docs/engine.md, "Time management").

use std::time::Duration;

use koma_mcts::Search;
use koma_shogi::Move;

use super::info::ordered_children;
use super::walk::Stats;
use super::Job;
use crate::time::Budget;

impl Job {
    /// Whether a timed search should stop now (see [`crate::time`]).
    pub(super) fn time_is_up(
        &self,
        search: &Search,
        b: Budget,
        batch_time: Duration,
        restrict: &[Move],
        stats: &Stats,
    ) -> bool {
        let elapsed = self.clock_start().elapsed();
        // The next batch must also finish before the hard limit.
        if elapsed + batch_time >= b.hard {
            return true;
        }
        let children = ordered_children(search, restrict);
        let (best, second) = match children.as_slice() {
            [] => return false,
            [only] => (only.visits as f64, 0.0),
            [a, b, ..] => (a.visits as f64, b.visits as f64),
        };
        if elapsed < b.soft {
            if !b.may_stop_early || elapsed < b.soft / 4 {
                return false;
            }
            // Stop early when the runner-up cannot catch up before the soft limit.
            let new_visits = (search.root_visits() - stats.base_visits) as f64;
            let rate = new_visits / elapsed.as_secs_f64().max(1e-3);
            let left = rate * (b.soft - elapsed).as_secs_f64();
            return best - second > left;
        }
        // Past the soft limit: go on (up to the hard limit) while unsure.
        let close = second >= 0.7 * best;
        let better_second = match children.as_slice() {
            [a, b, ..] => match (a.q, b.q) {
                (Some(qa), Some(qb)) => qb > qa + 0.05 && second >= 0.3 * best,
                _ => false,
            },
            _ => false,
        };
        !(close || better_second)
    }
}
