//! Training batches: samples from the replay window turned into network inputs and dense
//! targets on the host ([`HostBatch`], built on the loader thread), then into tensors on the
//! training device ([`DeviceBatch`]).
//!
//! - policy target: the sample's sparse (move, weight) list scattered into the 2187 dlshogi
//!   labels of the side to move (optionally pruned: entries under `policy_prune_below` dropped,
//!   never the largest, and the rest renormalised);
//! - value target: `w·onehot(result) + (1 − w)·root_wdl` over (win, draw, loss), w =
//!   `result_weight` (dlshogi: 0.667, its `val_lambda` 0.333 being the search value's weight), and with the
//!   material target (`material_weight` μ > 0) `(1 − μ)·that + μ·(p, 0, 1 − p)`, p the sigmoid of
//!   the material balance `material_plies` later in the game (the sample's continuation);
//! - per-sample weights of the two losses (a sample without a policy, or not a full search when
//!   `policy_full_search_only`, has policy weight 0);
//! - with replies (a model with the opponent-reply head): the label of the opponent's next move
//!   in the opponent's frame (`move_label(reply, !side_to_move)`, docs/nn.md), and a mask that is
//!   0 for samples without one (the game ended after the sample's move, unknown ply).

use koma_base::Rng;
use koma_data::{flags, Sample};
use koma_nn::encoding::move_label;
use koma_nn::{InputBatch, FEATURES1_NUM, FEATURES2_NUM, MOVE_LABELS};
use koma_shogi::material::material;
use koma_shogi::{Move, Position};
use rayon::prelude::*;
use tch::{Device, Kind, Tensor};

use crate::config::LossConfig;

/// A batch ready on the host.
#[derive(Clone, Debug, Default)]
pub struct HostBatch {
    pub inputs: InputBatch,
    /// `(N, 2187)` row-major.
    pub policy: Vec<f32>,
    /// `(N, 3)`: win, draw, loss.
    pub value: Vec<f32>,
    /// Game result as a W/D/L class: 0 win, 1 draw, 2 loss (side to move).
    pub result_class: Vec<i64>,
    pub policy_weight: Vec<f32>,
    pub value_weight: Vec<f32>,
    /// Opponent-reply labels (opponent's frame; 0 where there is none) and their mask (1 with a
    /// reply, 0 without); both empty when the batch was built without replies.
    pub reply_label: Vec<i64>,
    pub reply_weight: Vec<f32>,
    /// The sampler's state right after this batch was drawn (saved with the training state).
    pub rng_after: Option<Rng>,
    /// Samples dropped because their position did not unpack.
    pub dropped: usize,
}

impl HostBatch {
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Whether the batch carries reply labels ([`ContinuationTargets::replies`]).
    pub fn has_replies(&self) -> bool {
        !self.reply_weight.is_empty()
    }

    /// Builds a batch from samples (positions are unpacked and encoded in parallel). A sample
    /// whose position does not unpack is left out with a warning.
    pub fn from_samples(samples: &[Sample], loss: &LossConfig) -> HostBatch {
        HostBatch::build(samples, None, loss)
    }

    /// [`HostBatch::from_samples`] with targets taken from each sample's continuation in its game
    /// (`continuations[i]` for `samples[i]`: the moves after its move, `None` when unknown): the
    /// opponent's reply when `targets.replies` (a sample without one is masked out of the reply
    /// loss), and the material value target when `targets.material_weight` > 0.
    pub fn from_samples_with_continuations(
        samples: &[Sample],
        continuations: &[Option<Vec<Move>>],
        loss: &LossConfig,
        targets: ContinuationTargets,
    ) -> HostBatch {
        assert_eq!(samples.len(), continuations.len(), "one continuation per sample");
        HostBatch::build(samples, Some((continuations, targets)), loss)
    }

    fn build(
        samples: &[Sample],
        continuations: Option<(&[Option<Vec<Move>>], ContinuationTargets)>,
        loss: &LossConfig,
    ) -> HostBatch {
        let unpacked: Vec<Option<Position>> = samples
            .par_iter()
            .map(|s| match s.position.unpack() {
                Ok(p) => Some(p),
                Err(e) => {
                    tracing::warn!("training batch: skipping a sample: {e}");
                    None
                }
            })
            .collect();
        let kept: Vec<(usize, &Sample, Position)> =
            samples.iter().zip(unpacked).enumerate().filter_map(|(i, (s, p))| p.map(|p| (i, s, p))).collect();
        let n = kept.len();
        let positions: Vec<&Position> = kept.iter().map(|(_, _, p)| p).collect();
        let mut batch = HostBatch {
            inputs: InputBatch::with_capacity(n),
            policy: vec![0.0; n * MOVE_LABELS],
            value: vec![0.0; n * 3],
            result_class: Vec::with_capacity(n),
            policy_weight: Vec::with_capacity(n),
            value_weight: Vec::with_capacity(n),
            reply_label: Vec::new(),
            reply_weight: Vec::new(),
            rng_after: None,
            dropped: samples.len() - n,
        };
        batch.inputs.encode(&positions);
        // The dense policy rows (9 KB a sample, written to fresh memory) in parallel too: serial,
        // they were most of the loader's time once the window was in memory.
        let has_policy: Vec<bool> = batch
            .policy
            .par_chunks_mut(MOVE_LABELS)
            .zip(kept.par_iter())
            .map(|(row, (_, s, pos))| fill_policy(s, pos, loss.policy_prune_below, row))
            .collect();
        let result_weight = loss.result_weight as f32;
        let (continuations, targets) = match continuations {
            Some((c, t)) => (Some(c), t),
            None => (None, ContinuationTargets::default()),
        };
        for (i, (k, s, pos)) in kept.iter().enumerate() {
            let continuation = continuations.and_then(|c| c[*k].as_deref());
            if targets.replies {
                // The reply is the opponent's move: labelled from the opponent's side.
                let (label, w) = match continuation.and_then(|c| c.first()) {
                    Some(&m) => (move_label(m, !pos.side_to_move()) as i64, 1.0),
                    None => (0, 0.0),
                };
                batch.reply_label.push(label);
                batch.reply_weight.push(w);
            }
            let full = s.flags & flags::FULL_SEARCH != 0;
            let use_policy = has_policy[i] && (full || !loss.policy_full_search_only);
            batch.policy_weight.push(if use_policy { 1.0 } else { 0.0 });
            let class = (1 - s.result.clamp(-1, 1)) as usize;
            let wdl_sum: f32 = s.root_wdl.iter().sum();
            // A sample without a root value (none recorded) learns from its result alone.
            let (root, w) = if wdl_sum > 0.0 && wdl_sum.is_finite() {
                (s.root_wdl.map(|x| x / wdl_sum), result_weight)
            } else {
                ([0.0; 3], 1.0)
            };
            let v = &mut batch.value[i * 3..(i + 1) * 3];
            for k in 0..3 {
                v[k] = w * if k == class { 1.0 } else { 0.0 } + (1.0 - w) * root[k];
            }
            let mu = targets.material_weight;
            if mu > 0.0 {
                if let Some(balance) = continuation.and_then(|c| material_later(pos, s.played, c, loss.material_plies))
                {
                    let p = 1.0 / (1.0 + (-(balance as f64) / loss.material_scale).exp()) as f32;
                    for (k, m) in [p, 0.0, 1.0 - p].into_iter().enumerate() {
                        v[k] = (1.0 - mu) * v[k] + mu * m;
                    }
                }
            }
            batch.result_class.push(class as i64);
            batch.value_weight.push(1.0);
        }
        batch
    }

    /// The batch as tensors on `device` (features as f32, contiguous NCHW).
    pub fn to_device(&self, device: Device) -> DeviceBatch {
        self.to_device_as(device, false)
    }

    /// The batch as tensors on `device`, the features as f32 in channels-last layout when
    /// `channels_last` (converted as bytes, before the cast to f32 and the upload).
    pub fn to_device_as(&self, device: Device, channels_last: bool) -> DeviceBatch {
        self.rows_to_device(0..self.len(), device, channels_last)
    }

    /// Rows `rows` of the batch as [`HostBatch::to_device_as`] gives them: a data-parallel
    /// replica's part.
    pub fn rows_to_device(&self, rows: std::ops::Range<usize>, device: Device, channels_last: bool) -> DeviceBatch {
        let n = rows.len() as i64;
        let part = |v: &[f32], width: usize| Tensor::from_slice(&v[rows.start * width..rows.end * width]);
        let up = |t: Tensor| if device == Device::Cpu { t } else { t.to_device(device) };
        let (input1, input2) = input_tensors(&self.inputs, rows.clone(), device, channels_last);
        DeviceBatch {
            input1,
            input2,
            policy: up(part(&self.policy, MOVE_LABELS).view([n, MOVE_LABELS as i64])),
            value: up(part(&self.value, 3).view([n, 3])),
            result_class: up(Tensor::from_slice(&self.result_class[rows.clone()])),
            policy_weight: up(part(&self.policy_weight, 1)),
            value_weight: up(part(&self.value_weight, 1)),
            reply: self
                .has_replies()
                .then(|| (up(Tensor::from_slice(&self.reply_label[rows.clone()])), up(part(&self.reply_weight, 1)))),
            len: rows.len(),
        }
    }
}

/// Rows `rows` of `inputs` as the network's two f32 inputs on `device` (channels-last strides
/// with `channels_last`).
pub(crate) fn input_tensors(
    inputs: &InputBatch,
    rows: std::ops::Range<usize>,
    device: Device,
    channels_last: bool,
) -> (Tensor, Tensor) {
    let n = rows.len() as i64;
    let features = |bytes: &[u8], c: usize| {
        let t = Tensor::from_slice(&bytes[rows.start * c * 81..rows.end * c * 81]).view([n, c as i64, 9, 9]);
        let t = if channels_last { koma_nn::model::to_channels_last(&t) } else { t };
        // `to_kind` and `to_device` keep the strides.
        let t = if device == Device::Cpu { t } else { t.to_device(device) };
        t.to_kind(Kind::Float)
    };
    (features(inputs.input1(), FEATURES1_NUM), features(inputs.input2(), FEATURES2_NUM))
}

/// What [`HostBatch::from_samples_with_continuations`] takes from the continuations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ContinuationTargets {
    /// Opponent-reply labels (the model has the reply head).
    pub replies: bool,
    /// The material target's weight μ in effect for this batch (`LossConfig::material_weight_at`).
    pub material_weight: f32,
}

impl ContinuationTargets {
    /// How many moves after each sample's own move these targets need: the reply is the first;
    /// the material is counted `material_plies` after the sample, its own move included.
    pub fn continuation_plies(&self, loss: &LossConfig) -> usize {
        let material = if self.material_weight > 0.0 { loss.material_plies.saturating_sub(1) } else { 0 };
        material.max(usize::from(self.replies))
    }
}

/// The material balance (pawns) for the side to move at `pos`, `plies` plies later in the game:
/// after `played` and the continuation's moves (fewer where the game ended). `None` when a move
/// is not legal where it is played (an inconsistent shard; nothing is guessed).
fn material_later(pos: &Position, played: Option<Move>, continuation: &[Move], plies: usize) -> Option<i32> {
    let us = pos.side_to_move();
    let mut later = pos.clone();
    for m in played.into_iter().chain(continuation.iter().copied()).take(plies) {
        if !later.is_legal(m) {
            return None;
        }
        later.do_move(m);
    }
    Some(material(&later, us))
}

/// Writes the dense policy target of `s` into `row` (zeroed); false when it has no entries.
fn fill_policy(s: &Sample, pos: &Position, prune_below: f32, row: &mut [f32]) -> bool {
    if s.policy.is_empty() {
        return false;
    }
    let us = pos.side_to_move();
    let max = s.policy.iter().map(|&(_, w)| w).fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0.0f32;
    for &(m, w) in &s.policy {
        if w < prune_below && w < max {
            continue;
        }
        let w = w.max(0.0);
        row[move_label(m, us)] += w;
        total += w;
    }
    if total > 0.0 && total.is_finite() {
        let inv = 1.0 / total;
        row.iter_mut().for_each(|x| *x *= inv);
        true
    } else {
        row.fill(0.0);
        false
    }
}

/// A batch on the training device.
pub struct DeviceBatch {
    pub input1: Tensor,
    pub input2: Tensor,
    pub policy: Tensor,
    pub value: Tensor,
    pub result_class: Tensor,
    pub policy_weight: Tensor,
    pub value_weight: Tensor,
    /// Reply labels `(N,)` i64 and mask `(N,)` f32, when the batch has replies.
    pub reply: Option<(Tensor, Tensor)>,
    pub len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::losses;
    use koma_data::PackedPosition;

    fn sample(pos: &Position, policy: Vec<(Move, f32)>, result: i8, flags: u8) -> Sample {
        Sample {
            position: PackedPosition::pack(pos).unwrap(),
            played: None,
            policy,
            root_wdl: [0.2, 0.3, 0.5],
            result,
            ply: 0,
            flags,
        }
    }

    #[test]
    fn dense_targets_from_sparse_samples() {
        let mut pos = Position::startpos();
        let moves = pos.legal_moves().to_vec();
        let black = sample(&pos, vec![(moves[0], 0.75), (moves[1], 0.2), (moves[2], 0.05)], 1, flags::FULL_SEARCH);
        pos.do_move(moves[0]);
        let wmoves = pos.legal_moves().to_vec();
        let white = sample(&pos, vec![(wmoves[3], 1.0)], -1, 0);
        let empty = sample(&pos, vec![], 0, flags::FULL_SEARCH);
        let config = LossConfig { result_weight: 0.5, policy_prune_below: 0.1, ..Default::default() };
        let b = HostBatch::from_samples(&[black, white, empty], &config);
        assert_eq!(b.len(), 3);
        let row = |i: usize| &b.policy[i * MOVE_LABELS..(i + 1) * MOVE_LABELS];
        let us = Position::startpos().side_to_move();
        // 0.05 was pruned; 0.75 and 0.2 renormalised.
        assert!((row(0)[move_label(moves[0], us)] - 0.75 / 0.95).abs() < 1e-6);
        assert!((row(0)[move_label(moves[1], us)] - 0.2 / 0.95).abs() < 1e-6);
        assert_eq!(row(0)[move_label(moves[2], us)], 0.0);
        assert!((row(0).iter().sum::<f32>() - 1.0).abs() < 1e-6);
        // White's move is labelled from White's side.
        assert_eq!(row(1)[move_label(wmoves[3], pos.side_to_move())], 1.0);
        assert_eq!(b.policy_weight, vec![1.0, 1.0, 0.0]);
        // value: 0.5·onehot + 0.5·root.
        assert_eq!(b.result_class, vec![0, 2, 1]);
        let v = &b.value[0..3];
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.15).abs() < 1e-6 && (v[2] - 0.25).abs() < 1e-6);
        let v = &b.value[3..6];
        assert!((v[2] - 0.75).abs() < 1e-6);

        let config = LossConfig { policy_full_search_only: true, ..config };
        let b2 = HostBatch::from_samples(&[sample(&pos, vec![(wmoves[0], 1.0)], 0, 0)], &config);
        assert_eq!(b2.policy_weight, vec![0.0]);
    }

    /// An hcpe record (dlshogi's training data) through the default loss: the value target is
    /// dlshogi's, (1 − val_lambda)·result + val_lambda·σ(eval / 756.09) with val_lambda = 0.333,
    /// the result weighted 0.667 and the evaluation 0.333 (the old `value_lambda` had them the
    /// other way round).
    #[test]
    fn hcpe_value_targets_weight_result_and_eval_as_dlshogi() {
        use koma_data::hcp::{encode_hcp, HcpeRecord};
        let pos = Position::startpos();
        let eval = -400i16;
        let record = HcpeRecord { hcp: encode_hcp(&pos).unwrap(), eval, best_move16: 0, game_result: 1, dummy: 0 };
        let scale = 756.0864962951762;
        let s = koma_data::import::hcpe::hcpe_to_sample(&record, scale).unwrap();
        assert_eq!(s.result, 1, "Black to move won");
        let b = HostBatch::from_samples(&[s], &LossConfig::default());
        let val_lambda = 0.333f64;
        let eval_win = 1.0 / (1.0 + (-(eval as f64) / scale).exp());
        let dlshogi_win = (1.0 - val_lambda) * 1.0 + val_lambda * eval_win;
        assert!((b.value[0] as f64 - dlshogi_win).abs() < 1e-6, "{} vs {dlshogi_win}", b.value[0]);
        assert!((b.value[2] as f64 - val_lambda * (1.0 - eval_win)).abs() < 1e-6);
    }

    /// Reply labels are the opponent's move in the opponent's frame; samples without a reply
    /// are masked: their reply logits change neither the loss nor get a gradient.
    #[test]
    fn reply_targets_and_mask() {
        let mut pos = Position::startpos();
        let first = pos.legal_moves()[0];
        let s0 = sample(&pos, vec![(first, 1.0)], 1, flags::FULL_SEARCH);
        pos.do_move(first);
        let reply = pos.legal_moves()[5];
        let s1 = sample(&pos, vec![(reply, 1.0)], -1, flags::FULL_SEARCH);
        let config = LossConfig::default();
        let targets = ContinuationTargets { replies: true, material_weight: 0.0 };
        let continuations = [Some(vec![reply]), Some(vec![])];
        let b = HostBatch::from_samples_with_continuations(&[s0.clone(), s1.clone()], &continuations, &config, targets);
        // Sample 0 is Black to move; its reply is White's, labelled as White sees it (the label
        // the main head gives that move at the next position).
        assert_eq!(b.reply_label, vec![move_label(reply, koma_shogi::Color::White) as i64, 0]);
        assert_eq!(b.reply_weight, vec![1.0, 0.0]);
        assert!(b.has_replies() && !HostBatch::from_samples(&[s0, s1], &config).has_replies());
        let d = b.to_device(Device::Cpu);
        let p = Tensor::zeros([2, MOVE_LABELS as i64], (Kind::Float, Device::Cpu));
        let v = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
        tch::manual_seed(4);
        let r = Tensor::randn([2, MOVE_LABELS as i64], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let l = losses(&p, &v, Some(&r), &d, &config);
        let (reply_loss, _) = l.reply.as_ref().unwrap();
        // Only row 0 counts, divided by the batch size.
        let label = b.reply_label[0];
        let row0 = -r.get(0).log_softmax(0, Kind::Float).double_value(&[label]);
        assert!((reply_loss.double_value(&[]) - row0 / 2.0).abs() < 1e-5);
        // total = policy + value + 0.15 · reply.
        let expected = l.policy.double_value(&[]) + l.value.double_value(&[]) + 0.15 * row0 / 2.0;
        assert!((l.total.double_value(&[]) - expected).abs() < 1e-4);
        let g = Tensor::run_backward(&[&l.total], &[&r], false, false).pop().unwrap();
        assert_eq!(g.get(1).abs().sum(Kind::Float).double_value(&[]), 0.0, "masked row gets no gradient");
        assert!(g.get(0).abs().sum(Kind::Float).double_value(&[]) > 0.0);
        // Changing the masked row's logits changes nothing; a perfect row 0 gives top-1 = 1.
        let r2 = r.detach().copy();
        let _ = r2.get(1).fill_(3.0);
        let _ = r2.get(0).get(label).fill_(50.0);
        let l2 = losses(&p, &v, Some(&r2), &d, &config);
        let (loss2, top1) = l2.reply.unwrap();
        assert!(loss2.double_value(&[]) < 1e-6);
        assert_eq!(top1.double_value(&[]), 1.0);
        // An explicit weight is used.
        let l3 = losses(&p, &v, Some(&r), &d, &LossConfig { reply_weight: Some(1.0), ..config.clone() });
        assert!((l3.total.double_value(&[]) - (expected + 0.85 * row0 / 2.0)).abs() < 1e-4);
        // Without reply logits (or without reply labels) nothing is added.
        assert!(losses(&p, &v, None, &d, &config).reply.is_none());
        let plain = HostBatch::from_samples(&[sample(&Position::startpos(), vec![(first, 1.0)], 1, 0)], &config);
        let l4 = losses(
            &p.narrow(0, 0, 1),
            &v.narrow(0, 0, 1),
            Some(&r.narrow(0, 0, 1)),
            &plain.to_device(Device::Cpu),
            &config,
        );
        assert!(l4.reply.is_none());
        assert!((l4.total.double_value(&[]) - (l4.policy.double_value(&[]) + l4.value.double_value(&[]))).abs() < 1e-6);
    }

    /// The material target mixes sigmoid(balance / scale) for the side to move, counted
    /// `material_plies` after the sample along its game, into the value target; a sample whose
    /// continuation is unknown or does not replay keeps the plain target, and a game that ends
    /// sooner is counted at its end.
    #[test]
    fn material_target_follows_the_game() {
        // Black's rook takes White's bishop with check (5h5c), White's gold takes the rook (6b5c).
        let pos = Position::from_sfen("4k4/3g5/4b4/9/9/9/9/4R4/4K4 b P 1").unwrap();
        let take = Move::from_usi("5h5c").unwrap();
        let retake = Move::from_usi("6b5c").unwrap();
        let played = Sample { played: Some(take), ..sample(&pos, vec![(take, 1.0)], 1, flags::FULL_SEARCH) };
        let config = LossConfig { result_weight: 1.0, material_weight: 0.5, material_plies: 1, ..Default::default() };
        let targets = ContinuationTargets { replies: false, material_weight: 0.5 };
        let value_of = |sample: &Sample, plies: usize, continuation: Option<Vec<Move>>, targets| {
            let config = LossConfig { material_plies: plies, ..config.clone() };
            let b = HostBatch::from_samples_with_continuations(
                std::slice::from_ref(sample),
                &[continuation],
                &config,
                targets,
            );
            [b.value[0], b.value[1], b.value[2]]
        };
        // The plain target is a win; the material one is (p, 0, 1 − p), mixed half and half.
        let mixed = |balance: f64| {
            let p = (1.0 / (1.0 + (-balance / 6.0).exp())) as f32;
            [0.5 + 0.5 * p, 0.0, 0.5 * (1.0 - p)]
        };
        let close = |a: [f32; 3], b: [f32; 3]| a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-6);
        // After one ply Black has rook, bishop and pawn (19) against the gold (6).
        assert!(close(value_of(&played, 1, Some(vec![retake]), targets), mixed(13.0)));
        // After two, bishop and pawn (9) against gold and rook (16); the game ends there, so
        // five plies count the same position.
        assert!(close(value_of(&played, 2, Some(vec![retake]), targets), mixed(-7.0)));
        assert!(close(value_of(&played, 5, Some(vec![retake]), targets), mixed(-7.0)));
        // A final position (no move) counts itself: rook and pawn (11) against bishop and gold (14).
        let last = Sample { played: None, ..played.clone() };
        assert!(close(value_of(&last, 2, Some(vec![]), targets), mixed(-3.0)));
        // Unknown continuation, one that does not replay, or weight 0: the plain target.
        let plain = [1.0, 0.0, 0.0];
        assert_eq!(value_of(&played, 2, None, targets), plain);
        assert_eq!(value_of(&played, 2, Some(vec![Move::from_usi("9i9a").unwrap()]), targets), plain);
        let off = ContinuationTargets { replies: false, material_weight: 0.0 };
        assert_eq!(value_of(&played, 2, Some(vec![retake]), off), plain);
    }

    /// The material weight falls linearly to 0 over `material_decay_samples` and stays there.
    #[test]
    fn material_weight_decays() {
        let constant = LossConfig { material_weight: 0.4, ..Default::default() };
        assert_eq!(constant.material_weight_at(10_000_000), 0.4);
        let decaying = LossConfig { material_decay_samples: 1000, ..constant };
        assert_eq!(decaying.material_weight_at(0), 0.4);
        assert!((decaying.material_weight_at(250) - 0.3).abs() < 1e-12);
        assert_eq!(decaying.material_weight_at(1000), 0.0);
        assert_eq!(decaying.material_weight_at(5000), 0.0);
    }

    #[test]
    fn channels_last_batch_has_the_same_values() {
        let samples = crate::synth::random_samples(5, 9, crate::synth::SynthPolicy::Random);
        let b = HostBatch::from_samples(&samples, &LossConfig::default());
        let plain = b.to_device(Device::Cpu);
        let cl = b.to_device_as(Device::Cpu, true);
        for (p, c) in [(&plain.input1, &cl.input1), (&plain.input2, &cl.input2)] {
            assert!(p.is_contiguous() && koma_nn::model::is_channels_last(c) && !c.is_contiguous());
            assert_eq!(c.kind(), Kind::Float);
            assert!(p.equal(c));
        }
        assert!(plain.policy.equal(&cl.policy));
    }

    #[test]
    fn loss_values_on_known_logits() {
        let pos = Position::startpos();
        let moves = pos.legal_moves().to_vec();
        let s = sample(&pos, vec![(moves[0], 1.0)], 1, flags::FULL_SEARCH);
        let config = LossConfig { result_weight: 1.0, ..Default::default() };
        let b = HostBatch::from_samples(&[s.clone(), s], &config).to_device(Device::Cpu);
        // Uniform logits: policy CE = ln 2187, value CE = ln 3.
        let p = Tensor::zeros([2, MOVE_LABELS as i64], (Kind::Float, Device::Cpu));
        let v = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
        let l = losses(&p, &v, None, &b, &config);
        assert!((l.policy.double_value(&[]) - (MOVE_LABELS as f64).ln()).abs() < 1e-4);
        assert!((l.value.double_value(&[]) - 3f64.ln()).abs() < 1e-5);
        assert!((l.total.double_value(&[]) - (MOVE_LABELS as f64).ln() - 3f64.ln()).abs() < 1e-4);
        // Logits that put everything on the target: top-1 agreement and value accuracy are 1.
        let label = move_label(moves[0], pos.side_to_move()) as i64;
        let p = p.index_fill(1, &Tensor::from_slice(&[label]), 30.0);
        let v = Tensor::from_slice(&[9.0f32, 0.0, 0.0, 9.0, 0.0, 0.0]).view([2, 3]);
        let l = losses(&p, &v, None, &b, &config);
        assert_eq!(l.policy_top1.double_value(&[]), 1.0);
        assert_eq!(l.value_accuracy.double_value(&[]), 1.0);
        assert!(l.policy.double_value(&[]) < 1e-6);
    }
}
