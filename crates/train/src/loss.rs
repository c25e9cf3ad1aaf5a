//! The training loss: cross-entropy of the policy head against the dense policy target and of
//! the W/D/L head against the value target (both weighted per sample), the opponent-reply head's
//! cross-entropy when the model has one, and the agreement figures logged beside them
//! ([`losses`]); [`batch_metrics`] measures a network on a batch in inference mode.

use koma_nn::Network;
use tch::{Kind, Tensor};

use crate::batch::{DeviceBatch, HostBatch};
use crate::config::LossConfig;

/// The loss terms and accuracies of one forward pass (scalar tensors).
pub struct Losses {
    /// `policy_weight · policy + value_weight · value`.
    pub total: Tensor,
    /// Mean (over the batch, per-sample weighted) cross-entropy against the policy target.
    pub policy: Tensor,
    /// Mean cross-entropy of the W/D/L head against the value target.
    pub value: Tensor,
    /// Fraction of samples (with a policy target) whose top policy label is the target's.
    pub policy_top1: Tensor,
    /// Fraction of samples whose most likely W/D/L class is the game result.
    pub value_accuracy: Tensor,
    /// With reply logits and labels: the mean (over the whole batch; samples without a reply add
    /// 0) cross-entropy of the reply head against the opponent's actual reply, and the fraction of
    /// samples with a reply whose top reply label is it.
    pub reply: Option<(Tensor, Tensor)>,
}

/// The loss terms. `reply_logits` (the reply head's output) count when the batch has reply labels:
/// `total` then adds `reply_weight · reply` with `config.reply_weight` (default
/// [`crate::config::DEFAULT_REPLY_WEIGHT`]); without labels they add exactly 0 (and `reply` is
/// None).
// `total = total + …` on purpose: tch's `+=` is an in-place op on a node of the autograd graph.
#[allow(clippy::assign_op_pattern)]
pub fn losses(
    policy_logits: &Tensor,
    wdl_logits: &Tensor,
    reply_logits: Option<&Tensor>,
    b: &DeviceBatch,
    config: &LossConfig,
) -> Losses {
    let n = b.len.max(1) as f64;
    let logp = policy_logits.log_softmax(1, Kind::Float);
    let policy_each = -(&b.policy * &logp).sum_dim_intlist([1i64].as_slice(), false, Kind::Float);
    let policy = (&policy_each * &b.policy_weight).sum(Kind::Float) / n;
    let logv = wdl_logits.log_softmax(1, Kind::Float);
    let value_each = -(&b.value * &logv).sum_dim_intlist([1i64].as_slice(), false, Kind::Float);
    let value = (&value_each * &b.value_weight).sum(Kind::Float) / n;
    let mut total = &policy * config.policy_weight + &value * config.value_weight;
    let reply = match (reply_logits, &b.reply) {
        (Some(logits), Some((labels, mask))) => {
            let logp = logits.log_softmax(1, Kind::Float);
            let each = -logp.gather(1, &labels.unsqueeze(1), false).squeeze_dim(1);
            let loss = (&each * mask).sum(Kind::Float) / n;
            total = total + &loss * config.reply_weight.unwrap_or(crate::config::DEFAULT_REPLY_WEIGHT);
            let top1 = tch::no_grad(|| {
                let agree = logits.argmax(1, false).eq_tensor(labels).to_kind(Kind::Float);
                (agree * mask).sum(Kind::Float) / mask.sum(Kind::Float).clamp_min(1.0)
            });
            Some((loss.detach(), top1))
        }
        (Some(logits), None) => {
            // No reply labels (a batch built without replies): the head contributes exactly 0,
            // but stays in the graph, so gradients over all parameters can still be taken.
            total = total + logits.sum(Kind::Float) * 0.0;
            None
        }
        _ => None,
    };
    let (policy_top1, value_accuracy) = tch::no_grad(|| {
        let has = b.policy_weight.gt(0.0).to_kind(Kind::Float);
        let agree = policy_logits.argmax(1, false).eq_tensor(&b.policy.argmax(1, false)).to_kind(Kind::Float);
        let top1 = (agree * &has).sum(Kind::Float) / has.sum(Kind::Float).clamp_min(1.0);
        let vacc = wdl_logits.argmax(1, false).eq_tensor(&b.result_class).to_kind(Kind::Float).mean(Kind::Float);
        (top1, vacc)
    });
    Losses { total, policy: policy.detach(), value: value.detach(), policy_top1, value_accuracy, reply }
}

/// Loss and agreement of a network on a batch, in inference mode (batch-norm running
/// statistics, no gradients): for measuring a trained net against its targets.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchMetrics {
    pub policy_loss: f64,
    pub value_loss: f64,
    pub policy_top1: f64,
    pub value_accuracy: f64,
    /// Opponent-reply loss and top-1 agreement, for a network with the reply head and a batch
    /// with replies.
    pub reply_loss: Option<f64>,
    pub reply_top1: Option<f64>,
}

pub fn batch_metrics(network: &Network, batch: &HostBatch, loss: &LossConfig) -> BatchMetrics {
    let _guard = tch::no_grad_guard();
    let b = batch.to_device(network.device());
    let in1 = b.input1.to_device(network.device()).to_kind(network.kind());
    let in2 = b.input2.to_device(network.device()).to_kind(network.kind());
    let (p, v, r) = network.net().forward_with_reply_t(&in1, &in2, false);
    let r = r.filter(|_| b.reply.is_some()).map(|r| r.to_kind(Kind::Float));
    let l = losses(&p.to_kind(Kind::Float), &v.to_kind(Kind::Float), r.as_ref(), &b, loss);
    BatchMetrics {
        policy_loss: l.policy.double_value(&[]),
        value_loss: l.value.double_value(&[]),
        policy_top1: l.policy_top1.double_value(&[]),
        value_accuracy: l.value_accuracy.double_value(&[]),
        reply_loss: l.reply.as_ref().map(|(x, _)| x.double_value(&[])),
        reply_top1: l.reply.as_ref().map(|(_, x)| x.double_value(&[])),
    }
}
