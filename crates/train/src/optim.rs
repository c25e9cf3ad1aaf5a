//! The optimisers, written as tensor updates under `no_grad` so that their state (momentum,
//! Adam moments, step count) can be saved and restored exactly (tch's optimisers keep theirs in
//! C++ out of reach). The update rules are PyTorch's:
//!
//! - SGD: `d = g + wd·w`; `buf = m·buf + d`; `d = d + m·buf` (Nesterov) or `d = buf`;
//!   `w -= lr·d` (the buffer starts at zero, which equals PyTorch's first step).
//! - AdamW: `w -= lr·wd·w`; `m = β1·m + (1−β1)·g`; `v = β2·v + (1−β2)·g²`;
//!   `w -= lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + ε)`.
//!
//! Weight decay applies to the convolution and linear weights only (tensors of two or more
//! dimensions): decaying batch-norm scales and biases only fights the normalisation and shifts
//! the activations, as in the common practice of PyTorch's parameter groups (and KataGo).

use std::collections::HashMap;

use tch::Tensor;

use crate::config::{OptimizerConfig, OptimizerKind};

pub struct Optimizer {
    config: OptimizerConfig,
    /// The trainable variables (shallow clones sharing storage), sorted by name.
    params: Vec<(String, Tensor)>,
    /// Per parameter: SGD `[momentum]` (none without momentum), AdamW `[exp_avg, exp_avg_sq]`.
    buffers: Vec<Vec<Tensor>>,
    /// Per parameter: whether weight decay applies (weights of two or more dimensions).
    decays: Vec<bool>,
    /// Updates applied (AdamW's t).
    steps: u64,
}

impl Optimizer {
    pub fn new(config: &OptimizerConfig, mut params: Vec<(String, Tensor)>) -> Optimizer {
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let per_param = Optimizer::buffer_kinds(config).len();
        let buffers = params.iter().map(|(_, p)| (0..per_param).map(|_| p.zeros_like().detach()).collect()).collect();
        let decays = params.iter().map(|(_, p)| p.dim() >= 2).collect();
        Optimizer { config: config.clone(), params, buffers, decays, steps: 0 }
    }

    /// Names of the per-parameter buffers of an optimiser config.
    pub fn buffer_kinds(config: &OptimizerConfig) -> &'static [&'static str] {
        match config.kind {
            OptimizerKind::Sgd if config.momentum == 0.0 => &[],
            OptimizerKind::Sgd => &["momentum"],
            OptimizerKind::AdamW => &["exp_avg", "exp_avg_sq"],
        }
    }

    pub fn config(&self) -> &OptimizerConfig {
        &self.config
    }

    /// Changes hyper-parameters (learning-rate-like settings); the buffers must stay the same kind.
    pub fn set_config(&mut self, config: &OptimizerConfig) {
        assert_eq!(Optimizer::buffer_kinds(config), Optimizer::buffer_kinds(&self.config));
        self.config = config.clone();
    }

    pub fn params(&self) -> &[(String, Tensor)] {
        &self.params
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Applies one update with `grads` (same order as [`Optimizer::params`]) at learning rate `lr`.
    /// The gradients are used as scratch space (updated in place), so pass tensors the caller no
    /// longer needs; every operation is in place (no allocation per parameter).
    pub fn step(&mut self, grads: &mut [Tensor], lr: f64) {
        assert_eq!(grads.len(), self.params.len(), "one gradient per parameter");
        let _guard = tch::no_grad_guard();
        self.steps += 1;
        let c = &self.config;
        let Some(device) = self.params.first().map(|(_, p)| p.device()) else { return };
        let scalar = |x: f64| Tensor::from(x as f32).to_device(device);
        match c.kind {
            OptimizerKind::Sgd => {
                let (wd, m, neg_lr) = (scalar(c.weight_decay), scalar(c.momentum), scalar(-lr));
                let params = self.params.iter_mut().zip(&self.decays);
                for ((((_, p), &decays), d), bufs) in params.zip(grads.iter_mut()).zip(self.buffers.iter_mut()) {
                    if c.weight_decay != 0.0 && decays {
                        let _ = d.addcmul_(p, &wd); // d = g + wd·w
                    }
                    let update = match bufs.first_mut() {
                        Some(buf) => {
                            let _ = buf.g_mul_scalar_(c.momentum);
                            let _ = buf.g_add_(d); // buf = m·buf + d
                            if c.nesterov {
                                let _ = d.addcmul_(buf, &m); // d + m·buf
                                &*d
                            } else {
                                &*buf
                            }
                        }
                        None => &*d,
                    };
                    let _ = p.addcmul_(update, &neg_lr); // w -= lr·update
                }
            }
            OptimizerKind::AdamW => {
                let t = self.steps.min(i32::MAX as u64) as i32;
                let bc1 = 1.0 - c.beta1.powi(t);
                let bc2 = 1.0 - c.beta2.powi(t);
                let params = self.params.iter_mut().zip(&self.decays);
                for ((((_, p), &decays), g), bufs) in params.zip(grads.iter_mut()).zip(self.buffers.iter_mut()) {
                    if c.weight_decay != 0.0 && decays {
                        let _ = p.g_mul_scalar_(1.0 - lr * c.weight_decay);
                    }
                    let (m, v) = bufs.split_at_mut(1);
                    let (m, v) = (&mut m[0], &mut v[0]);
                    let _ = m.lerp_(g, 1.0 - c.beta1); // m = β1·m + (1−β1)·g
                    let _ = g.g_mul_scalar_((1.0 - c.beta2).sqrt());
                    let _ = v.g_mul_scalar_(c.beta2);
                    let _ = v.addcmul_(g, g); // v = β2·v + (1−β2)·g²
                                              // g becomes the denominator: (√v/√(1−β2ᵗ) + ε) · (−(1−β1ᵗ)/lr).
                    g.copy_(v);
                    let _ = g.sqrt_();
                    let _ = g.g_div_scalar_(bc2.sqrt());
                    let _ = g.g_add_scalar_(c.eps);
                    let _ = g.g_mul_scalar_(-bc1 / lr);
                    let _ = p.addcdiv_(m, g);
                }
            }
        }
    }

    /// The state tensors, named `KIND/PARAM` (e.g. `momentum/blocks.0.conv1.weight`).
    pub fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let kinds = Optimizer::buffer_kinds(&self.config);
        let mut out = Vec::new();
        for ((name, _), bufs) in self.params.iter().zip(&self.buffers) {
            for (kind, b) in kinds.iter().zip(bufs) {
                out.push((format!("{kind}/{name}"), b.shallow_clone()));
            }
        }
        out
    }

    /// Restores the state saved by [`Optimizer::state_tensors`]; every buffer must be present
    /// with the right shape.
    pub fn load_state(&mut self, steps: u64, tensors: &HashMap<String, Tensor>) -> Result<(), String> {
        let kinds = Optimizer::buffer_kinds(&self.config);
        let _guard = tch::no_grad_guard();
        for ((name, _), bufs) in self.params.iter().zip(self.buffers.iter_mut()) {
            for (kind, b) in kinds.iter().zip(bufs.iter_mut()) {
                let key = format!("{kind}/{name}");
                let src = tensors.get(&key).ok_or_else(|| format!("optimizer buffer `{key}` is missing"))?;
                if src.size() != b.size() {
                    return Err(format!(
                        "optimizer buffer `{key}` has shape {:?}, expected {:?}",
                        src.size(),
                        b.size()
                    ));
                }
                b.f_copy_(&src.to_device(b.device()).to_kind(b.kind())).map_err(|e| e.to_string())?;
            }
        }
        self.steps = steps;
        Ok(())
    }
}

/// Scales gradients in place so that their global norm is at most `max_norm` (PyTorch's
/// `clip_grad_norm_`, given the norm already computed). Returns the factor applied.
pub fn clip_gradients(grads: &mut [Tensor], norm: f64, max_norm: f64) -> f64 {
    if max_norm <= 0.0 || !norm.is_finite() {
        return 1.0;
    }
    let coef = max_norm / (norm + 1e-6);
    if coef < 1.0 {
        let _guard = tch::no_grad_guard();
        for g in grads.iter_mut() {
            let _ = g.g_mul_scalar_(coef);
        }
        coef
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use tch::nn::{self, Module, OptimizerConfig as _};
    use tch::{Device, Kind};

    /// A small regression problem; returns the weights after `steps` updates by tch's built-in
    /// optimiser and by ours, from the same start. The bias sits in a parameter group of its own
    /// without weight decay on the reference side, as ours decays only the 2-D weight.
    fn compare(config: &OptimizerConfig, lr: f64, steps: usize) -> (Vec<f32>, Vec<f32>) {
        // Fixed data and initial weights (not libtorch's global generator: tests run in parallel).
        let mut rng = koma_base::Rng::seed_from_u64(3);
        let mut values = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect() };
        let x = Tensor::from_slice(&values(16 * 5)).view([16, 5]);
        let y = Tensor::from_slice(&values(16 * 2)).view([16, 2]);
        let w0 = Tensor::from_slice(&values(2 * 5)).view([2, 5]);
        let b0 = Tensor::from_slice(&values(2));
        let make = || {
            let vs = nn::VarStore::new(Device::Cpu);
            let ws = (vs.root().set_group(0) / "lin").var_copy("weight", &w0);
            let bs = (vs.root().set_group(1) / "lin").var_copy("bias", &b0);
            (vs, nn::Linear { ws, bs: Some(bs) })
        };
        let loss = |lin: &nn::Linear| (lin.forward(&x) - &y).square().mean(Kind::Float);
        let flat = |vs: &nn::VarStore| {
            let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
            vars.sort_by(|a, b| a.0.cmp(&b.0));
            vars.iter().flat_map(|(_, t)| Vec::<f32>::try_from(&t.flatten(0, -1)).unwrap()).collect::<Vec<f32>>()
        };

        let (vs_ref, lin_ref) = make();
        let mut reference = match config.kind {
            OptimizerKind::Sgd => nn::Sgd {
                momentum: config.momentum,
                dampening: 0.0,
                wd: config.weight_decay,
                nesterov: config.nesterov,
            }
            .build(&vs_ref, lr)
            .unwrap(),
            OptimizerKind::AdamW => nn::AdamW {
                beta1: config.beta1,
                beta2: config.beta2,
                wd: config.weight_decay,
                eps: config.eps,
                amsgrad: false,
            }
            .build(&vs_ref, lr)
            .unwrap(),
        };
        reference.set_weight_decay_group(1, 0.0);
        for _ in 0..steps {
            reference.backward_step(&loss(&lin_ref));
        }

        let (vs, lin) = make();
        let params: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        let mut ours = Optimizer::new(config, params);
        for _ in 0..steps {
            for (_, p) in ours.params.iter_mut() {
                p.zero_grad();
            }
            loss(&lin).backward();
            let mut grads: Vec<Tensor> = ours.params().iter().map(|(_, p)| p.grad().copy()).collect();
            ours.step(&mut grads, lr);
        }
        (flat(&vs_ref), flat(&vs))
    }

    fn assert_close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5 * (1.0 + x.abs()), "{a:?}\n{b:?}");
        }
    }

    #[test]
    fn sgd_matches_pytorch() {
        for (momentum, nesterov, wd) in [(0.0, false, 0.0), (0.9, false, 1e-2), (0.9, true, 1e-2)] {
            let c = OptimizerConfig {
                kind: OptimizerKind::Sgd,
                momentum,
                nesterov,
                weight_decay: wd,
                ..Default::default()
            };
            let (a, b) = compare(&c, 0.05, 7);
            assert_close(&a, &b);
        }
    }

    #[test]
    fn adamw_matches_pytorch() {
        let c = OptimizerConfig { kind: OptimizerKind::AdamW, weight_decay: 0.05, ..Default::default() };
        let (a, b) = compare(&c, 0.01, 9);
        assert_close(&a, &b);
    }

    #[test]
    fn state_round_trip_and_clipping() {
        let c = OptimizerConfig { kind: OptimizerKind::AdamW, ..Default::default() };
        let p = Tensor::ones([3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let mut o = Optimizer::new(&c, vec![("w".into(), p)]);
        o.step(&mut [Tensor::from_slice(&[1.0f32, 2.0, 3.0])], 0.1);
        let saved: HashMap<String, Tensor> = o.state_tensors().into_iter().map(|(n, t)| (n, t.copy())).collect();
        assert_eq!(saved.len(), 2);
        let p2 = Tensor::ones([3], (Kind::Float, Device::Cpu));
        let mut o2 = Optimizer::new(&c, vec![("w".into(), p2)]);
        o2.load_state(o.steps(), &saved).unwrap();
        assert_eq!(o2.steps(), 1);
        assert!(o2.load_state(1, &HashMap::new()).unwrap_err().contains("exp_avg/w"));

        let mut grads = vec![Tensor::from_slice(&[3.0f32, 4.0])];
        let coef = clip_gradients(&mut grads, 5.0, 1.0);
        assert!((coef - 0.2).abs() < 1e-6);
        let g = Vec::<f32>::try_from(&grads[0]).unwrap();
        assert!((g[0] - 0.6).abs() < 1e-5 && (g[1] - 0.8).abs() < 1e-5);
        assert_eq!(clip_gradients(&mut grads, 1.0, 2.0), 1.0);
    }
}
