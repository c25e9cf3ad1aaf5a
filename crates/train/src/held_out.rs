//! A network's losses on samples it was not trained on (`koma data loss`): the policy and value
//! cross-entropies and agreements of [`batch_metrics`] over many samples, for comparing
//! checkpoints (the published average against the raw weights of the training state, or a run's
//! models on another run's games or on imported records).

use std::path::PathBuf;

use koma_data::{Sample, ShardReader};
use koma_nn::Network;

use crate::batch::HostBatch;
use crate::config::LossConfig;
use crate::error::Result;
use crate::loss::{batch_metrics, BatchMetrics};

/// Positions per forward pass.
const CHUNK: usize = 256;

/// Up to `count` samples spread evenly over `shards` taken as one sequence (every
/// (total/count)-th, so every shard contributes by its size), in shard order; and how many the
/// shards hold in all. One shard is open at a time.
pub fn spread_samples(shards: &[PathBuf], count: usize) -> Result<(Vec<Sample>, usize)> {
    let lengths = shards.iter().map(|p| Ok(ShardReader::open(p)?.len())).collect::<Result<Vec<_>>>()?;
    let total: usize = lengths.iter().sum();
    let take = count.min(total);
    let mut picked: Vec<Vec<usize>> = vec![Vec::new(); shards.len()];
    let (mut shard, mut start) = (0, 0);
    for i in 0..take {
        let global = (i as u128 * total as u128 / take as u128) as usize;
        while global >= start + lengths[shard] {
            start += lengths[shard];
            shard += 1;
        }
        picked[shard].push(global - start);
    }
    let mut samples = Vec::with_capacity(take);
    for (path, indices) in shards.iter().zip(&picked) {
        if !indices.is_empty() {
            samples.extend(ShardReader::open(path)?.read(indices)?);
        }
    }
    Ok((samples, total))
}

/// [`batch_metrics`] of `network` over all `samples`, in batches, each batch weighted by its
/// size.
pub fn held_out_metrics(network: &Network, samples: &[Sample], loss: &LossConfig) -> BatchMetrics {
    let mut sums = [0.0f64; 4];
    let mut rows = 0usize;
    for chunk in samples.chunks(CHUNK) {
        let batch = HostBatch::from_samples(chunk, loss);
        if batch.is_empty() {
            continue;
        }
        let m = batch_metrics(network, &batch, loss);
        let n = batch.len() as f64;
        for (sum, v) in sums.iter_mut().zip([m.policy_loss, m.value_loss, m.policy_top1, m.value_accuracy]) {
            *sum += v * n;
        }
        rows += batch.len();
    }
    let mean = |s: f64| if rows == 0 { f64::NAN } else { s / rows as f64 };
    BatchMetrics {
        policy_loss: mean(sums[0]),
        value_loss: mean(sums[1]),
        policy_top1: mean(sums[2]),
        value_accuracy: mean(sums[3]),
        reply_loss: None,
        reply_top1: None,
    }
}
