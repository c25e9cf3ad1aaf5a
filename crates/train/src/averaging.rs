//! Weight averaging of the published models: an exponential moving average (EMA) of the
//! network's trainable parameters, updated after each applied optimiser step, and batch-norm
//! statistics recomputed for the averaged weights before each publish. Averaged weights sit in a
//! flatter part of the loss surface than the last step's and carry less of the last batches'
//! noise, which is why KataGo publishes averaged weights and dlshogi trains with SWA; koma
//! publishes the average and keeps training the raw weights (docs/training.md).
//!
//! The time constant is given in samples (`[train] ema_samples`), so that it means the same at
//! every batch size: a step of B samples keeps β = exp(−B / ema_samples) of the average. Early
//! on, the average must not be dominated by the random initial weights: step t keeps at most
//! (1 + t) / (10 + t) (TensorFlow's `num_updates` warm-up), so the first model is nearly the
//! raw one.
//!
//! Batch-norm running statistics are not averaged: an average of the statistics the raw weights
//! produced along the way does not describe the activations of the averaged weights (SWA's
//! `update_bn` exists for this). They are recomputed instead ([`recompute_statistics`]): train-mode
//! forward passes of the averaged network over the last batches trained on, the statistics being
//! the plain mean of those batches' statistics.

use tch::{Device, Tensor};

use crate::error::Result;

pub(crate) struct Ema {
    /// `(name, average)` of the trainable parameters, sorted by name, f32 on the master's device.
    averages: Vec<(String, Tensor)>,
    /// `(name, value)` of the batch-norm running statistics that go with the averages: the last
    /// recomputed ones (at first the network's own), sorted by name.
    statistics: Vec<(String, Tensor)>,
    /// The step [`Ema::statistics`] were last recomputed at.
    statistics_step: Option<u64>,
    samples: f64,
}

impl Ema {
    /// An average that starts at the network's current parameters and statistics.
    pub(crate) fn new(params: &[(String, Tensor)], statistics: &[(String, Tensor)], samples: f64) -> Ema {
        let _guard = tch::no_grad_guard();
        let copy = |vars: &[(String, Tensor)]| vars.iter().map(|(n, t)| (n.clone(), t.detach().copy())).collect();
        Ema { averages: copy(params), statistics: copy(statistics), statistics_step: None, samples }
    }

    /// The share of the old average that step `step` (0-based) of `batch` samples keeps.
    pub(crate) fn keep(&self, step: u64, batch: usize) -> f64 {
        let by_samples = (-(batch as f64) / self.samples).exp();
        let warm_up = (1.0 + step as f64) / (10.0 + step as f64);
        by_samples.min(warm_up)
    }

    /// Moves the average towards the parameters (same names and order as at [`Ema::new`]).
    pub(crate) fn update(&mut self, params: &[(String, Tensor)], step: u64, batch: usize) -> Result<()> {
        let _guard = tch::no_grad_guard();
        let keep = self.keep(step, batch);
        for ((_, average), (_, v)) in self.averages.iter_mut().zip(params) {
            // average ← keep·average + (1 − keep)·v
            let _ = average.f_lerp_(&v.f_to_kind(average.kind())?, 1.0 - keep)?;
        }
        Ok(())
    }

    /// Whether the statistics were recomputed at `step` already.
    pub(crate) fn statistics_are_from(&self, step: u64) -> bool {
        self.statistics_step == Some(step)
    }

    /// Takes recomputed statistics (same names and order as at [`Ema::new`]) for step `step`.
    pub(crate) fn set_statistics(&mut self, statistics: &[(String, Tensor)], step: u64) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for ((_, mine), (_, new)) in self.statistics.iter_mut().zip(statistics) {
            mine.f_copy_(new)?;
        }
        self.statistics_step = Some(step);
        Ok(())
    }

    /// The averages and statistics by name, for the training state (`ema/NAME`).
    pub(crate) fn tensors(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.averages.iter().chain(&self.statistics).map(|(n, t)| (n.as_str(), t))
    }

    /// Restores what [`Ema::tensors`] saved at step `step`; a variable without a saved value (a
    /// state written before averaging was on) starts from the network's value. Saved statistics
    /// count as recomputed at `step` (a state is saved after the recomputation), so publishing
    /// that step again uses them as they are, to the bit.
    pub(crate) fn load(
        &mut self,
        saved: &std::collections::HashMap<String, Tensor>,
        device: Device,
        step: u64,
    ) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for (name, value) in self.averages.iter_mut().chain(&mut self.statistics) {
            if let Some(t) = saved.get(name.as_str()) {
                value.f_copy_(&t.f_to_device(device)?)?;
            }
        }
        if self.statistics.iter().all(|(name, _)| saved.contains_key(name.as_str())) {
            self.statistics_step = Some(step);
        }
        Ok(())
    }

    /// Copies the averages into `params` and the statistics into `statistics` (the network's own
    /// tensors, in the order of [`Ema::new`]).
    pub(crate) fn copy_into(&self, params: &[(String, Tensor)], statistics: &[(String, Tensor)]) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for ((_, v), (_, value)) in params.iter().zip(&self.averages).chain(statistics.iter().zip(&self.statistics)) {
            v.detach().f_copy_(value)?;
        }
        Ok(())
    }
}

/// Runs `f`, then puts the values `variables` had before it back, whatever `f` did to them or
/// returned.
pub(crate) fn restoring<T>(variables: &[(String, Tensor)], f: impl FnOnce() -> T) -> Result<T> {
    let _guard = tch::no_grad_guard();
    let saved: Vec<Tensor> = variables.iter().map(|(_, v)| v.detach().copy()).collect();
    let out = f();
    for ((_, v), saved) in variables.iter().zip(&saved) {
        v.detach().f_copy_(saved)?;
    }
    Ok(out)
}

/// Sets the running statistics `statistics` to their mean over `batches` train-mode forward passes
/// (`forward(k)` runs the k-th): the running mean and variance become the means of the batches'
/// means and (unbiased) variances, whatever the momentum of the layers.
///
/// A train-mode pass moves each statistic from `s` to `(1 − m)·s + m·b` (`b` the batch's, `m` the
/// momentum). Setting it to the mean of the first k − 1 batches, `a`, before pass k, the pass
/// leaves `r = a + m·(b − a)`, and the mean of the first k is `a + (b − a)/k = a + (r − a)/(m·k)`.
pub(crate) fn recompute_statistics(
    statistics: &[(String, Tensor)],
    batches: usize,
    momentum: f64,
    mut forward: impl FnMut(usize) -> Result<()>,
) -> Result<()> {
    // Starting from zero, the result depends only on the batches (not on where the statistics
    // were before), so that a resumed trainer recomputes them to the bit.
    let mut means: Vec<Tensor> = {
        let _guard = tch::no_grad_guard();
        statistics.iter().map(|(_, s)| s.detach().zeros_like()).collect()
    };
    for k in 0..batches {
        {
            let _guard = tch::no_grad_guard();
            for ((_, s), mean) in statistics.iter().zip(&means) {
                s.detach().f_copy_(mean)?;
            }
        }
        forward(k)?;
        let _guard = tch::no_grad_guard();
        let step = 1.0 / (momentum * (k + 1) as f64);
        for ((_, s), mean) in statistics.iter().zip(&mut means) {
            let moved = s.detach().f_sub(mean)?;
            let _ = mean.f_add_(&moved.f_mul_scalar(step)?)?;
        }
    }
    let _guard = tch::no_grad_guard();
    for ((_, s), mean) in statistics.iter().zip(&means) {
        s.detach().f_copy_(mean)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_follows_with_its_time_constant_and_warms_up() {
        let params = vec![("w".to_string(), Tensor::from_slice(&[0.0f32, 10.0]))];
        let stats = vec![("running_mean".to_string(), Tensor::from_slice(&[5.0f32]))];
        let mut ema = Ema::new(&params, &stats, 1000.0);
        // Warm-up: the first step keeps only 1/10 of the start.
        assert!((ema.keep(0, 100) - 0.1).abs() < 1e-12);
        // Later the time constant rules: exp(−100 / 1000).
        assert!((ema.keep(10_000, 100) - (-0.1f64).exp()).abs() < 1e-12);
        let _ = params[0].1.detach().fill_(1.0);
        let _ = stats[0].1.detach().fill_(7.0);
        ema.update(&params, 0, 100).unwrap();
        let got = Vec::<f32>::try_from(&ema.averages[0].1).unwrap();
        assert!((got[0] - 0.9).abs() < 1e-6 && (got[1] - 1.9).abs() < 1e-5, "{got:?}");
        // The statistics are not averaged: they stay as taken until recomputed.
        assert_eq!(Vec::<f32>::try_from(&ema.statistics[0].1).unwrap(), vec![5.0]);
        // The averages go in for `f` and the raw values come back after it.
        let shallow =
            |v: &[(String, Tensor)]| v.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect::<Vec<_>>();
        let both: Vec<(String, Tensor)> = shallow(&params).into_iter().chain(shallow(&stats)).collect();
        let seen = restoring(&both, || {
            ema.copy_into(&params, &stats).unwrap();
            (Vec::<f32>::try_from(&params[0].1).unwrap(), Vec::<f32>::try_from(&stats[0].1).unwrap())
        })
        .unwrap();
        assert_eq!(seen, (got, vec![5.0]));
        assert_eq!(Vec::<f32>::try_from(&params[0].1).unwrap(), vec![1.0, 1.0]);
        assert_eq!(Vec::<f32>::try_from(&stats[0].1).unwrap(), vec![7.0]);
    }

    #[test]
    fn recomputed_statistics_are_the_plain_mean_of_the_batches_whatever_the_momentum() {
        let batch_values = [3.0f64, -1.0, 10.0, 4.0];
        for momentum in [0.1, 0.5, 0.01] {
            let stat = vec![("s".to_string(), Tensor::from_slice(&[100.0f64]))];
            recompute_statistics(&stat, batch_values.len(), momentum, |k| {
                // What a train-mode pass does to a running statistic.
                let s = &stat[0].1;
                let moved = s * (1.0 - momentum) + batch_values[k] * momentum;
                s.detach().copy_(&moved);
                Ok(())
            })
            .unwrap();
            let got = stat[0].1.double_value(&[0]);
            assert!((got - 4.0).abs() < 1e-9, "momentum {momentum}: {got}");
        }
    }
}
