//! Dynamic loss scaling for f16 training (tch has no GradScaler). The loss is multiplied by
//! `scale` before the backward pass and the gradients divided by it afterwards; when any gradient
//! is inf or NaN the step is skipped and the scale multiplied by `backoff_factor`, and after
//! `growth_interval` good steps in a row it is multiplied by `growth_factor`. Skipping gives up
//! (a divergence, as a non-finite gradient is in f32) when it cannot help: at the minimum scale,
//! or after `max_skips_in_a_row` skipped steps in a row.

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
    /// Steps skipped since the last good one (absent from states written before it existed).
    #[serde(default)]
    pub skipped_in_a_row: u64,
}

impl LossScaler {
    pub fn new(config: &LossScaleConfig) -> LossScaler {
        LossScaler { scale: config.init, good_steps: 0, skipped_steps: 0, skipped_in_a_row: 0 }
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

    /// Records the outcome of a step: whether the optimiser may apply it, or, when skipping
    /// cannot help, why training cannot go on (for [`crate::TrainError::Diverged`]): the
    /// gradients are inf or NaN at the minimum scale (they overflow unscaled), or
    /// `max_skips_in_a_row` steps in a row were skipped.
    pub fn update(&mut self, grads_finite: bool, config: &LossScaleConfig) -> Result<bool, String> {
        if grads_finite {
            self.skipped_in_a_row = 0;
            self.good_steps += 1;
            if self.good_steps >= config.growth_interval.max(1) {
                self.scale = (self.scale * config.growth_factor).min(config.max);
                self.good_steps = 0;
            }
            return Ok(true);
        }
        if self.scale <= config.min {
            return Err(format!(
                "the gradients are inf or NaN at the minimum loss scale ({}); lower the learning rate or set optimizer.grad_clip_norm",
                config.min
            ));
        }
        self.skipped_steps += 1;
        self.skipped_in_a_row += 1;
        if self.skipped_in_a_row >= config.max_skips_in_a_row {
            return Err(format!(
                "{} steps in a row had inf or NaN gradients (loss_scale.max_skips_in_a_row; the scale is down to {}); lower the learning rate or set optimizer.grad_clip_norm",
                self.skipped_in_a_row, self.scale
            ));
        }
        self.scale = (self.scale * config.backoff_factor).max(config.min);
        self.good_steps = 0;
        Ok(false)
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
            max_skips_in_a_row: 20,
        }
    }

    #[test]
    fn grows_after_good_steps_and_backs_off_on_overflow() {
        let c = config();
        let mut s = LossScaler::new(&c);
        assert_eq!(s.update(true, &c), Ok(true));
        assert_eq!(s.update(true, &c), Ok(true));
        assert_eq!(s.scale, 1024.0);
        assert_eq!(s.update(true, &c), Ok(true));
        assert_eq!((s.scale, s.good_steps), (2048.0, 0));
        assert_eq!(s.update(false, &c), Ok(false));
        assert_eq!((s.scale, s.good_steps, s.skipped_steps, s.skipped_in_a_row), (1024.0, 0, 1, 1));
        for _ in 0..20 {
            s.update(true, &c).unwrap();
        }
        assert_eq!(s.scale, 4096.0, "capped at max");
        assert_eq!(s.skipped_in_a_row, 0, "a good step ends the run of skips");
        for _ in 0..12 {
            assert_eq!(s.update(false, &c), Ok(false));
        }
        assert_eq!(s.scale, 1.0, "floored at min");
    }

    /// Skipping forever is a divergence: a non-finite step at the minimum scale, or
    /// `max_skips_in_a_row` skips in a row, is an error saying which.
    #[test]
    fn skipping_gives_up_at_the_minimum_scale_or_after_too_many_skips_in_a_row() {
        let c = config();
        let mut s = LossScaler::new(&c);
        for _ in 0..10 {
            assert_eq!(s.update(false, &c), Ok(false));
        }
        assert_eq!(s.scale, 1.0);
        let err = s.update(false, &c).unwrap_err();
        assert!(err.contains("minimum loss scale"), "{err}");

        // A minimum far below: the count of skips in a row gives up first, and only skips in a row
        // count.
        let c = LossScaleConfig { min: 1e-30, max_skips_in_a_row: 5, ..config() };
        let mut s = LossScaler::new(&c);
        for _ in 0..4 {
            assert_eq!(s.update(false, &c), Ok(false));
        }
        assert_eq!(s.update(true, &c), Ok(true));
        for _ in 0..4 {
            assert_eq!(s.update(false, &c), Ok(false));
        }
        let err = s.update(false, &c).unwrap_err();
        assert!(err.contains("5 steps in a row") && err.contains("max_skips_in_a_row"), "{err}");
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
        assert_eq!(s.update(norm.is_finite(), &c), Ok(true));

        // An f16 overflow: one gradient is inf, another NaN.
        let mut bad = vec![Tensor::from_slice(&[1.0f32, f32::INFINITY]), Tensor::from_slice(&[0.5f32])];
        assert!(!s.unscale(&mut bad).is_finite());
        let mut nan = vec![Tensor::from_slice(&[f32::NAN])];
        let norm = s.unscale(&mut nan);
        assert!(norm.is_nan());
        assert_eq!(s.update(norm.is_finite(), &c), Ok(false));
        assert_eq!(s.scale, 512.0);
        assert_eq!(s.skipped_steps, 1);
        // Half-precision gradients overflow where f32 ones would not.
        let big = Tensor::from_slice(&[70000.0f32]).to_kind(Kind::Half);
        assert!(!global_norm(&[big]).is_finite());
    }
}
