//! A batch of search leaves on its way through a network: features encoded in place into host
//! buffers (page-locked on CUDA, so the upload is an asynchronous DMA), the labels of each
//! position's legal moves found in the same pass (so only those logits leave the device, about
//! 80 floats a position instead of 2 187, and decoding generates no moves again), rows padded to
//! a fixed multiple (so cuDNN's autotuner sees a few shapes, not every batch size), and the
//! evaluations decoded from what came back.
//!
//! The same batch serves every forward pass that stands behind an inference service: the libtorch
//! [`crate::Network`] and the simulated accelerator ([`crate::simulated`]), so a simulation runs
//! koma's own encoding, copies and decoding.

use std::borrow::Borrow;

use koma_mcts::Evaluation;
use koma_shogi::Position;
use rayon::prelude::*;
use tch::{Device, Kind, Tensor};

use crate::encoding::{self, INPUT1_LEN, INPUT2_LEN, MOVE_LABELS, PARALLEL_CHUNK, PARALLEL_MIN};
use crate::model::VALUE_OUTPUTS;

/// Host memory the features are encoded into: ordinary heap memory, or page-locked memory that a
/// CUDA device reads by DMA while the host goes on.
enum HostBuffer {
    Heap(Vec<u8>),
    Pinned { tensor: Tensor, device: Device },
}

impl HostBuffer {
    fn new(device: Device) -> HostBuffer {
        match device {
            Device::Cpu => HostBuffer::Heap(Vec::new()),
            device => HostBuffer::Pinned { tensor: Tensor::empty([0], (Kind::Uint8, Device::Cpu)), device },
        }
    }

    fn len(&self) -> usize {
        match self {
            HostBuffer::Heap(v) => v.len(),
            HostBuffer::Pinned { tensor, .. } => tensor.numel(),
        }
    }

    /// Makes it hold at least `bytes` (contents are not kept when it grows).
    fn ensure(&mut self, bytes: usize) {
        if self.len() >= bytes {
            return;
        }
        match self {
            HostBuffer::Heap(v) => v.resize(bytes, 0),
            HostBuffer::Pinned { tensor, device } => {
                *tensor = Tensor::empty([bytes as i64], (Kind::Uint8, Device::Cpu)).pin_memory(*device);
            }
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            HostBuffer::Heap(v) => v,
            HostBuffer::Pinned { tensor, .. } => {
                let len = tensor.numel();
                if len == 0 {
                    // An empty tensor's data pointer may be null: no slice from it.
                    return &mut [];
                }
                // SAFETY: a contiguous u8 tensor of `len` elements that this buffer owns alone; the
                // slice borrows `self` mutably, so nothing else reads or frees it meanwhile.
                unsafe { std::slice::from_raw_parts_mut(tensor.data_ptr() as *mut u8, len) }
            }
        }
    }

    /// The first `bytes` as a `(rows, planes, 9, 9)` u8 tensor on the CPU. Pinned memory is viewed
    /// (no copy); heap memory is borrowed, so the tensor must not outlive `self`.
    fn view(&self, bytes: usize, shape: [i64; 4]) -> Tensor {
        match self {
            HostBuffer::Heap(v) => {
                // SAFETY: `v` holds at least `bytes` bytes and outlives the tensor (see above); the
                // tensor is only read.
                unsafe { Tensor::from_blob(v.as_ptr(), &shape, &[], Kind::Uint8, Device::Cpu) }
            }
            HostBuffer::Pinned { tensor, .. } => tensor.narrow(0, 0, bytes as i64).view(shape),
        }
    }
}

/// Leaves encoded for a forward pass; reused from batch to batch (it allocates nothing once grown
/// to the largest batch).
pub struct LeafBatch {
    input1: HostBuffer,
    input2: HostBuffer,
    len: usize,
    padded: usize,
    /// For every legal move of every position, position by position: its index in the flattened
    /// `(rows, 2187)` policy output.
    gather: Vec<i64>,
    /// Where position `i`'s moves start in `gather` (`len + 1` entries).
    starts: Vec<usize>,
    /// One list of labels per rayon task, reused.
    chunk_labels: Vec<Vec<i64>>,
}

impl LeafBatch {
    /// A batch whose features are staged for `device`: page-locked on CUDA, heap memory on the CPU.
    pub fn for_device(device: Device) -> LeafBatch {
        LeafBatch {
            input1: HostBuffer::new(device),
            input2: HostBuffer::new(device),
            len: 0,
            padded: 0,
            gather: Vec::new(),
            starts: vec![0],
            chunk_labels: Vec::new(),
        }
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Rows sent to the network: `len` rounded up to the padding multiple (the extra rows are
    /// zeros and their outputs are never read).
    pub fn rows(&self) -> usize {
        self.padded
    }

    /// Legal moves over all positions: the policy logits that come back.
    pub fn legal_moves(&self) -> usize {
        self.gather.len()
    }

    /// Indices into the flattened `(rows, 2187)` policy output of every legal move, in order.
    pub fn gather_indices(&self) -> &[i64] {
        &self.gather
    }

    /// Replaces the contents with `positions`, padded with zero rows to [`padded_rows`] (a
    /// `pad_multiple` of 1: no padding). Features and legal-move labels are computed in one pass, in
    /// parallel above a small batch.
    pub fn encode<P: Borrow<Position> + Sync>(&mut self, positions: &[P], pad_multiple: usize) {
        let n = positions.len();
        let padded = padded_rows(n, pad_multiple);
        self.input1.ensure(padded * INPUT1_LEN);
        self.input2.ensure(padded * INPUT2_LEN);
        let in1 = &mut self.input1.as_mut_slice()[..padded * INPUT1_LEN];
        let in2 = &mut self.input2.as_mut_slice()[..padded * INPUT2_LEN];
        in1[n * INPUT1_LEN..].fill(0);
        in2[n * INPUT2_LEN..].fill(0);
        let (in1, in2) = (&mut in1[..n * INPUT1_LEN], &mut in2[..n * INPUT2_LEN]);
        let chunk = if n >= PARALLEL_MIN { PARALLEL_CHUNK } else { n.max(1) };
        let tasks = n.div_ceil(chunk);
        if self.chunk_labels.len() < tasks {
            self.chunk_labels.resize_with(tasks, Vec::new);
        }
        let labels = &mut self.chunk_labels[..tasks];
        if tasks > 1 {
            in1.par_chunks_mut(INPUT1_LEN * chunk)
                .zip(in2.par_chunks_mut(INPUT2_LEN * chunk))
                .zip(positions.par_chunks(chunk))
                .zip(labels.par_iter_mut())
                .enumerate()
                .for_each(|(t, (((a, b), ps), labels))| encode_chunk(a, b, ps, t * chunk, labels));
        } else if n > 0 {
            encode_chunk(in1, in2, positions, 0, &mut labels[0]);
        }
        self.gather.clear();
        self.starts.clear();
        self.starts.push(0);
        for labels in &self.chunk_labels[..tasks] {
            let mut rest = &labels[..];
            while let Some((&count, tail)) = rest.split_first() {
                let (moves, tail) = tail.split_at(count as usize);
                self.gather.extend_from_slice(moves);
                self.starts.push(self.gather.len());
                rest = tail;
            }
        }
        self.len = n;
        self.padded = padded;
    }

    /// The features of the padded rows as `(rows, 62, 9, 9)` and `(rows, 57, 9, 9)` u8 tensors on
    /// the CPU, borrowing this batch's memory: they must be copied (to the device or to another
    /// kind) before the batch changes.
    pub(crate) fn host_features(&self) -> (Tensor, Tensor) {
        let rows = self.padded as i64;
        (
            self.input1.view(self.padded * INPUT1_LEN, [rows, encoding::FEATURES1_NUM as i64, 9, 9]),
            self.input2.view(self.padded * INPUT2_LEN, [rows, encoding::FEATURES2_NUM as i64, 9, 9]),
        )
    }

    /// The evaluations of the positions from what the network answered: priors are the softmax of
    /// each position's legal-move logits (in [`Position::legal_moves`] order), W/D/L the softmax of
    /// its three logits.
    pub fn evaluations(&self, out: &LeafOutput) -> Vec<Evaluation> {
        (0..self.len)
            .map(|i| {
                let mut priors = out.legal_logits[self.starts[i]..self.starts[i + 1]].to_vec();
                encoding::softmax_in_place(&mut priors);
                let w = &out.wdl[i * VALUE_OUTPUTS..(i + 1) * VALUE_OUTPUTS];
                let mut wdl = [w[0], w[1], w[2]];
                encoding::softmax_in_place(&mut wdl);
                Evaluation { priors, wdl }
            })
            .collect()
    }
}

/// Rows a batch of `n` positions is padded to: the next power of two up to `multiple`, then the
/// next multiple of `multiple` (`multiple` ≤ 1: `n`). A few shapes for cuDNN's autotuner, and a
/// small batch (the engine's, an arena game's) is not padded to a large one.
pub fn padded_rows(n: usize, multiple: usize) -> usize {
    if multiple <= 1 || n == 0 {
        n
    } else if n <= multiple {
        n.next_power_of_two().min(multiple)
    } else {
        n.div_ceil(multiple) * multiple
    }
}

/// Encodes `positions` (rows `first..`) into `a` and `b`, and lists in `labels` each position's
/// legal-move count followed by its moves' flat indices into the policy output.
fn encode_chunk<P: Borrow<Position>>(a: &mut [u8], b: &mut [u8], positions: &[P], first: usize, labels: &mut Vec<i64>) {
    labels.clear();
    for (k, ((a, b), p)) in a.chunks_mut(INPUT1_LEN).zip(b.chunks_mut(INPUT2_LEN)).zip(positions).enumerate() {
        let pos = p.borrow();
        encoding::encode_position(pos, a, b);
        let row = ((first + k) * MOVE_LABELS) as i64;
        let us = pos.side_to_move();
        let moves = pos.legal_moves();
        labels.push(moves.len() as i64);
        labels.extend(moves.iter().map(|&m| row + encoding::move_label(m, us) as i64));
    }
}

/// What a forward pass answers for a [`LeafBatch`]: the legal moves' policy logits (in the batch's
/// gather order) and the W/D/L logits of the real rows, float32 on the host. Reused.
#[derive(Debug, Default, Clone)]
pub struct LeafOutput {
    pub legal_logits: Vec<f32>,
    pub wdl: Vec<f32>,
}

impl LeafOutput {
    /// Positions with a NaN or infinite logit, given the batch they answer.
    pub fn non_finite_positions(&self, batch: &LeafBatch) -> usize {
        (0..batch.len)
            .filter(|&i| {
                let policy = &self.legal_logits[batch.starts[i]..batch.starts[i + 1]];
                let wdl = &self.wdl[i * VALUE_OUTPUTS..(i + 1) * VALUE_OUTPUTS];
                !policy.iter().chain(wdl).all(|x| x.is_finite())
            })
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(n: usize) -> Vec<Position> {
        (0..n)
            .map(|i| {
                let mut pos = Position::startpos();
                for k in 0..(i % 50) {
                    let moves = pos.legal_moves();
                    if moves.is_empty() {
                        break;
                    }
                    pos.do_move(moves[(k * 13 + i) % moves.len()]);
                }
                pos
            })
            .collect()
    }

    #[test]
    fn labels_and_features_match_the_encoding_position_by_position() {
        for (n, pad) in [(1, 1), (7, 1), (70, 1), (70, 64), (33, 16), (0, 8)] {
            let ps = positions(n);
            let mut batch = LeafBatch::for_device(Device::Cpu);
            // Encoded twice: a reused batch must hold exactly the second contents.
            batch.encode(&positions(100), 1);
            batch.encode(&ps, pad);
            assert_eq!(batch.len(), n);
            assert_eq!(batch.rows(), padded_rows(n, pad));
            let mut features = crate::InputBatch::new();
            features.encode(&ps);
            let (t1, t2) = batch.host_features();
            let (len1, len2) = (batch.rows() * INPUT1_LEN, batch.rows() * INPUT2_LEN);
            let (mut a, mut b) = (vec![0u8; len1], vec![0u8; len2]);
            t1.copy_data(&mut a, len1);
            t2.copy_data(&mut b, len2);
            assert_eq!(&a[..n * INPUT1_LEN], features.input1());
            assert_eq!(&b[..n * INPUT2_LEN], features.input2());
            assert!(a[n * INPUT1_LEN..].iter().chain(&b[n * INPUT2_LEN..]).all(|&x| x == 0), "padding is zeros");
            let mut expected = Vec::new();
            for (i, p) in ps.iter().enumerate() {
                let mut labels = Vec::new();
                encoding::legal_labels(p, &p.legal_moves(), &mut labels);
                expected.extend(labels.iter().map(|&l| (i * MOVE_LABELS) as i64 + l as i64));
            }
            assert_eq!(batch.gather_indices(), &expected[..]);
        }
    }

    #[test]
    fn rows_are_padded_to_a_few_shapes() {
        let rows: Vec<usize> = [0, 1, 3, 5, 33, 64, 65, 130, 1000].iter().map(|&n| padded_rows(n, 64)).collect();
        assert_eq!(rows, [0, 1, 4, 8, 64, 64, 128, 192, 1024]);
        assert_eq!(padded_rows(37, 1), 37);
        // Up to 1 024 rows: 7 powers of two and 16 multiples of 64, 22 shapes in all.
        let shapes: std::collections::BTreeSet<usize> = (1..=1024).map(|n| padded_rows(n, 64)).collect();
        assert_eq!(shapes.len(), 22);
    }

    #[test]
    fn decoding_takes_each_positions_own_logits() {
        let ps = positions(40);
        let mut batch = LeafBatch::for_device(Device::Cpu);
        batch.encode(&ps, 1);
        // A policy whose logit is its own flat index / 1000: the gathered logits name their source.
        let out = LeafOutput {
            legal_logits: batch.gather_indices().iter().map(|&g| (g % MOVE_LABELS as i64) as f32 / 1000.0).collect(),
            wdl: (0..ps.len() * 3).map(|k| k as f32 / 100.0).collect(),
        };
        let evals = batch.evaluations(&out);
        for (i, (p, e)) in ps.iter().zip(&evals).enumerate() {
            let full: Vec<f32> = (0..MOVE_LABELS).map(|l| l as f32 / 1000.0).collect();
            let mut labels = Vec::new();
            encoding::legal_labels(p, &p.legal_moves(), &mut labels);
            let mut priors = Vec::new();
            encoding::legal_priors(&full, &labels, &mut priors);
            assert_eq!(e.priors, priors);
            let mut wdl = [out.wdl[3 * i], out.wdl[3 * i + 1], out.wdl[3 * i + 2]];
            encoding::softmax_in_place(&mut wdl);
            assert_eq!(e.wdl, wdl);
        }
        let mut bad = out.clone();
        bad.wdl[3 * 5 + 1] = f32::NAN;
        bad.legal_logits[batch.starts[9]] = f32::INFINITY;
        assert_eq!(bad.non_finite_positions(&batch), 2);
        assert_eq!(out.non_finite_positions(&batch), 0);
    }
}
