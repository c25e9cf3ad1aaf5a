//! `train/metrics.jsonl`: one JSON object per line every `log_every` steps, with the means of the
//! steps since the previous line. `python -m koma.plot RUN_DIR` draws them.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{io, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricsRecord {
    /// Optimiser steps taken at the end of the interval.
    pub step: u64,
    pub samples_seen: u64,
    /// Learning rate of the interval's last step.
    pub lr: f64,
    /// Means over the interval's steps.
    pub policy_loss: f64,
    pub value_loss: f64,
    pub loss: f64,
    /// Fraction of samples whose top policy move is the target's top move.
    pub policy_top1: f64,
    /// Fraction of samples whose most likely W/D/L class is the game result.
    pub value_accuracy: f64,
    /// Opponent-reply loss (mean cross-entropy, samples without a reply counting 0) and the
    /// fraction of samples with a reply whose top reply label is it; only for models with the
    /// reply head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_loss: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_top1: Option<f64>,
    /// Global gradient L2 norm before clipping (mean over the interval's applied steps).
    pub grad_norm: f64,
    pub samples_per_second: f64,
    /// Steps in the interval, and those skipped for inf/NaN gradients (f16).
    pub steps: u64,
    pub skipped_steps: u64,
    pub loss_scale: Option<f64>,
    /// Samples in the replay window and produced so far (all shards) when the interval ended.
    pub window_samples: usize,
    pub total_samples: usize,
    pub time_unix: f64,
}

impl MetricsRecord {
    /// The record as TensorBoard scalars (`RUN/tensorboard/train/`, at the record's step).
    pub fn scalars(&self) -> Vec<(&'static str, f64)> {
        let mut s = vec![
            ("train/loss", self.loss),
            ("train/loss_policy", self.policy_loss),
            ("train/loss_value", self.value_loss),
            ("train/accuracy_policy", self.policy_top1),
            ("train/accuracy_value", self.value_accuracy),
            ("train/lr", self.lr),
            ("train/grad_norm", self.grad_norm),
            ("train/samples_per_s", self.samples_per_second),
            ("train/skipped_steps", self.skipped_steps as f64),
            ("train/window_samples", self.window_samples as f64),
            ("train/total_samples", self.total_samples as f64),
        ];
        if let (Some(loss), Some(top1)) = (self.reply_loss, self.reply_top1) {
            s.extend([("train/loss_reply", loss), ("train/accuracy_reply", top1)]);
        }
        if let Some(scale) = self.loss_scale {
            s.push(("train/loss_scale", scale));
        }
        s
    }
}

/// The statistics of one optimiser step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepStats {
    /// Steps taken after this one.
    pub step: u64,
    pub samples_seen: u64,
    pub samples: usize,
    pub lr: f64,
    pub policy_loss: f32,
    pub value_loss: f32,
    pub loss: f32,
    pub policy_top1: f32,
    pub value_accuracy: f32,
    /// Reply loss and top-1 (models with the reply head).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_loss: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_top1: Option<f32>,
    pub grad_norm: f64,
    /// The update was skipped (inf/NaN gradients under loss scaling).
    pub skipped: bool,
    pub loss_scale: Option<f64>,
}

/// Accumulates steps between two metrics lines.
pub(crate) struct Accumulator {
    steps: u64,
    skipped: u64,
    applied: u64,
    sums: [f64; 5],
    /// Reply loss and top-1 sums, and the steps that had them.
    reply: [f64; 2],
    reply_steps: u64,
    grad_norm: f64,
    samples: u64,
    since: Instant,
}

impl Accumulator {
    pub fn new() -> Accumulator {
        Accumulator {
            steps: 0,
            skipped: 0,
            applied: 0,
            sums: [0.0; 5],
            reply: [0.0; 2],
            reply_steps: 0,
            grad_norm: 0.0,
            samples: 0,
            since: Instant::now(),
        }
    }

    pub fn add(&mut self, s: &StepStats) {
        self.steps += 1;
        if let (Some(loss), Some(top1)) = (s.reply_loss, s.reply_top1) {
            self.reply[0] += loss as f64;
            self.reply[1] += top1 as f64;
            self.reply_steps += 1;
        }
        self.samples += s.samples as u64;
        for (sum, v) in self.sums.iter_mut().zip([s.policy_loss, s.value_loss, s.loss, s.policy_top1, s.value_accuracy])
        {
            *sum += v as f64;
        }
        if s.skipped {
            self.skipped += 1;
        } else {
            self.applied += 1;
            self.grad_norm += s.grad_norm;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.steps == 0
    }

    /// The record of the interval ending with `last`; resets the accumulator.
    pub fn finish(&mut self, last: &StepStats, window_samples: usize, total_samples: usize) -> MetricsRecord {
        let n = self.steps.max(1) as f64;
        let seconds = self.since.elapsed().as_secs_f64();
        let rec = MetricsRecord {
            step: last.step,
            samples_seen: last.samples_seen,
            lr: last.lr,
            policy_loss: self.sums[0] / n,
            value_loss: self.sums[1] / n,
            loss: self.sums[2] / n,
            policy_top1: self.sums[3] / n,
            value_accuracy: self.sums[4] / n,
            reply_loss: (self.reply_steps > 0).then(|| self.reply[0] / self.reply_steps as f64),
            reply_top1: (self.reply_steps > 0).then(|| self.reply[1] / self.reply_steps as f64),
            grad_norm: if self.applied > 0 { self.grad_norm / self.applied as f64 } else { 0.0 },
            samples_per_second: if seconds > 0.0 { self.samples as f64 / seconds } else { 0.0 },
            steps: self.steps,
            skipped_steps: self.skipped,
            loss_scale: last.loss_scale,
            window_samples,
            total_samples,
            time_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        };
        *self = Accumulator::new();
        rec
    }
}

/// The append-only metrics file.
pub struct MetricsLog {
    path: PathBuf,
    file: File,
}

impl MetricsLog {
    /// Opens `path` for appending, first dropping lines of steps after `step` (written by a run
    /// that then stopped before saving its state, so a resumed run does not log them twice).
    pub fn open(path: &Path, step: u64) -> Result<MetricsLog> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        if path.exists() {
            let reader = BufReader::new(File::open(path).map_err(io(path))?);
            let mut kept = String::new();
            let mut dropped = 0;
            for line in reader.lines() {
                let line = line.map_err(io(path))?;
                let step_of = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v.get("step").and_then(|s| s.as_u64()));
                match step_of {
                    Some(s) if s <= step => {
                        kept.push_str(&line);
                        kept.push('\n');
                    }
                    _ => dropped += 1,
                }
            }
            if dropped > 0 {
                koma_base::durable::write(path, kept.as_bytes())?;
            }
        }
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(io(path))?;
        Ok(MetricsLog { path: path.to_path_buf(), file })
    }

    pub fn append(&mut self, record: &MetricsRecord) -> Result<()> {
        let mut line = serde_json::to_string(record).expect("metrics serialise");
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(io(&self.path))?;
        self.file.flush().map_err(io(&self.path))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads a metrics file (for tests and tools).
pub fn read_metrics(path: &Path) -> Result<Vec<MetricsRecord>> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
}
