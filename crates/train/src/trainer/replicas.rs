//! The forward and backward passes of one step, and data parallel training.
//!
//! Data parallel (`device = "cuda:0,cuda:1"`, or `cpu,cpu` in tests): the master weights live on
//! the first device; every device computes the forward and backward pass of its part of each
//! batch (contiguous rows, sizes within one of each other) on a replica in its own thread. The
//! gradients, weighted by the parts' sizes (the loss is a mean over the batch), are summed on the
//! first device, which takes one optimiser step; the replicas then copy the new weights. Batch
//! normalisation uses each part's own statistics in the forward pass (as PyTorch's
//! DistributedDataParallel without SyncBatchNorm); the running statistics are averaged over the
//! replicas after every step and copied back, so all replicas stay identical. With equal parts the
//! averaged running mean is exactly the one-device mean; the running variance misses the spread
//! between the parts' means.

use koma_nn::{ModelConfig, Net, Network};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use super::{Mode, Trainer};
use crate::batch::HostBatch;
use crate::error::{Result, TrainError};
use crate::loss::losses;
use crate::optim::clip_gradients;
use crate::scaler::global_norm;

/// A copy of the network that computes forward and backward passes for the master weights: a
/// data-parallel replica on another device, or the bf16 network of bf16 mode.
pub(super) struct ComputeCopy {
    pub(super) _vs: VarStore,
    net: Net,
    device: Device,
    /// The bf16 network of bf16 mode (else an f32 replica).
    bf16: bool,
    /// Same order as the optimiser's parameters.
    pub(super) params: Vec<Tensor>,
    /// (master, copy) pairs of the non-trainable variables (batch-norm statistics).
    pub(super) buffers: Vec<(Tensor, Tensor)>,
}

impl ComputeCopy {
    pub(super) fn new(
        config: &ModelConfig,
        device: Device,
        bf16: bool,
        master: &VarStore,
        param_names: &[String],
    ) -> Result<ComputeCopy> {
        let vs = VarStore::new(device);
        let net = Net::new(&vs.root(), config);
        if bf16 {
            // Batch norm stays f32 (as under autocast): its parameters and running statistics,
            // whose updates (a tenth of a batch's deviation) bf16's 8 significant bits round
            // away; libtorch's batch norm takes a bf16 input with f32 parameters.
            for (name, mut t) in vs.variables() {
                if !koma_nn::model::is_batch_norm_variable(&name) {
                    let half = t.to_kind(Kind::BFloat16);
                    t.set_data(&half);
                }
            }
        }
        let vars = vs.variables();
        let mvars = master.variables();
        let params = param_names.iter().map(|n| vars[n].shallow_clone()).collect();
        let mut buffers = Vec::new();
        let mut names: Vec<&String> = vars.keys().collect();
        names.sort();
        for n in names {
            if !param_names.contains(n) {
                buffers.push((mvars[n].shallow_clone(), vars[n].shallow_clone()));
            }
        }
        let mut copy = ComputeCopy { _vs: vs, net, device, bf16, params, buffers };
        copy.load_master(&param_names.iter().map(|n| mvars[n].shallow_clone()).collect::<Vec<_>>(), true);
        Ok(copy)
    }

    /// Copies the master weights (and, with `buffers`, statistics) into the copy.
    pub(super) fn load_master(&mut self, master_params: &[Tensor], buffers: bool) {
        let _guard = tch::no_grad_guard();
        for (c, m) in self.params.iter_mut().zip(master_params) {
            c.copy_(m);
        }
        if buffers {
            for (m, c) in self.buffers.iter_mut() {
                c.copy_(m);
            }
        }
    }
}

/// Who computes a part of the batch: the master network itself (with its parameters in the
/// optimiser's order), or a copy. Held by `&mut`, so that each can move to its own thread.
enum Unit<'a> {
    Master(&'a mut Network, Vec<Tensor>),
    Copy(&'a mut ComputeCopy),
}

/// What every unit's forward and backward pass shares.
struct PartPass<'a> {
    with_reply: bool,
    /// Under autocast (f16 mode).
    f16: bool,
    loss_scale: Option<f64>,
    loss: &'a crate::config::LossConfig,
    /// Where the gradients are summed (the master weights' device).
    first_device: Device,
    channels_last: bool,
}

impl PartPass<'_> {
    /// The forward and backward pass of `unit` on rows `rows` of `batch`; its gradients are
    /// multiplied by `share`, its fraction of the batch.
    fn run(&self, unit: Unit, batch: &HostBatch, rows: std::ops::Range<usize>, share: f64) -> Result<PartResult> {
        let (net, params, device, bf16) = match unit {
            Unit::Master(network, params) => (network.net(), params, network.device(), false),
            Unit::Copy(copy) => {
                (&copy.net, copy.params.iter().map(Tensor::shallow_clone).collect(), copy.device, copy.bf16)
            }
        };
        let b = batch.rows_to_device(rows, device, self.channels_last);
        // A model with the reply head always runs it (a batch without reply labels gives it a
        // zero loss term, so that its parameters stay in the graph the gradients are taken over).
        let forward = |in1: &Tensor, in2: &Tensor| {
            if self.with_reply {
                net.forward_with_reply_t(in1, in2, true)
            } else {
                let (p, v) = net.forward_t(in1, in2, true);
                (p, v, None)
            }
        };
        let (policy, wdl, reply) = if bf16 {
            forward(&b.input1.to_kind(Kind::BFloat16), &b.input2.to_kind(Kind::BFloat16))
        } else if self.f16 {
            tch::autocast(true, || forward(&b.input1, &b.input2))
        } else {
            forward(&b.input1, &b.input2)
        };
        let reply = reply.map(|r| r.to_kind(Kind::Float));
        let l = losses(&policy.to_kind(Kind::Float), &wdl.to_kind(Kind::Float), reply.as_ref(), &b, self.loss);
        let root = match self.loss_scale {
            Some(scale) => &l.total * scale,
            None => l.total.shallow_clone(),
        };
        // Gradients of the tensors that compute, as fresh tensors (torch.autograd.grad): no
        // zeroing, no accumulation, and the optimiser may update them in place. With
        // channels-last activations some convolution weight gradients come back channels-last;
        // the optimiser's in-place updates of the (contiguous) weights and momentum run several
        // times faster on matching layouts, so they are made contiguous (PyTorch's gradient
        // layout contract does the same in `.grad`).
        let grads = Tensor::f_run_backward(&[root], &params, false, false)?
            .into_iter()
            .map(|g| if g.device() != self.first_device { g.to_device(self.first_device) } else { g })
            .map(|g| if g.kind() != Kind::Float { g.to_kind(Kind::Float) } else { g })
            .map(|g| if share != 1.0 { g * share } else { g })
            .map(|g| if g.is_contiguous() { g } else { g.contiguous() })
            .collect();
        let mut terms = vec![l.policy, l.value, l.total.detach(), l.policy_top1, l.value_accuracy];
        if let Some((loss, top1)) = l.reply {
            terms.extend([loss, top1]);
        }
        let terms = Vec::<f32>::try_from(&Tensor::stack(&terms, 0).to_kind(Kind::Float).to_device(Device::Cpu))?;
        Ok(PartResult { grads, terms })
    }
}

/// What one unit's pass gives back: its gradients (on the first device, f32, contiguous, already
/// weighted by the unit's share of the batch) and its loss terms.
struct PartResult {
    grads: Vec<Tensor>,
    /// policy, value, total, policy top-1, value accuracy, then reply loss and top-1 if any.
    terms: Vec<f32>,
}

impl Trainer {
    /// The rows each computing unit takes: contiguous parts whose sizes differ by at most one
    /// (empty parts left out, so a batch smaller than the device count still trains).
    pub(super) fn parts(&self, rows: usize) -> Vec<std::ops::Range<usize>> {
        let units = if self.mode == Mode::Bf16 { self.compute.len() } else { 1 + self.compute.len() };
        let units = units.min(rows.max(1));
        let (base, extra) = (rows / units, rows % units);
        let mut start = 0;
        (0..units)
            .map(|i| {
                let len = base + usize::from(i < extra);
                start += len;
                start - len..start
            })
            .collect()
    }

    pub(super) fn forward_backward_update(&mut self, batch: &HostBatch, lr: f64) -> Result<(Vec<f32>, f64, bool)> {
        let stats_before = {
            let _guard = tch::no_grad_guard();
            self.running_stats.iter().map(Tensor::copy).collect::<Vec<_>>()
        };
        let parts = self.parts(batch.len());
        let total_rows = batch.len().max(1) as f64;
        let pass = PartPass {
            with_reply: self.network.net().has_reply_head(),
            f16: self.mode == Mode::F16,
            loss_scale: self.scaler.as_ref().map(|s| s.scale),
            loss: &self.config.loss,
            first_device: self.device,
            channels_last: self.channels_last,
        };
        let mut units: Vec<Unit> = Vec::with_capacity(parts.len());
        if self.mode != Mode::Bf16 {
            let params = self.optimizer.params().iter().map(|(_, p)| p.shallow_clone()).collect();
            units.push(Unit::Master(&mut self.network, params));
        }
        units.extend(self.compute.iter_mut().map(Unit::Copy));
        let jobs: Vec<(Unit, std::ops::Range<usize>)> = units.into_iter().zip(parts.iter().cloned()).collect();
        let results: Vec<Result<PartResult>> = if jobs.len() == 1 {
            jobs.into_iter().map(|(unit, rows)| pass.run(unit, batch, rows, 1.0)).collect()
        } else {
            // Each unit in its own thread: the devices compute at the same time.
            std::thread::scope(|scope| {
                let handles: Vec<_> = jobs
                    .into_iter()
                    .map(|(unit, rows)| {
                        let share = rows.len() as f64 / total_rows;
                        let pass = &pass;
                        scope.spawn(move || pass.run(unit, batch, rows, share))
                    })
                    .collect();
                // A panic (libtorch panics on CUDA out-of-memory) is that replica's error.
                handles
                    .into_iter()
                    .zip(&self.devices)
                    .map(|(h, &device)| {
                        h.join().unwrap_or_else(|panic| {
                            Err(TrainError::Replica {
                                device: koma_nn::device::device_name(device),
                                message: koma_base::stop::panic_message(panic.as_ref()),
                            })
                        })
                    })
                    .collect()
            })
        };
        let results = results.into_iter().collect::<Result<Vec<_>>>()?;
        let units_ran = results.len();
        // The parts' gradients (each already weighted by its share), summed.
        let mut results = results.into_iter();
        let first = results.next().expect("at least one part");
        let mut grads = first.grads;
        let mut terms: Vec<f64> = first.terms.iter().map(|&t| t as f64 * parts[0].len() as f64).collect();
        for (r, rows) in results.zip(&parts[1..]) {
            for (g, part) in grads.iter_mut().zip(r.grads) {
                *g = &*g + part;
            }
            for (t, part) in terms.iter_mut().zip(r.terms) {
                *t += part as f64 * rows.len() as f64;
            }
        }
        let terms: Vec<f32> = terms.into_iter().map(|t| (t / total_rows) as f32).collect();
        let norm = match &self.scaler {
            Some(s) => s.unscale(&mut grads),
            None => global_norm(&grads),
        };
        let finite = norm.is_finite();
        if finite {
            self.average_statistics(units_ran);
        } else {
            // A skipped step leaves the model exactly as it was.
            let _guard = tch::no_grad_guard();
            for (stat, before) in self.running_stats.iter_mut().zip(&stats_before) {
                stat.f_copy_(before)?;
            }
        }
        let apply = match self.scaler.as_mut() {
            Some(s) => s
                .update(finite, &self.config.loss_scale)
                .map_err(|what| TrainError::Diverged { step: self.step, what })?,
            None => finite,
        };
        if !finite && self.scaler.is_none() {
            return Err(TrainError::Diverged {
                step: self.step,
                what: format!(
                    "the gradient norm is {norm} (loss {}); lower the learning rate or set optimizer.grad_clip_norm",
                    terms[2]
                ),
            });
        }
        if apply {
            clip_gradients(&mut grads, norm, self.config.optimizer.grad_clip_norm);
            self.optimizer.step(&mut grads, lr);
        }
        // The copies take the new weights (when the step was applied) and the statistics.
        let master: Vec<Tensor> = self.optimizer.params().iter().map(|(_, t)| t.shallow_clone()).collect();
        let new_weights: &[Tensor] = if apply { &master } else { &[] };
        for copy in &mut self.compute {
            copy.load_master(new_weights, true);
        }
        Ok((terms, norm, apply))
    }

    /// The master's batch-norm running statistics become the mean over the units that computed
    /// this step (the master itself when it computes, and the first `units_ran` of them).
    fn average_statistics(&mut self, units_ran: usize) {
        let master_computes = self.mode != Mode::Bf16;
        let copies_ran = if master_computes { units_ran - 1 } else { units_ran };
        if copies_ran == 0 {
            return;
        }
        let _guard = tch::no_grad_guard();
        let count = (copies_ran + usize::from(master_computes)) as f64;
        let pairs = self.compute[0].buffers.len();
        for b in 0..pairs {
            let master = self.compute[0].buffers[b].0.shallow_clone();
            let mut sum = if master_computes { master.copy() } else { master.zeros_like() };
            for copy in &self.compute[..copies_ran] {
                sum += copy.buffers[b].1.to_device(master.device()).to_kind(master.kind());
            }
            let mut master = master;
            master.copy_(&(sum / count));
        }
    }
}
