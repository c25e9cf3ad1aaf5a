//! Running a network: [`Network`] (one model on one device, in one precision), its answer for a
//! position as the search's [`Evaluation`] (priors over the legal moves and W/D/L), and
//! [`SharedNetwork`], a mutex around the network that any number of threads call: each caller
//! encodes its own batch (outside the lock) and runs it. Merging the small batches of many searches
//! into large ones is the search side's inference service (`koma_mcts::InferenceServer`), which
//! runs a `SharedNetwork` like any other evaluator.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Mutex;

use koma_mcts::Evaluation;
use koma_shogi::Position;
use tch::{nn::VarStore, Device, Kind, Tensor};

use crate::checkpoint::{self, CheckpointMeta, TrainingInfo};
use crate::config::ModelConfig;
use crate::device::RunOptions;
use crate::encoding::{InputBatch, FEATURES1_NUM, FEATURES2_NUM, MOVE_LABELS};
use crate::error::{Error, Result};
use crate::leaves::{LeafBatch, LeafOutput};
use crate::model::{Net, VALUE_OUTPUTS};

/// An early middle game with a bishop in hand and one dropped, for [`Network::probe`].
const PROBE_SFEN: &str = "lnsgkg1nl/1r5s1/pppppp1pp/6p2/5B3/2P6/PP1PPPPPP/7R1/LNSGKGSNL w b 6";

/// Raw network outputs for a batch: policy logits `(N, 2187)` and W/D/L logits `(N, 3)`,
/// row-major float32. Reused between calls.
#[derive(Debug, Default, Clone)]
pub struct RawOutput {
    policy: Vec<f32>,
    wdl: Vec<f32>,
    len: usize,
}

impl RawOutput {
    pub fn new() -> RawOutput {
        RawOutput::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Policy logits of all positions, `(N, 2187)` row-major.
    pub fn policy_all(&self) -> &[f32] {
        &self.policy[..self.len * MOVE_LABELS]
    }

    /// W/D/L logits of all positions, `(N, 3)` row-major.
    pub fn wdl_all(&self) -> &[f32] {
        &self.wdl[..self.len * VALUE_OUTPUTS]
    }

    /// Positions with a NaN or infinite output (policy logit or W/D/L logit).
    pub fn non_finite_positions(&self) -> usize {
        (0..self.len).filter(|&i| !self.policy(i).iter().copied().chain(self.wdl_logits(i)).all(f32::is_finite)).count()
    }

    /// Policy logits of position `i`.
    pub fn policy(&self, i: usize) -> &[f32] {
        &self.policy[i * MOVE_LABELS..(i + 1) * MOVE_LABELS]
    }

    /// W/D/L logits of position `i`.
    pub fn wdl_logits(&self, i: usize) -> [f32; 3] {
        let w = &self.wdl[i * VALUE_OUTPUTS..(i + 1) * VALUE_OUTPUTS];
        [w[0], w[1], w[2]]
    }

    fn set_len(&mut self, n: usize) {
        self.len = n;
        if self.policy.len() < n * MOVE_LABELS {
            self.policy.resize(n * MOVE_LABELS, 0.0);
            self.wdl.resize(n * VALUE_OUTPUTS, 0.0);
        }
    }
}

/// A network on a device, ready for inference (batch norm uses running statistics).
pub struct Network {
    vs: VarStore,
    net: Net,
    config: ModelConfig,
    device: Device,
    kind: Kind,
    meta: Option<CheckpointMeta>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("config", &self.config.describe())
            .field("device", &self.device)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Network {
    /// A freshly initialised network. `seed` makes the initial weights reproducible (it seeds
    /// libtorch's global generator).
    pub fn new(config: &ModelConfig, options: &RunOptions, seed: Option<u64>) -> Result<Network> {
        config.validate()?;
        let (device, kind) = options.resolve()?;
        // Initialise in float32 on the CPU (same numbers whatever the device), then move.
        let mut vs = VarStore::new(Device::Cpu);
        let net = crate::model::seeded(seed, || Net::new(&vs.root(), config));
        vs.set_device(device);
        set_float_kind(&mut vs, kind);
        Ok(Network { vs, net, config: config.clone(), device, kind, meta: None })
    }

    /// Loads a checkpoint, building the architecture its sidecar describes.
    pub fn load(path: &Path, options: &RunOptions) -> Result<Network> {
        Network::load_checked(path, None, options)
    }

    /// Loads a checkpoint that must have exactly the architecture `expected`.
    pub fn load_expecting(path: &Path, expected: &ModelConfig, options: &RunOptions) -> Result<Network> {
        Network::load_checked(path, Some(expected), options)
    }

    fn load_checked(path: &Path, expected: Option<&ModelConfig>, options: &RunOptions) -> Result<Network> {
        let (device, kind) = options.resolve()?;
        let loaded = checkpoint::read(path, expected)?;
        let config = loaded.meta.model.clone();
        let mut vs = VarStore::new(Device::Cpu);
        let net = Net::new(&vs.root(), &config);
        checkpoint::copy_into(path, &loaded.tensors, &mut vs)?;
        // tch's device and precision moves panic on failure (CUDA out of memory, most often while
        // a second model is loaded beside the first): an error here, not a dead thread.
        catch_unwind(AssertUnwindSafe(|| {
            vs.set_device(device);
            set_float_kind(&mut vs, kind);
        }))
        .map_err(|panic| Error::Load {
            path: path.to_path_buf(),
            reason: koma_base::stop::panic_message(panic.as_ref()),
        })?;
        Ok(Network { vs, net, config, device, kind, meta: Some(loaded.meta) })
    }

    /// Evaluates a few fixed positions (the start, and a middle game with pieces in hand): a model
    /// that loads but whose weights answer NaN or infinity is refused here, before it plays.
    pub fn probe(&self) -> Result<()> {
        let positions = [Position::startpos(), Position::from_sfen(PROBE_SFEN).expect("the probe position is valid")];
        self.evaluate(&positions).map(|_| ())
    }

    /// The same network with a freshly initialised opponent-reply head (`aux_reply_head`) added
    /// and every other variable copied: to train the reply target starting from a checkpoint made
    /// without the head (e.g. a model 0 shared by several experiment variants). `seed` seeds
    /// libtorch's generator first, so the new head is reproducible. A network that already has the
    /// head is returned as a copy.
    pub fn with_reply_head(&self, seed: Option<u64>) -> Result<Network> {
        let mut config = self.config.clone();
        config.aux_reply_head = true;
        let mut vs = VarStore::new(Device::Cpu);
        let net = crate::model::seeded(seed, || Net::new(&vs.root(), &config));
        vs.set_device(self.device);
        set_float_kind(&mut vs, self.kind);
        let ours = self.vs.variables();
        let _guard = tch::no_grad_guard();
        for (name, mut var) in vs.variables() {
            if let Some(src) = ours.get(&name) {
                var.f_copy_(src)?;
            }
        }
        Ok(Network { vs, net, config, device: self.device, kind: self.kind, meta: None })
    }

    /// Saves the weights (as float32) and sidecar; see [`checkpoint::save`].
    pub fn save(&mut self, path: &Path, training: &TrainingInfo) -> Result<CheckpointMeta> {
        let meta = checkpoint::save(&self.vs, &self.config, training, path)?;
        self.meta = Some(meta.clone());
        Ok(meta)
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// Kind of the weights and activations (Float, Half or BFloat16).
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The sidecar of the checkpoint this network was loaded from or last saved to.
    pub fn meta(&self) -> Option<&CheckpointMeta> {
        self.meta.as_ref()
    }

    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    /// For tests and tools that set weights directly (batch norm is unfolded, so that inference
    /// sees the new weights).
    pub fn var_store_mut(&mut self) -> &mut VarStore {
        self.net.unfold();
        &mut self.vs
    }

    pub fn net(&self) -> &Net {
        &self.net
    }

    /// Folds batch norm into the convolutions for inference ([`Net::fold_batch_norm`]): only for
    /// a network that is evaluated from now on, never trained or given new weights
    /// ([`Network::var_store_mut`] unfolds). The folded weights are a second copy of the
    /// convolutions' on the device: when it cannot be made (libtorch panics on CUDA out of
    /// memory) the network stays unfolded, with a warning, and runs as before. Returns whether
    /// it is folded.
    pub fn fold_batch_norm(&mut self) -> bool {
        if self.net.is_folded() {
            return true;
        }
        match catch_unwind(AssertUnwindSafe(|| self.net.fold_batch_norm())) {
            Ok(()) => true,
            Err(panic) => {
                self.net.unfold();
                tracing::warn!(
                    "{}: batch norm left unfolded: {}",
                    self.label(),
                    koma_base::stop::panic_message(panic.as_ref())
                );
                false
            }
        }
    }

    /// Forward pass on tensors already on the device: float (any kind) `(N,62,9,9)` and
    /// `(N,57,9,9)` → policy logits `(N,2187)`, W/D/L logits `(N,3)` in the network's kind.
    pub fn forward_tensors(&self, input1: &Tensor, input2: &Tensor) -> (Tensor, Tensor) {
        let _guard = tch::no_grad_guard();
        let in1 = input1.to_device(self.device).to_kind(self.kind);
        let in2 = input2.to_device(self.device).to_kind(self.kind);
        self.net.forward_t(&in1, &in2, false)
    }

    /// Runs an encoded batch; fills `out` (float32 on the CPU). A failing forward pass (libtorch
    /// panics on CUDA out-of-memory, for one) and non-finite outputs are errors, never numbers.
    pub fn forward(&self, batch: &InputBatch, out: &mut RawOutput) -> Result<()> {
        let n = batch.len();
        out.set_len(n);
        if n == 0 {
            return Ok(());
        }
        let fault = self.guarded(|| {
            let (in1, in2) = self.upload(batch);
            let (policy, wdl) = self.net.forward_t(&in1, &in2, false);
            let policy = policy.to_kind(Kind::Float).to_device(Device::Cpu).contiguous();
            let wdl = wdl.to_kind(Kind::Float).to_device(Device::Cpu).contiguous();
            policy.f_copy_data(&mut out.policy[..n * MOVE_LABELS], n * MOVE_LABELS)?;
            wdl.f_copy_data(&mut out.wdl[..n * VALUE_OUTPUTS], n * VALUE_OUTPUTS)?;
            Ok(())
        })?;
        if fault == Some(crate::faults::Fault::NaN) {
            out.wdl[0] = f32::NAN;
        }
        let bad = out.non_finite_positions();
        if bad > 0 {
            return Err(Error::NonFinite { model: self.label(), positions: bad, batch: n });
        }
        Ok(())
    }

    /// Whether the network runs on an accelerator (self-play gives one several inference
    /// services, `[selfplay] inference_services`).
    pub fn is_accelerator(&self) -> bool {
        self.device != Device::Cpu
    }

    /// Rows of a batch are padded with this ([`crate::leaves::padded_rows`]): on CUDA, so that
    /// cuDNN's autotuner (benchmark mode, on for CUDA networks) meets a few batch shapes and not
    /// every size; on the CPU padding would only cost time.
    pub fn pad_multiple(&self) -> usize {
        if self.is_accelerator() {
            CUDA_PAD_MULTIPLE
        } else {
            1
        }
    }

    /// Runs a batch of leaves ([`LeafBatch`], encoded with [`Network::pad_multiple`]): features
    /// uploaded without blocking from page-locked memory on CUDA, the legal moves' logits gathered
    /// on the device and brought back with the real rows' W/D/L logits in one download, the batch's
    /// one synchronisation. Failures and non-finite outputs are errors.
    pub fn forward_leaves(&self, batch: &LeafBatch, out: &mut LeafOutput) -> Result<()> {
        let (legal_count, wdl_count) = (batch.legal_moves(), batch.len() * VALUE_OUTPUTS);
        out.legal_logits.resize(legal_count, 0.0);
        out.wdl.resize(wdl_count, 0.0);
        if batch.is_empty() {
            return Ok(());
        }
        let fault = self.guarded(|| {
            let gather = batch.gather_indices();
            // SAFETY: `gather` outlives the borrowed tensor, which is only read: copied to the
            // device here, or read by index_select on the CPU within this closure.
            let index = unsafe {
                Tensor::from_blob(gather.as_ptr() as *const u8, &[gather.len() as i64], &[], Kind::Int64, Device::Cpu)
            };
            let (host1, host2) = batch.host_features();
            let (index, in1, in2) = if self.is_accelerator() {
                // The indices (pageable, small) first, then the compact u8 planes, asynchronously
                // from pinned memory; they become floats on the device.
                let index = index.to_device(self.device);
                let up = |t: Tensor| t.to_device_(self.device, Kind::Uint8, true, false).to_kind(self.kind);
                (index, up(host1), up(host2))
            } else {
                (index, host1.to_kind(self.kind), host2.to_kind(self.kind))
            };
            let (policy, wdl) = self.net.forward_t(&in1, &in2, false);
            let legal = policy.reshape([-1]).index_select(0, &index);
            let wdl = wdl.narrow(0, 0, batch.len() as i64).reshape([-1]);
            // One download; both parts are then copied out of the host tensor.
            let both = Tensor::cat(&[legal, wdl], 0).to_kind(Kind::Float).to_device(Device::Cpu);
            both.narrow(0, 0, legal_count as i64).f_copy_data(&mut out.legal_logits, legal_count)?;
            both.narrow(0, legal_count as i64, wdl_count as i64).f_copy_data(&mut out.wdl, wdl_count)?;
            Ok(())
        })?;
        if fault == Some(crate::faults::Fault::NaN) {
            out.wdl[0] = f32::NAN;
        }
        let bad = out.non_finite_positions(batch);
        if bad > 0 {
            return Err(Error::NonFinite { model: self.label(), positions: bad, batch: batch.len() });
        }
        Ok(())
    }

    /// Runs one forward pass `run` without gradients, with the injected faults of `KOMA_FAULT`
    /// (the one that must show in the outputs is returned) and libtorch's panics (CUDA out of
    /// memory, for one) turned into errors. After a failure it waits for the device, so that an
    /// upload still reading staging buffers finishes before the caller reuses them.
    fn guarded(&self, run: impl FnOnce() -> Result<()>) -> Result<Option<crate::faults::Fault>> {
        let fault = crate::faults::next_forward();
        if fault == Some(crate::faults::Fault::ForwardError) {
            return Err(Error::Forward("injected fault (KOMA_FAULT)".into()));
        }
        let result = match catch_unwind(AssertUnwindSafe(|| {
            let _guard = tch::no_grad_guard();
            run()
        })) {
            Ok(result) => result,
            Err(panic) => Err(Error::Forward(koma_base::stop::panic_message(panic.as_ref()))),
        };
        if result.is_err() {
            if let Device::Cuda(i) = self.device {
                let _ = catch_unwind(|| tch::Cuda::synchronize(i as i64));
            }
        }
        result.map(|()| fault)
    }

    /// How errors name this network: its checkpoint's file, or "an untrained network".
    pub fn label(&self) -> String {
        self.meta.as_ref().map_or_else(|| "an untrained network".into(), |m| m.weights_file.clone())
    }

    /// The batch's features as tensors of the network's kind on its device.
    pub fn upload(&self, batch: &InputBatch) -> (Tensor, Tensor) {
        let n = batch.len() as i64;
        let (a, b) = (batch.input1(), batch.input2());
        // SAFETY: the blobs borrow `batch`, which outlives them: `to_device` / `to_kind` copy
        // (to_device on the CPU returns the same storage, but to_kind from u8 always copies),
        // and the borrowed tensors are dropped at the end of this function.
        let (t1, t2) = unsafe {
            (
                Tensor::f_from_blob(a.as_ptr(), &[n, FEATURES1_NUM as i64, 9, 9], &[], Kind::Uint8, Device::Cpu),
                Tensor::f_from_blob(b.as_ptr(), &[n, FEATURES2_NUM as i64, 9, 9], &[], Kind::Uint8, Device::Cpu),
            )
        };
        let (t1, t2) = (t1.expect("from_blob"), t2.expect("from_blob"));
        let up = |t: Tensor| {
            if self.device == Device::Cpu {
                t.to_kind(self.kind)
            } else {
                // Move the compact u8 planes, convert on the device.
                t.to_device(self.device).to_kind(self.kind)
            }
        };
        (up(t1), up(t2))
    }

    /// Encodes and evaluates positions (allocates its buffers; for repeated calls prefer a
    /// [`SharedNetwork`], which keeps them per thread).
    pub fn evaluate<P: Borrow<Position> + Sync>(&self, positions: &[P]) -> Result<Vec<Evaluation>> {
        let mut batch = LeafBatch::for_device(self.device);
        let mut out = LeafOutput::default();
        self.evaluate_with(positions, &mut batch, &mut out)
    }

    /// Like [`Network::evaluate`] with caller-owned buffers (made for this network's device).
    pub fn evaluate_with<P: Borrow<Position> + Sync>(
        &self,
        positions: &[P],
        batch: &mut LeafBatch,
        out: &mut LeafOutput,
    ) -> Result<Vec<Evaluation>> {
        batch.encode(positions, self.pad_multiple());
        self.forward_leaves(batch, out)?;
        Ok(batch.evaluations(out))
    }
}

fn set_float_kind(vs: &mut VarStore, kind: Kind) {
    match kind {
        Kind::Half => vs.half(),
        Kind::BFloat16 => vs.bfloat16(),
        _ => vs.float(),
    }
}

thread_local! {
    /// Each thread's own staging buffers (an inference service's, page-locked on CUDA), made for
    /// the device of the network it last ran.
    static SCRATCH: RefCell<Option<(Device, LeafBatch, LeafOutput)>> = const { RefCell::new(None) };
}

/// CUDA batches are padded to powers of two up to this and to its multiples above
/// ([`crate::leaves::padded_rows`]: 22 shapes up to 1 024 rows).
pub const CUDA_PAD_MULTIPLE: usize = 64;

/// A network behind a mutex, callable from any number of threads. Encoding and the
/// post-processing of priors happen on the calling thread, outside the lock, in per-thread
/// buffers that are reused.
pub struct SharedNetwork {
    network: Mutex<Network>,
    /// The network's device and padding, read without the lock: a caller encodes while another
    /// holds the network for its forward pass.
    device: Device,
    pad_multiple: usize,
}

impl SharedNetwork {
    /// Serves `network`'s evaluations. Its batch norm is folded into the convolutions
    /// ([`Network::fold_batch_norm`]; docs/benchmarks.md has the measurements): a shared network
    /// is only evaluated, and new weights come as a new network.
    pub fn new(mut network: Network) -> SharedNetwork {
        network.fold_batch_norm();
        let (device, pad_multiple) = (network.device(), network.pad_multiple());
        SharedNetwork { network: Mutex::new(network), device, pad_multiple }
    }

    /// The network, unfolded again (whoever takes it may change its weights).
    pub fn into_inner(self) -> Network {
        let mut network = self.network.into_inner().unwrap_or_else(|e| e.into_inner());
        network.net.unfold();
        network
    }

    /// Runs `f` with the network locked (`f` must not move it to another device, the device is
    /// read without the lock, nor change its weights: batch norm is folded into a copy of them).
    pub fn with<T>(&self, f: impl FnOnce(&mut Network) -> T) -> T {
        let mut guard = self.network.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// Evaluates positions: priors over legal moves and W/D/L, in input order. Encoding and
    /// decoding run on the calling thread in its own buffers, outside the lock: several inference
    /// services on one device take turns on the forward pass while the others encode and decode.
    pub fn evaluate<P: Borrow<Position> + Sync>(&self, positions: &[P]) -> Result<Vec<Evaluation>> {
        let (device, pad) = (self.device, self.pad_multiple);
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            if scratch.as_ref().is_none_or(|(d, _, _)| *d != device) {
                *scratch = Some((device, LeafBatch::for_device(device), LeafOutput::default()));
            }
            let (_, batch, out) = scratch.as_mut().expect("made above");
            batch.encode(positions, pad);
            self.with(|net| net.forward_leaves(batch, out))?;
            Ok(batch.evaluations(out))
        })
    }
}

/// Compile-time check of the thread-safety promises.
#[allow(dead_code)]
fn assert_thread_safety() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<SharedNetwork>();
    send::<Network>();
}
