//! The loader thread: owns the replay window, draws batches with the trainer's seeded RNG,
//! builds them ([`HostBatch::from_samples`]) and hands them over a bounded channel, a few
//! batches ahead of the optimiser. Each batch carries the RNG state right after it was drawn, so
//! the trainer saves exactly the state that reproduces the next batch on `--resume`.
//!
//! In follow mode it also looks for new shards and waits (reporting why) while the window holds
//! fewer than `min_window_samples` samples or the trainer is ahead of the data
//! (`samples_seen > samples_per_new_sample · samples produced`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam::channel::{bounded, Receiver, RecvTimeoutError, Sender};
use koma_base::Rng;
use koma_data::{ReplayWindow, Sample};
use koma_shogi::Move;
use rand::RngExt;
use serde::Serialize;

use crate::batch::{ContinuationTargets, HostBatch};
use crate::config::{FollowConfig, LossConfig, WindowConfig};
use crate::error::{Result, TrainError};

/// Why the loader is waiting (follow mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitReason {
    /// The window holds fewer than `min_window_samples` samples.
    WindowTooSmall,
    /// Training is ahead of the data (`samples_per_new_sample`).
    AheadOfData,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WaitInfo {
    pub reason: WaitReason,
    pub window_samples: usize,
    pub total_samples: usize,
    /// Samples produced so far needed before training goes on.
    pub needed_total_samples: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WindowInfo {
    pub window_samples: usize,
    pub total_samples: usize,
    pub shards: usize,
}

pub enum LoaderMsg {
    Opened(WindowInfo),
    Batch(Box<HostBatch>, WindowInfo),
    Waiting(WaitInfo),
}

pub struct LoaderSetup {
    pub shards_dir: PathBuf,
    pub window: WindowConfig,
    pub loss: LossConfig,
    pub batch_size: usize,
    pub prefetch: usize,
    /// Follow mode (None: a fixed data set, read once).
    pub follow: Option<FollowConfig>,
    /// The sampler's state for the first batch.
    pub rng: Rng,
    /// Samples the trainer has seen before the first batch (for the follow ratio).
    pub samples_seen: u64,
    /// Give each sample its opponent reply (the model has the reply head). The same samples are
    /// drawn either way.
    pub replies: bool,
}

pub struct Loader {
    rx: Option<Receiver<Result<LoaderMsg>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Loader {
    pub fn spawn(setup: LoaderSetup) -> Result<Loader> {
        let (tx, rx) = bounded(setup.prefetch.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let handle = std::thread::Builder::new()
            .name("koma-train-loader".into())
            .spawn(move || {
                if let Err(e) = run(setup, &tx, &thread_stop) {
                    let _ = tx.send(Err(e));
                }
            })
            .map_err(|e| TrainError::Loader(e.to_string()))?;
        Ok(Loader { rx: Some(rx), stop, handle: Some(handle) })
    }

    /// The next message, or None after `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Result<LoaderMsg>> {
        match self.rx.as_ref().expect("receiver lives until drop").recv_timeout(timeout) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Err(TrainError::Loader("it exited unexpectedly".into()))),
        }
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.rx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn info(w: &ReplayWindow) -> WindowInfo {
    WindowInfo { window_samples: w.len(), total_samples: w.total_samples(), shards: w.shard_count() }
}

/// Sleeps up to `seconds`, returning early (false) when stopped.
fn nap(seconds: f64, stop: &AtomicBool) -> bool {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())));
    }
    !stop.load(Ordering::SeqCst)
}

fn run(setup: LoaderSetup, tx: &Sender<Result<LoaderMsg>>, stop: &AtomicBool) -> Result<()> {
    if setup.follow.is_some() {
        std::fs::create_dir_all(&setup.shards_dir).map_err(crate::error::io(&setup.shards_dir))?;
    }
    let mut window = ReplayWindow::open(
        &setup.shards_dir,
        setup.window.window_size(),
        setup.window.sample_weights(),
        setup.window.storage,
    )?;
    if tx.send(Ok(LoaderMsg::Opened(info(&window)))).is_err() {
        return Ok(());
    }
    let mut rng = setup.rng;
    let mut samples_seen = setup.samples_seen;
    let batch_size = setup.batch_size;
    let mut batches = 0u64;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(f) = &setup.follow {
            if batches > 0 && f.refresh_every_batches > 0 && batches.is_multiple_of(f.refresh_every_batches) {
                window.refresh()?;
            }
            loop {
                let ratio_limit = |total: usize| f.samples_per_new_sample * total as f64;
                let reason = if window.len() < f.min_window_samples.max(1) {
                    Some(WaitReason::WindowTooSmall)
                } else if f.samples_per_new_sample > 0.0
                    && (samples_seen + batch_size as u64) as f64 > ratio_limit(window.total_samples())
                {
                    Some(WaitReason::AheadOfData)
                } else {
                    None
                };
                let Some(reason) = reason else { break };
                let needed = match reason {
                    WaitReason::WindowTooSmall => {
                        // Smallest total whose window holds min_window_samples (the window is all
                        // samples below c, so this is exact there and a lower bound above).
                        f.min_window_samples.max(window.total_samples() + 1)
                    }
                    WaitReason::AheadOfData => {
                        ((samples_seen + batch_size as u64) as f64 / f.samples_per_new_sample).ceil() as usize
                    }
                };
                let w = WaitInfo {
                    reason,
                    window_samples: window.len(),
                    total_samples: window.total_samples(),
                    needed_total_samples: needed,
                };
                if tx.send(Ok(LoaderMsg::Waiting(w))).is_err() || !nap(f.poll_seconds, stop) {
                    return Ok(());
                }
                window.refresh()?;
            }
        } else if window.is_empty() {
            return Err(TrainError::NoData(format!(
                "{} holds no readable samples (no .h5 shards, or all empty or unreadable)",
                setup.shards_dir.display()
            )));
        }
        let targets = ContinuationTargets {
            replies: setup.replies,
            material_weight: setup.loss.material_weight_at(samples_seen) as f32,
        };
        let mut batch = if targets.replies || targets.material_weight > 0.0 {
            let (mut samples, mut continuations): (Vec<_>, Vec<_>) = window
                .sample_with_continuations(batch_size, targets.continuation_plies(&setup.loss), &mut |n| {
                    rng.random_range(0..n)
                })?
                .into_iter()
                .unzip();
            if samples.is_empty() {
                return Err(TrainError::NoData(format!("no sample of {} could be read", setup.shards_dir.display())));
            }
            mirror_some(&mut samples, Some(&mut continuations[..]), setup.window.mirror, &mut rng);
            HostBatch::from_samples_with_continuations(&samples, &continuations, &setup.loss, targets)
        } else {
            let mut samples = window.sample(batch_size, &mut |n| rng.random_range(0..n))?;
            if samples.is_empty() {
                return Err(TrainError::NoData(format!("no sample of {} could be read", setup.shards_dir.display())));
            }
            mirror_some(&mut samples, None, setup.window.mirror, &mut rng);
            HostBatch::from_samples(&samples, &setup.loss)
        };
        if batch.is_empty() {
            return Err(TrainError::NoData(format!(
                "no position of a batch from {} unpacked",
                setup.shards_dir.display()
            )));
        }
        batch.rng_after = Some(rng.clone());
        samples_seen += batch.len() as u64;
        batches += 1;
        if tx.send(Ok(LoaderMsg::Batch(Box::new(batch), info(&window)))).is_err() {
            return Ok(());
        }
    }
}

/// Reflects each sample (and its continuation) left to right with probability `p`, drawn from the
/// sampler's generator, so that a resumed run reflects the same samples. `p = 0` draws nothing.
fn mirror_some(samples: &mut [Sample], mut continuations: Option<&mut [Option<Vec<Move>>]>, p: f64, rng: &mut Rng) {
    if p <= 0.0 {
        return;
    }
    for (i, sample) in samples.iter_mut().enumerate() {
        if rng.random::<f64>() >= p {
            continue;
        }
        // A position that does not unpack stays as it is; the batch leaves it out with a warning.
        if let Ok(mirrored) = sample.mirror() {
            *sample = mirrored;
            if let Some(continuation) = continuations.as_deref_mut().and_then(|c| c[i].as_mut()) {
                continuation.iter_mut().for_each(|m| *m = m.mirror());
            }
        }
    }
}
