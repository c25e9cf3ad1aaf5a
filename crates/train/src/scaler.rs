//! Dynamic loss scaling for f16 training (tch has no GradScaler). The loss is multiplied by
//! `scale` before the backward pass and the gradients divided by it afterwards; when any gradient
//! is inf or NaN the step is skipped and the scale multiplied by `backoff_factor`, and after
//! `growth_interval` good steps in a row it is multiplied by `growth_factor`.

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::config::LossScaleConfig;

/// The scaler's state (saved with the training state).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossScaler {
    pub scale: f64,
    /// Good (finite) steps since the last change of scale.
    pub good_steps: u64,
    /// Steps skipped so far because of inf/NaN gradients.
    pub skipped_steps: u64,
}

impl LossScaler {
    pub fn new(config: &LossScaleConfig) -> LossScaler {
        LossScaler { scale: config.init, good_steps: 0, skipped_steps: 0 }
    }

    /// Divides every gradient by the scale in place and returns the global L2 norm of the
    /// unscaled gradients (inf or NaN when any gradient is).
    pub fn unscale(&self, grads: &mut [Tensor]) -> f64 {
        let _guard = tch::no_grad_guard();
        let inv = 1.0 / self.scale;
        for g in grads.iter_mut() {
            let _ = g.g_mul_scalar_(inv);
        }
        global_norm(grads)
    }

    /// Records the outcome of a step: returns whether the optimiser may apply it.
    pub fn update(&mut self, grads_finite: bool, config: &LossScaleConfig) -> bool {
        if grads_finite {
            self.good_steps += 1;
            if self.good_steps >= config.growth_interval.max(1) {
                self.scale = (self.scale * config.growth_factor).min(config.max);
                self.good_steps = 0;
            }
            true
        } else {
            self.scale = (self.scale * config.backoff_factor).max(config.min);
            self.good_steps = 0;
            self.skipped_steps += 1;
            false
        }
    }
}

/// Global L2 norm of a set of tensors (as f64; inf or NaN when any element is).
pub fn global_norm(tensors: &[Tensor]) -> f64 {
    let _guard = tch::no_grad_guard();
    if tensors.is_empty() {
        return 0.0;
    }
    let norms: Vec<Tensor> = tensors.iter().map(|t| t.to_kind(tch::Kind::Float).norm()).collect();
    Tensor::stack(&norms, 0).norm().double_value(&[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    fn config() -> LossScaleConfig {
        LossScaleConfig {
            init: 1024.0,
            growth_factor: 2.0,
            growth_interval: 3,
            backoff_factor: 0.5,
            min: 1.0,
            max: 4096.0,
        }
    }

    #[test]
    fn grows_after_good_steps_and_backs_off_on_overflow() {
        let c = config();
        let mut s = LossScaler::new(&c);
        assert!(s.update(true, &c));
        assert!(s.update(true, &c));
        assert_eq!(s.scale, 1024.0);
        assert!(s.update(true, &c));
        assert_eq!((s.scale, s.good_steps), (2048.0, 0));
        assert!(!s.update(false, &c));
        assert_eq!((s.scale, s.good_steps, s.skipped_steps), (1024.0, 0, 1));
        for _ in 0..20 {
            s.update(true, &c);
        }
        assert_eq!(s.scale, 4096.0, "capped at max");
        for _ in 0..40 {
            s.update(false, &c);
        }
        assert_eq!(s.scale, 1.0, "floored at min");
    }

    #[test]
    fn unscale_synthetic_gradients_and_detect_overflow() {
        let c = config();
        let mut s = LossScaler::new(&c);
        // Gradients of a scaled loss: true gradients (3, 4) and (0) times 1024.
        let mut grads = vec![
            Tensor::from_slice(&[3.0f32 * 1024.0, 4.0 * 1024.0]),
            Tensor::zeros([2, 2], (Kind::Float, Device::Cpu)),
        ];
        let norm = s.unscale(&mut grads);
        assert!((norm - 5.0).abs() < 1e-6);
        assert_eq!(Vec::<f32>::try_from(&grads[0]).unwrap(), vec![3.0, 4.0]);
        assert!(s.update(norm.is_finite(), &c));

        // An f16 overflow: one gradient is inf, another NaN.
        let mut bad = vec![Tensor::from_slice(&[1.0f32, f32::INFINITY]), Tensor::from_slice(&[0.5f32])];
        assert!(!s.unscale(&mut bad).is_finite());
        let mut nan = vec![Tensor::from_slice(&[f32::NAN])];
        let norm = s.unscale(&mut nan);
        assert!(norm.is_nan());
        assert!(!s.update(norm.is_finite(), &c));
        assert_eq!(s.scale, 512.0);
        assert_eq!(s.skipped_steps, 1);
        // Half-precision gradients overflow where f32 ones would not.
        let big = Tensor::from_slice(&[70000.0f32]).to_kind(Kind::Half);
        assert!(!global_norm(&[big]).is_finite());
    }
}
