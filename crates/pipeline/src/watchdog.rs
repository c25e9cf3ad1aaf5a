//! Notices a stage that makes no progress: self-play that plays no move, or a trainer that neither
//! steps nor reports waiting for data, for `[run] stall_minutes`. A run left alone for days must not
//! burn hours doing nothing without a word: the stall shows in the status line and the log, and
//! again when the stage moves on.

use std::time::{Duration, Instant};

use crate::events::Event;

/// The two stages whose progress is watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    SelfPlay,
    Trainer,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::SelfPlay => "self-play",
            Stage::Trainer => "trainer",
        }
    }

    /// What the stage should have been doing.
    fn activity(self) -> &'static str {
        match self {
            Stage::SelfPlay => "played no move",
            Stage::Trainer => "made no step and is not waiting for data",
        }
    }
}

struct Watched {
    stage: Stage,
    last_progress: Instant,
    stalled: bool,
}

pub struct Watchdog {
    limit: Duration,
    watched: [Watched; 2],
    /// Self-play's move count at its last status.
    selfplay_moves: usize,
}

impl Watchdog {
    /// Watches both stages from `now`; a stall is `limit` without progress.
    pub fn new(limit: Duration, now: Instant) -> Watchdog {
        let watched = |stage| Watched { stage, last_progress: now, stalled: false };
        Watchdog { limit, watched: [watched(Stage::SelfPlay), watched(Stage::Trainer)], selfplay_moves: 0 }
    }

    /// Takes a stage's event into account: what counts as progress. A stage that comes back
    /// from a stall returns the event that says so.
    pub fn observe(&mut self, event: &Event, now: Instant) -> Option<Event> {
        let stage = match event {
            // Waiting for the first model is the trainer's business, not a stall.
            Event::SelfPlayWaiting | Event::ModelSwitched { .. } => Stage::SelfPlay,
            Event::SelfPlay(progress) => {
                if progress.moves == self.selfplay_moves {
                    return None;
                }
                self.selfplay_moves = progress.moves;
                Stage::SelfPlay
            }
            // Waiting for self-play's data is progress of a kind: the trainer is alive, and a
            // stalled self-play shows on its own.
            Event::Train(_) => Stage::Trainer,
            _ => return None,
        };
        let watched = &mut self.watched[stage as usize];
        watched.last_progress = now;
        if std::mem::take(&mut watched.stalled) {
            tracing::warn!("{} progresses again", stage.name());
            return Some(Event::Unstalled { stage: stage.name() });
        }
        None
    }

    /// The stalls that began since the last check, as events (each is logged as it is found).
    pub fn check(&mut self, now: Instant) -> Vec<Event> {
        let mut found = Vec::new();
        for watched in &mut self.watched {
            let idle = now.saturating_duration_since(watched.last_progress);
            if !watched.stalled && idle >= self.limit {
                watched.stalled = true;
                tracing::warn!(
                    "{} has {} for {:.0} s",
                    watched.stage.name(),
                    watched.stage.activity(),
                    idle.as_secs_f64()
                );
                found.push(Event::Stalled {
                    stage: watched.stage.name(),
                    activity: watched.stage.activity(),
                    seconds: idle.as_secs_f64(),
                });
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn selfplay(moves: usize) -> Event {
        Event::SelfPlay(koma_selfplay::Progress { moves, ..Default::default() })
    }

    fn stalled(events: &[Event]) -> Vec<&'static str> {
        events.iter().filter_map(|e| if let Event::Stalled { stage, .. } = e { Some(*stage) } else { None }).collect()
    }

    #[test]
    fn a_stage_without_progress_is_reported_once_and_again_when_it_moves() {
        let t0 = Instant::now();
        let minute = Duration::from_secs(60);
        let mut dog = Watchdog::new(10 * minute, t0);
        // Self-play keeps reporting, but the same move count is no progress.
        assert!(dog.observe(&selfplay(5), t0 + minute).is_none());
        assert!(dog.observe(&selfplay(5), t0 + 9 * minute).is_none());
        dog.observe(&Event::Train(koma_train::Progress::Step(Default::default())), t0 + 9 * minute);
        assert!(dog.check(t0 + 10 * minute).is_empty());
        assert_eq!(stalled(&dog.check(t0 + 11 * minute)), ["self-play"]);
        assert!(dog.check(t0 + 12 * minute).is_empty(), "a stall is reported once");
        // The trainer waits for data all along: alive, no stall.
        let waiting = koma_train::WaitInfo {
            reason: koma_train::WaitReason::AheadOfData,
            window_samples: 0,
            total_samples: 0,
            needed_total_samples: 1,
        };
        dog.observe(&Event::Train(koma_train::Progress::Waiting(waiting)), t0 + 18 * minute);
        assert!(dog.check(t0 + 19 * minute).is_empty());
        assert!(matches!(dog.observe(&selfplay(6), t0 + 20 * minute), Some(Event::Unstalled { stage: "self-play" })));
        assert_eq!(stalled(&dog.check(t0 + 29 * minute)), ["trainer"]);
    }
}
