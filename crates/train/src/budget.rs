//! The run's budget as the trainer sees it, for a learning rate that anneals over the run
//! (`[train.lr] schedule = "cosine"` with `decay_steps = 0`): whatever the machine's speed, the
//! rate reaches its floor as the run's limit ends it, where a step count tuned on one machine
//! stops short (or runs past the end) on another.

/// How much of the caller's budget is spent: limits of this process's time (the pipeline's
/// `--minutes` and `--cpu-minutes`, counted from the process's start), and limits that count
/// over the whole run, as the step limit does (the pipeline's `--evals`).
pub trait BudgetClock: Send + Sync + std::fmt::Debug {
    /// The share of this process's time limits spent, 0 to 1 (1 once a limit is reached), of
    /// whichever is nearer its end; 0 without one.
    fn spent(&self) -> f64;

    /// The share of the whole run's limits spent (earlier processes' work included), 0 to 1;
    /// None without such a limit.
    fn run_spent(&self) -> Option<f64> {
        None
    }
}

/// The share of the whole run's budget spent at `step`: the furthest of the steps' share of
/// `target` (the run's step limit, counting the steps of earlier processes), `run_spent` (a
/// clock's share of its whole-run limits, [`BudgetClock::run_spent`]) and `clock_spent`, a
/// clock's share of this process's time ([`BudgetClock::spent`]), which is a share of what was
/// left when this process started (`resumed_at`, the share the training state recorded). None
/// without any limit.
pub fn run_share(
    step: u64,
    target: Option<u64>,
    resumed_at: f64,
    clock_spent: Option<f64>,
    run_spent: Option<f64>,
) -> Option<f64> {
    let by_steps = target.map(|t| step as f64 / t.max(1) as f64);
    let by_clock = clock_spent.map(|c| resumed_at + (1.0 - resumed_at) * c.clamp(0.0, 1.0));
    [by_steps, by_clock, run_spent].into_iter().flatten().reduce(f64::max).map(|s| s.min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_the_furthest_limit_and_a_resume_spends_what_was_left() {
        assert_eq!(run_share(10, None, 0.0, None, None), None);
        assert_eq!(run_share(25, Some(100), 0.0, None, None), Some(0.25));
        assert_eq!(run_share(25, Some(100), 0.0, Some(0.5), None), Some(0.5));
        assert_eq!(run_share(75, Some(100), 0.0, Some(0.5), None), Some(0.75));
        // Resumed at 0.4 of the run: half of the new limit spent is 0.7 of the whole.
        assert!((run_share(0, None, 0.4, Some(0.5), None).unwrap() - 0.7).abs() < 1e-12);
        assert_eq!(run_share(0, None, 0.4, Some(3.0), None), Some(1.0));
        assert_eq!(run_share(500, Some(100), 0.0, None, None), Some(1.0));
        // A whole-run limit (evaluations) is already a share of the whole run: resumed at 0.5
        // with half the evaluations done, the share is 0.5, not 0.5 + 0.5 · 0.5.
        assert_eq!(run_share(0, None, 0.5, Some(0.0), Some(0.5)), Some(0.5));
        assert_eq!(run_share(0, None, 0.5, Some(0.0), Some(0.6)), Some(0.6));
        assert_eq!(run_share(0, None, 0.0, None, Some(1.5)), Some(1.0));
    }
}
