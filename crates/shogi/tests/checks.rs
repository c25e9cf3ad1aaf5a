//! The mate solvers' check generator and escape test against the one-move-at-a-time versions,
//! over random games that favour captures and drops (so hands fill and the king gets exposed):
//! `generate_checks` gives exactly `checking_moves`, `king_escapes_with` exactly
//! `king_escapes_after`, `mate_among` finds a mate exactly where `mate_in_one` does, and
//! `board_hash_after` and `hash_and_hand_after` are the hashes and hand after the move, and `generate_legal_fast` gives the legal
//! moves.

use koma_shogi::{Handicap, Move, MoveList, Position};
use proptest::prelude::*;

mod common;
use common::Rng;

/// A move favouring checks, captures and drops.
fn pick(pos: &Position, rng: &mut Rng) -> Option<Move> {
    let moves = pos.legal_moves();
    if moves.is_empty() {
        return None;
    }
    if rng.below(4) == 0 {
        let checks = pos.checking_moves();
        if !checks.is_empty() {
            return Some(checks[rng.below(checks.len())]);
        }
    }
    let interesting: Vec<Move> =
        moves.iter().copied().filter(|m| m.is_drop() || pos.piece_at(m.to()).is_some()).collect();
    if !interesting.is_empty() && rng.below(3) > 0 {
        return Some(interesting[rng.below(interesting.len())]);
    }
    Some(moves[rng.below(moves.len())])
}

fn check_position(pos: &mut Position) {
    let sfen = pos.to_sfen();
    let mut expected = pos.checking_moves();
    let mut list = MoveList::new();
    pos.generate_checks(&mut list);
    let mut got: Vec<Move> = list.to_vec();
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "generate_checks in {sfen}");
    let mut fast = MoveList::new();
    pos.generate_legal_fast(&mut fast);
    let (mut fast, mut legal) = (fast.to_vec(), pos.legal_moves().to_vec());
    fast.sort();
    legal.sort();
    assert_eq!(fast, legal, "generate_legal_fast in {sfen}");
    let board_hash = pos.board_hash();
    for &m in pos.legal_moves().iter() {
        let ahead = pos.board_hash_after(board_hash, m);
        let (hash, hand) = pos.hash_and_hand_after(m);
        let mover = pos.side_to_move();
        pos.do_move(m);
        assert_eq!(ahead, pos.board_hash(), "board_hash_after({m}) in {sfen}");
        assert_eq!((hash, hand), (pos.hash(), pos.hand(mover)), "hash_and_hand_after({m}) in {sfen}");
        pos.undo_move();
    }
    let escapes = pos.king_escapes();
    for &m in &expected {
        assert_eq!(pos.king_escapes_with(m, &escapes), pos.king_escapes_after(m), "king_escapes_with({m}) in {sfen}");
    }
    let found = pos.mate_among(expected.iter().copied());
    assert_eq!(found.is_some(), pos.mate_in_one().is_some(), "mate_among in {sfen}");
    let (fast, any) = pos.mate_in_one_or_checks();
    assert_eq!((fast.is_some(), any), (found.is_some(), !expected.is_empty()), "mate_in_one_or_checks in {sfen}");
    if let Some(m) = fast {
        assert!(expected.contains(&m), "{m} is no check in {sfen}");
        pos.do_move(m);
        assert!(!pos.has_legal_move(), "{m} does not mate in {sfen}");
        pos.undo_move();
    }
    if let Some(m) = found {
        pos.do_move(m);
        assert!(pos.in_check() && !pos.has_legal_move(), "{m} does not mate in {sfen}");
        pos.undo_move();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_fast_checks_and_escapes_agree_with_the_plain_ones(seed in 1u64..u64::MAX, start in 0usize..Handicap::ALL.len()) {
        let mut rng = Rng(seed);
        let mut pos = Handicap::ALL[start].position();
        for _ in 0..200 {
            check_position(&mut pos);
            let Some(m) = pick(&pos, &mut rng) else { break };
            pos.do_move(m);
        }
    }
}

/// Hand-made corners: discovered checks (a piece and the king uncovering), a pinned piece that may
/// only check along its pin, checks by promotion only, and drops where a pawn would mate.
#[test]
fn corner_cases() {
    for sfen in [
        // The silver on 5c uncovers the rook on 5i; the king on 5e shields the lance.
        "4k4/9/4S4/9/9/9/9/9/4R3K b - 1",
        "4k4/9/9/9/4K4/9/9/9/4L4 w - 1",
        // A pinned gold, a bishop that checks only as a horse, a pawn drop that would mate.
        "3k5/3l5/9/9/3G5/9/9/9/3K1B3 w - 1",
        "k8/2+P6/1P7/9/9/9/9/9/4K4 b P 1",
        "7lk/7p1/8G/9/9/9/9/9/4K4 b P 1",
        "4k4/9/4P4/9/9/9/9/9/4K4 b 2GSNLP 1",
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
    ] {
        let mut pos = Position::from_sfen(sfen).unwrap();
        check_position(&mut pos);
    }
}
