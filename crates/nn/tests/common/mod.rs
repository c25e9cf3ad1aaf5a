//! Helpers shared by koma-nn's integration tests: a small deterministic RNG, random test
//! positions, and finding the project's Python.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use koma_shogi::{Color, Handicap, PieceType, Position};

/// SplitMix64: deterministic, dependency-free.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Positions from random playouts of every handicap start (both sides to move).
pub fn playout_positions(
    rng: &mut Rng,
    games_per_handicap: usize,
    max_plies: usize,
    keep_every: usize,
) -> Vec<Position> {
    let mut out = Vec::new();
    for h in Handicap::ALL {
        for _ in 0..games_per_handicap {
            let mut pos = h.position();
            let plies = rng.below(max_plies + 1);
            for ply in 0..plies {
                if ply % keep_every == 0 {
                    out.push(pos.clone());
                }
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                let m = moves[rng.below(moves.len())];
                pos.do_move(m);
            }
            out.push(pos);
        }
    }
    out
}

const SET: [(PieceType, usize); 7] = [
    (PieceType::Pawn, 18),
    (PieceType::Lance, 4),
    (PieceType::Knight, 4),
    (PieceType::Silver, 4),
    (PieceType::Gold, 4),
    (PieceType::Bishop, 2),
    (PieceType::Rook, 2),
];

/// A random position with the full set of 40 pieces spread over board and hands (a random
/// share in hands, so many positions have full hands), random promotions and side to move.
/// `None` when the drawn placement is not a legal position.
pub fn random_position(rng: &mut Rng) -> Option<Position> {
    let mut board: [Option<(Color, PieceType)>; 81] = [None; 81];
    let mut hands = [[0usize; 8]; 2];
    let bk = rng.below(81);
    let mut wk = rng.below(81);
    while wk == bk {
        wk = rng.below(81);
    }
    board[bk] = Some((Color::Black, PieceType::King));
    board[wk] = Some((Color::White, PieceType::King));
    let hand_share = rng.unit();
    let promote_share = rng.unit() * 0.5;
    for (pt, count) in SET {
        for _ in 0..count {
            let owner = if rng.chance(0.5) { Color::Black } else { Color::White };
            if rng.chance(hand_share) {
                hands[owner.index()][pt as usize] += 1;
            } else {
                let mut sq = rng.below(81);
                while board[sq].is_some() {
                    sq = rng.below(81);
                }
                let t = if pt.can_promote() && rng.chance(promote_share) { pt.promote() } else { pt };
                board[sq] = Some((owner, t));
            }
        }
    }
    let side = if rng.chance(0.5) { Color::Black } else { Color::White };
    Position::from_sfen(&sfen_of(&board, &hands, side)).ok()
}

fn sfen_of(board: &[Option<(Color, PieceType)>; 81], hands: &[[usize; 8]; 2], side: Color) -> String {
    let mut s = String::new();
    for rank in 0..9 {
        let mut empty = 0;
        for file in (0..9).rev() {
            match board[file * 9 + rank] {
                None => empty += 1,
                Some((c, pt)) => {
                    if empty > 0 {
                        s += &empty.to_string();
                        empty = 0;
                    }
                    if pt.is_promoted() {
                        s.push('+');
                    }
                    let l = pt.sfen_letter();
                    s.push(if c == Color::Black { l } else { l.to_ascii_lowercase() });
                }
            }
        }
        if empty > 0 {
            s += &empty.to_string();
        }
        if rank < 8 {
            s.push('/');
        }
    }
    s.push(' ');
    s.push(side.sfen_char());
    s.push(' ');
    let mut h = String::new();
    for c in [Color::Black, Color::White] {
        for pt in [
            PieceType::Rook,
            PieceType::Bishop,
            PieceType::Gold,
            PieceType::Silver,
            PieceType::Knight,
            PieceType::Lance,
            PieceType::Pawn,
        ] {
            let n = hands[c.index()][pt as usize];
            if n > 0 {
                if n > 1 {
                    h += &n.to_string();
                }
                let l = pt.sfen_letter();
                h.push(if c == Color::Black { l } else { l.to_ascii_lowercase() });
            }
        }
    }
    s += if h.is_empty() { "-" } else { &h };
    s += " 1";
    s
}

/// The Python of the project venv: `$KOMA_VENV/bin/python` when set (scripts/test sets it),
/// else `python3` on PATH (scripts put the venv first).
pub fn python() -> PathBuf {
    if let Some(venv) = std::env::var_os("KOMA_VENV") {
        let p = PathBuf::from(venv).join("bin/python");
        if p.exists() {
            return p;
        }
    }
    PathBuf::from("python3")
}

/// Fails the test with a clear message unless `python` imports `modules`.
pub fn require_python_modules(modules: &str) -> PathBuf {
    let py = python();
    let ok =
        Command::new(&py).args(["-c", &format!("import {modules}")]).status().map(|s| s.success()).unwrap_or(false);
    assert!(
        ok,
        "{} cannot import {modules}: run the tests through scripts/test (which sets up the venv)",
        py.display()
    );
    py
}

/// The repository root (for python/koma).
pub fn repo_root() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
        .join("../..")
}
