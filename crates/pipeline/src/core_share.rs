//! How self-play and the trainer of one CPU run share the cores. Self-play's inference is the
//! CPU's main consumer (its search threads mostly wait for the network), and the trainer waits
//! for new samples part of the time (`[train.follow] samples_per_new_sample`): with fixed thread
//! counts a core idles while it waits (the embedded default used 154% of 200%). With `[run]
//! selfplay_uses_idle_cores`, self-play's libtorch threads follow the trainer: every core while it
//! waits, the cores it leaves (`[run] threads` go to the trainer) while it trains.

use std::sync::atomic::{AtomicBool, Ordering};

use koma_nn::ThreadBudget;
use koma_train::Progress;

pub struct CoreShare {
    cores: usize,
    trainer_threads: usize,
    /// Self-play's CPU inference services (`device = "cpu,cpu"` runs two): they split the share.
    services: usize,
    training: AtomicBool,
}

impl CoreShare {
    /// `cores` in all, `trainer_threads` of them the trainer's while it trains, the rest split
    /// between self-play's `services` inference services.
    pub fn new(cores: usize, trainer_threads: usize, services: usize) -> CoreShare {
        CoreShare { cores: cores.max(1), trainer_threads, services: services.max(1), training: AtomicBool::new(false) }
    }

    /// Self-play's inference services sharing the cores.
    pub fn services(&self) -> usize {
        self.services
    }

    /// Follows the trainer: a step means it trains, waiting for data means it does not.
    pub fn observe(&self, progress: &Progress) {
        match progress {
            Progress::Step(_) => self.training.store(true, Ordering::Relaxed),
            Progress::Waiting(_) => self.training.store(false, Ordering::Relaxed),
            Progress::Started { .. } | Progress::Metrics(_) | Progress::Checkpoint { .. } => {}
        }
    }
}

impl ThreadBudget for CoreShare {
    /// One inference service's threads: its part of the cores the trainer does not use now, at
    /// least one (so with more services than free cores the threads outnumber the cores: on 2
    /// cores, 2 services and a trainer with 1 thread run 3 threads while it trains, and that
    /// still measured more games and steps per minute than 1 service: docs/pipeline.md).
    fn threads(&self) -> usize {
        let free = if self.training.load(Ordering::Relaxed) {
            self.cores.saturating_sub(self.trainer_threads)
        } else {
            self.cores
        };
        (free / self.services).max(1)
    }
}

#[cfg(test)]
mod tests {
    use koma_train::{WaitInfo, WaitReason};

    use super::*;

    #[test]
    fn selfplay_takes_the_cores_while_the_trainer_waits_and_gives_them_back_when_it_trains() {
        let share = CoreShare::new(2, 1, 1);
        assert_eq!(share.threads(), 2, "before the first step the trainer waits for data");
        share.observe(&Progress::Step(Default::default()));
        assert_eq!(share.threads(), 1);
        share.observe(&Progress::Checkpoint { step: 100, path: "model-00000100.safetensors".into() });
        assert_eq!(share.threads(), 1, "a checkpoint says nothing about waiting");
        let waiting = WaitInfo {
            reason: WaitReason::AheadOfData,
            window_samples: 10,
            total_samples: 10,
            needed_total_samples: 20,
        };
        share.observe(&Progress::Waiting(waiting));
        assert_eq!(share.threads(), 2);
        // A trainer with every core leaves self-play one while it trains.
        let all = CoreShare::new(8, 8, 1);
        all.observe(&Progress::Step(Default::default()));
        assert_eq!(all.threads(), 1);
        // Two CPU services split what is free.
        let two = CoreShare::new(8, 2, 2);
        assert_eq!(two.threads(), 4);
        two.observe(&Progress::Step(Default::default()));
        assert_eq!(two.threads(), 3);
    }
}
