//! Weight averaging of the published models: an exponential moving average (EMA) of every
//! variable of the network (weights and batch-norm statistics), updated after each applied
//! optimiser step. Averaged weights sit in a flatter part of the loss surface than the last
//! step's and carry less of the last batches' noise, which is why KataGo publishes averaged
//! weights and dlshogi trains with SWA; koma publishes the average and keeps training the raw
//! weights (docs/training.md).
//!
//! The time constant is given in samples (`[train] ema_samples`), so that it means the same at
//! every batch size: a step of B samples keeps β = exp(−B / ema_samples) of the average. Early
//! on, the average must not be dominated by the random initial weights: step t keeps at most
//! (1 + t) / (10 + t) (TensorFlow's `num_updates` warm-up), so the first model is nearly the
//! raw one.

use tch::{Device, Tensor};

use crate::error::Result;

pub(crate) struct Ema {
    /// `(name, average)`, in the order of `names`, f32 on the master's device.
    averages: Vec<(String, Tensor)>,
    samples: f64,
}

impl Ema {
    /// An average that starts at the network's current variables.
    pub(crate) fn new(variables: &[(String, Tensor)], samples: f64) -> Ema {
        let _guard = tch::no_grad_guard();
        Ema { averages: variables.iter().map(|(n, t)| (n.clone(), t.detach().copy())).collect(), samples }
    }

    /// The share of the old average that step `step` (0-based) of `batch` samples keeps.
    pub(crate) fn keep(&self, step: u64, batch: usize) -> f64 {
        let by_samples = (-(batch as f64) / self.samples).exp();
        let warm_up = (1.0 + step as f64) / (10.0 + step as f64);
        by_samples.min(warm_up)
    }

    /// Moves the average towards the variables (same names and order as at [`Ema::new`]).
    pub(crate) fn update(&mut self, variables: &[(String, Tensor)], step: u64, batch: usize) -> Result<()> {
        let _guard = tch::no_grad_guard();
        let keep = self.keep(step, batch);
        for ((_, average), (_, v)) in self.averages.iter_mut().zip(variables) {
            // average ← keep·average + (1 − keep)·v
            let _ = average.f_lerp_(&v.f_to_kind(average.kind())?, 1.0 - keep)?;
        }
        Ok(())
    }

    /// The averages by name, for the training state (`ema/NAME`).
    pub(crate) fn tensors(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.averages.iter().map(|(n, t)| (n.as_str(), t))
    }

    /// Restores averages saved by [`Ema::tensors`]; a variable without one (a state written
    /// before averaging was on) starts from the network's value.
    pub(crate) fn load(&mut self, saved: &std::collections::HashMap<String, Tensor>, device: Device) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for (name, average) in &mut self.averages {
            if let Some(t) = saved.get(name.as_str()) {
                average.f_copy_(&t.f_to_device(device)?)?;
            }
        }
        Ok(())
    }

    /// Runs `f` with the averages in `variables` (the network's own tensors, in the order of
    /// [`Ema::new`]), then puts the raw values back, whatever `f` returned.
    pub(crate) fn with_averages_in<T>(&self, variables: &[(String, Tensor)], f: impl FnOnce() -> T) -> Result<T> {
        let _guard = tch::no_grad_guard();
        let raw: Vec<Tensor> = variables.iter().map(|(_, v)| v.detach().copy()).collect();
        for ((_, v), (_, average)) in variables.iter().zip(&self.averages) {
            v.detach().f_copy_(average)?;
        }
        let out = f();
        for ((_, v), saved) in variables.iter().zip(&raw) {
            v.detach().f_copy_(saved)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_follows_with_its_time_constant_and_warms_up() {
        let vars = vec![("w".to_string(), Tensor::from_slice(&[0.0f32, 10.0]))];
        let mut ema = Ema::new(&vars, 1000.0);
        // Warm-up: the first step keeps only 1/10 of the start.
        assert!((ema.keep(0, 100) - 0.1).abs() < 1e-12);
        // Later the time constant rules: exp(−100 / 1000).
        assert!((ema.keep(10_000, 100) - (-0.1f64).exp()).abs() < 1e-12);
        let _ = vars[0].1.detach().fill_(1.0);
        ema.update(&vars, 0, 100).unwrap();
        let got = Vec::<f32>::try_from(&ema.averages[0].1).unwrap();
        assert!((got[0] - 0.9).abs() < 1e-6 && (got[1] - 1.9).abs() < 1e-5, "{got:?}");
        // The averages go in for `f` and the raw values come back after it.
        let seen = ema.with_averages_in(&vars, || Vec::<f32>::try_from(&vars[0].1).unwrap()).unwrap();
        assert_eq!(seen, got);
        assert_eq!(Vec::<f32>::try_from(&vars[0].1).unwrap(), vec![1.0, 1.0]);
    }
}
