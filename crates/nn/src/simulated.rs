//! A simulated accelerator: it stands in for a GPU's forward pass so that inference designs can
//! be compared on a machine without one. Everything else is koma's own code running for real: the
//! search, the inference services, the leaves' encoding into staging buffers with their
//! legal-move labels, padding, the copy of what comes back, the finiteness check, the decoding
//! into priors and the model switches. Only the forward pass is replaced, by a wait whose length
//! is the device model's time for the batch, and the device is one resource: two callers never
//! overlap on it, as batches on one GPU stream do not. The waiting thread spins, as a CUDA
//! synchronisation does under the default scheduling (fewer contexts than cores): a service holds
//! a core while its batch is on the device, and the CPU figures count it. The answer is copied and
//! checked before the device is let go, as `Network::forward_leaves` does under its lock.
//!
//! The time of a batch of `rows` padded rows is
//! `launch + rows / evals_per_s + (upload + download bytes) / bus_bytes_per_s`;
//! "device busy" in the benchmark is the share of wall time the device is held for a batch.
//! docs/benchmarks.md ("Self-play inference on an accelerator") gives the source of every default.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use koma_mcts::{EvalError, Evaluation, Evaluator};
use koma_shogi::Position;
use tch::Device;

use crate::encoding::{INPUT1_LEN, INPUT2_LEN, MOVE_LABELS};
use crate::leaves::{LeafBatch, LeafOutput};
use crate::model::VALUE_OUTPUTS;
use crate::network::CUDA_PAD_MULTIPLE;

/// How long a simulated device takes for a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceModel {
    /// Positions a second in the forward pass at large batches.
    pub evals_per_s: f64,
    /// Fixed cost of a batch: launching its kernels and synchronising once.
    pub launch: Duration,
    /// Host–device bandwidth for the upload of the features and the download of the logits.
    pub bus_bytes_per_s: f64,
    /// Rows are padded to a multiple of this, as on CUDA.
    pub pad_multiple: usize,
}

/// The named devices: `(name, evaluations/s of resnet10-swish in bf16, launch µs, bus GB/s)`.
/// Sources in docs/benchmarks.md ("Self-play inference on an accelerator").
const PRESETS: [(&str, f64, u64, f64); 2] = [("h200", 100_000.0, 500, 25.0), ("h100", 100_000.0, 500, 25.0)];

impl DeviceModel {
    /// The time of one batch of `rows` padded rows holding `positions` positions, from which
    /// `legal` logits come back (with the positions' W/D/L logits).
    pub fn batch_time(&self, rows: usize, positions: usize, legal: usize) -> Duration {
        let upload = rows * (INPUT1_LEN + INPUT2_LEN);
        let download = (legal + positions * VALUE_OUTPUTS) * 4;
        let seconds = rows as f64 / self.evals_per_s + (upload + download) as f64 / self.bus_bytes_per_s;
        self.launch + Duration::from_secs_f64(seconds)
    }

    /// The named devices, for help texts.
    pub fn preset_names() -> Vec<&'static str> {
        PRESETS.iter().map(|p| p.0).collect()
    }
}

impl std::str::FromStr for DeviceModel {
    type Err = String;

    /// `h200` or `h100` (a preset), or `EVALS[,launch=MS][,bus=GBPS]`: e.g. `20000,launch=0.5`.
    fn from_str(text: &str) -> Result<DeviceModel, String> {
        let mut parts = text.split(',').map(str::trim);
        let head = parts.next().unwrap_or_default();
        let mut model = match PRESETS.iter().find(|p| p.0 == head) {
            Some(&(_, evals, launch_us, bus)) => DeviceModel {
                evals_per_s: evals,
                launch: Duration::from_micros(launch_us),
                bus_bytes_per_s: bus * 1e9,
                pad_multiple: CUDA_PAD_MULTIPLE,
            },
            None => {
                let evals: f64 = head.parse().map_err(|_| {
                    format!(
                        "simulated device {text:?}: starts with a preset ({}) or evaluations per second",
                        DeviceModel::preset_names().join(", ")
                    )
                })?;
                if !(evals.is_finite() && evals > 0.0) {
                    return Err(format!("simulated device {text:?}: evaluations per second must be > 0"));
                }
                DeviceModel {
                    evals_per_s: evals,
                    launch: Duration::from_micros(PRESETS[0].2),
                    bus_bytes_per_s: PRESETS[0].3 * 1e9,
                    pad_multiple: CUDA_PAD_MULTIPLE,
                }
            }
        };
        for part in parts {
            let (key, value) =
                part.split_once('=').ok_or_else(|| format!("simulated device {text:?}: {part:?} is not KEY=VALUE"))?;
            let number: f64 = value
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("simulated device {text:?}: {key} = {value:?} is not a number ≥ 0"))?;
            match key {
                "launch" => model.launch = Duration::from_secs_f64(number / 1e3),
                "bus" if number > 0.0 => model.bus_bytes_per_s = number * 1e9,
                "pad" if number >= 1.0 => model.pad_multiple = number as usize,
                _ => {
                    return Err(format!(
                        "simulated device {text:?}: {key} = {value} is not launch=MS (≥ 0), bus=GB/s (> 0) or pad=ROWS (≥ 1)"
                    ))
                }
            }
        }
        Ok(model)
    }
}

/// Where a simulated device's time went, summed over every caller (nanoseconds).
#[derive(Default)]
pub struct StageTimes {
    /// Encoding leaves into the staging buffers (features and legal-move labels).
    pub encode_ns: AtomicU64,
    /// Waiting for the device while another caller's batch held it.
    pub queue_ns: AtomicU64,
    /// The device held for a batch: the model's time, then the answer's copy and check.
    pub device_ns: AtomicU64,
    /// Decoding priors and W/D/L from the answer.
    pub decode_ns: AtomicU64,
    pub batches: AtomicU64,
    pub rows: AtomicU64,
    pub positions: AtomicU64,
}

/// A reading of [`StageTimes`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageCounts {
    pub encode_ns: u64,
    pub queue_ns: u64,
    pub device_ns: u64,
    pub decode_ns: u64,
    pub batches: u64,
    pub rows: u64,
    pub positions: u64,
}

impl StageTimes {
    pub fn counts(&self) -> StageCounts {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StageCounts {
            encode_ns: get(&self.encode_ns),
            queue_ns: get(&self.queue_ns),
            device_ns: get(&self.device_ns),
            decode_ns: get(&self.decode_ns),
            batches: get(&self.batches),
            rows: get(&self.rows),
            positions: get(&self.positions),
        }
    }
}

/// One simulated device: the model of its time and the lock that makes it one resource.
pub struct SimulatedDevice {
    model: DeviceModel,
    busy: Mutex<()>,
    times: StageTimes,
}

impl SimulatedDevice {
    pub fn new(model: DeviceModel) -> Arc<SimulatedDevice> {
        Arc::new(SimulatedDevice { model, busy: Mutex::new(()), times: StageTimes::default() })
    }

    /// Where the time went so far.
    pub fn times(&self) -> StageCounts {
        self.times.counts()
    }

    /// Runs a batch of the positions whose hashes are `keys`: waits its turn, holds the device
    /// for the model's time (spinning), writes and checks the answer, and lets the device go. The
    /// answer is a fixed function of each position and move (policy logits in [−2, 2], W/D/L
    /// logits in [−1, 1]): priors and values vary from move to move and position to position as a
    /// network's do, and a position gets the same answer wherever it sits in a batch.
    fn forward(&self, batch: &LeafBatch, keys: &[u64], out: &mut LeafOutput) {
        let queued = Instant::now();
        let guard = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        let done = started + self.model.batch_time(batch.rows(), batch.len(), batch.legal_moves());
        while Instant::now() < done {
            std::hint::spin_loop();
        }
        out.legal_logits.clear();
        out.legal_logits.extend(batch.gather_indices().iter().map(|&g| {
            let (row, label) = (g as usize / MOVE_LABELS, g as usize % MOVE_LABELS);
            2.0 * pseudo_logit(keys[row] ^ (label as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        }));
        out.wdl.clear();
        out.wdl.extend(keys.iter().flat_map(|&k| (0..VALUE_OUTPUTS as u64).map(move |j| pseudo_logit(!k ^ j))));
        let bad = out.non_finite_positions(batch);
        let device_end = Instant::now();
        drop(guard);
        debug_assert_eq!(bad, 0, "the simulated answer is finite");
        let t = &self.times;
        t.queue_ns.fetch_add((started - queued).as_nanos() as u64, Ordering::Relaxed);
        t.device_ns.fetch_add((device_end - started).as_nanos() as u64, Ordering::Relaxed);
        t.batches.fetch_add(1, Ordering::Relaxed);
        t.rows.fetch_add(batch.rows() as u64, Ordering::Relaxed);
        t.positions.fetch_add(batch.len() as u64, Ordering::Relaxed);
    }
}

/// A number in [−1, 1] fixed by `x` (splitmix64's finaliser).
fn pseudo_logit(x: u64) -> f32 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

thread_local! {
    /// Each caller's own staging buffers, as a real network's services have.
    static STAGING: RefCell<(LeafBatch, LeafOutput, Vec<u64>)> =
        RefCell::new((LeafBatch::for_device(Device::Cpu), LeafOutput::default(), Vec::new()));
}

/// The evaluator that runs on a [`SimulatedDevice`]: encode, forward (simulated), check, decode.
pub struct SimulatedNetwork {
    device: Arc<SimulatedDevice>,
}

impl SimulatedNetwork {
    pub fn new(device: Arc<SimulatedDevice>) -> SimulatedNetwork {
        SimulatedNetwork { device }
    }

    /// Evaluates positions as a network on the simulated device would answer them.
    pub fn evaluate_positions<P: Borrow<Position> + Sync>(&self, positions: &[P]) -> Vec<Evaluation> {
        STAGING.with(|staging| {
            let mut staging = staging.borrow_mut();
            let (batch, out, keys) = &mut *staging;
            let t = &self.device.times;
            let start = Instant::now();
            batch.encode(positions, self.device.model.pad_multiple);
            keys.clear();
            keys.extend(positions.iter().map(|p| p.borrow().hash()));
            t.encode_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
            self.device.forward(batch, keys, out);
            let start = Instant::now();
            let evaluations = batch.evaluations(out);
            t.decode_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
            evaluations
        })
    }
}

impl Evaluator for SimulatedNetwork {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(self.evaluate_positions(positions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_time_is_launch_plus_rows_plus_bytes() {
        let model: DeviceModel = "1000,launch=2,bus=1".parse().unwrap();
        assert_eq!(model.launch, Duration::from_millis(2));
        // 100 rows (90 positions) at 1000/s = 100 ms; 100 × 9639 + 500 × 4 + 90 × 12 bytes at
        // 1 GB/s ≈ 0.967 ms.
        let t = model.batch_time(100, 90, 500).as_secs_f64();
        assert!((t - (0.002 + 0.1 + (100.0 * 9639.0 + 2000.0 + 1080.0) / 1e9)).abs() < 1e-9, "{t}");
        let h200: DeviceModel = "h200".parse().unwrap();
        assert_eq!(h200.evals_per_s, 100_000.0);
        assert_eq!(h200.pad_multiple, 64);
        for bad in ["", "fast", "0", "-5", "100,launch", "100,launch=x", "100,bus=0", "100,warp=2", "nan"] {
            assert!(bad.parse::<DeviceModel>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_device_is_one_resource_and_answers_like_a_network() {
        // 20 rows at 2000/s: 10 ms a batch (padding 1, launch 0).
        let device = SimulatedDevice::new("2000,launch=0,pad=1".parse().unwrap());
        let net = Arc::new(SimulatedNetwork::new(device.clone()));
        let positions: Vec<Position> = (0..20).map(|_| Position::startpos()).collect();
        let start = Instant::now();
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let (net, positions) = (net.clone(), positions.clone());
                std::thread::spawn(move || net.evaluate_positions(&positions))
            })
            .collect();
        let answers: Vec<Vec<Evaluation>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        // Three batches of 10 ms never overlap: at least 30 ms in all.
        assert!(start.elapsed() >= Duration::from_millis(30), "{:?}", start.elapsed());
        let times = device.times();
        assert_eq!((times.batches, times.positions, times.rows), (3, 60, 60));
        assert!(times.device_ns >= 30_000_000 && times.queue_ns >= 10_000_000, "{times:?}");
        for evals in &answers {
            assert_eq!(evals.len(), 20);
            for e in evals {
                assert_eq!(e.priors.len(), Position::startpos().legal_moves().len());
                assert!((e.priors.iter().sum::<f32>() - 1.0).abs() < 1e-5);
                assert!(e.priors.iter().any(|&p| p != e.priors[0]), "priors are not uniform");
                assert!((e.wdl.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            }
        }
        // The same batch gets the same answer (the simulation is reproducible), and a position the
        // same answer wherever it sits in a batch.
        assert_eq!(answers[0], answers[1]);
        let mut other = Position::startpos();
        other.do_move(other.legal_moves()[3]);
        let mixed = net.evaluate_positions(&[other.clone(), Position::startpos()]);
        assert_eq!(mixed[1], answers[0][0]);
        assert_ne!(mixed[0].wdl, mixed[1].wdl);
        assert_eq!(net.evaluate_positions(&[other])[0], mixed[0]);
    }
}
