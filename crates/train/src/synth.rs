//! Synthetic training data from real random games (koma-shogi playouts written as koma-data
//! samples): for the trainer's tests, `koma bench train`, and anyone needing a small data set.
//!
//! With [`SynthPolicy::MinLabel`] the targets are a deterministic function of the network input,
//! so a network can learn them: the policy puts 0.8 on the legal move with the smallest dlshogi
//! label (labels are in the side-to-move frame, like the input) and 0.2 over up to four other
//! legal moves; the game "result" is a win when the side to move holds a piece in hand, else a
//! loss.

use koma_base::Rng;
use koma_data::{flags, GameSamples, PackedPosition, Sample};
use koma_nn::encoding::move_label;
use koma_shogi::{EndReason, GameResult, Handicap, Move, PieceType};
use rand::{RngExt, SeedableRng};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynthPolicy {
    /// Learnable targets (see the module documentation).
    MinLabel,
    /// Random weights over random legal moves, random results.
    Random,
}

/// `games` random games (from the even and handicap start positions), every position a sample.
pub fn random_games(games: usize, seed: u64, policy: SynthPolicy) -> Vec<GameSamples> {
    let mut rng = Rng::seed_from_u64(seed);
    (0..games).map(|g| random_game(&mut rng, g, policy)).collect()
}

fn random_game(rng: &mut Rng, index: usize, policy: SynthPolicy) -> GameSamples {
    let start = if index.is_multiple_of(4) {
        Handicap::ALL[rng.random_range(0..Handicap::ALL.len())]
    } else {
        Handicap::ALL[0]
    };
    let start_pos = start.position();
    let mut pos = start_pos.clone();
    let plies = 10 + rng.random_range(0..110);
    let mut samples = Vec::new();
    let mut moves_played = Vec::new();
    for ply in 0..plies {
        let moves = pos.legal_moves().to_vec();
        if moves.is_empty() {
            break;
        }
        let Ok(packed) = PackedPosition::pack(&pos) else { break };
        let us = pos.side_to_move();
        let (targets, result) = match policy {
            SynthPolicy::MinLabel => {
                let best = *moves.iter().min_by_key(|&&m| move_label(m, us)).expect("non-empty");
                let others: Vec<Move> = moves.iter().copied().filter(|&m| m != best).take(4).collect();
                let mut t = vec![(best, if others.is_empty() { 1.0 } else { 0.8 })];
                t.extend(others.iter().map(|&m| (m, 0.2 / others.len() as f32)));
                let in_hand = PieceType::HAND.iter().any(|&pt| pos.hand(us).count(pt) > 0);
                (t, if in_hand { 1 } else { -1 })
            }
            SynthPolicy::Random => {
                let k = 1 + rng.random_range(0..moves.len().min(16));
                let raw: Vec<f32> = (0..k).map(|_| 1.0 + rng.random_range(0..100) as f32).collect();
                let sum: f32 = raw.iter().sum();
                let mut t: Vec<(Move, f32)> = Vec::with_capacity(k);
                for (i, w) in raw.iter().enumerate() {
                    let m = moves[(i * 7 + rng.random_range(0..moves.len())) % moves.len()];
                    if !t.iter().any(|&(x, _)| x == m) {
                        t.push((m, w / sum));
                    }
                }
                (t, rng.random_range(0..3) as i8 - 1)
            }
        };
        let chosen = moves[rng.random_range(0..moves.len())];
        let r = rng.random::<f32>();
        samples.push(Sample {
            position: packed,
            played: Some(chosen),
            policy: targets,
            root_wdl: [0.3 + 0.2 * r, 0.2, 0.5 - 0.2 * r],
            result,
            ply: ply as u16,
            flags: flags::FULL_SEARCH,
        });
        pos.do_move(chosen);
        moves_played.push(chosen);
    }
    GameSamples {
        start_sfen: start_pos.to_sfen(),
        result: GameResult { winner: None, reason: EndReason::MaxMoves },
        length: moves_played.len() as u16,
        model: String::new(),
        moves: moves_played,
        samples,
        root_values: Vec::new(),
    }
}

/// Just the samples of [`random_games`], flattened.
pub fn random_samples(count: usize, seed: u64, policy: SynthPolicy) -> Vec<Sample> {
    let mut out = Vec::with_capacity(count);
    let mut s = seed;
    while out.len() < count {
        for g in random_games(8, s, policy) {
            out.extend(g.samples);
        }
        s = s.wrapping_add(1);
    }
    out.truncate(count);
    out
}
