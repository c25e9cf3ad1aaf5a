//! Property tests over random games: do/undo restores the position and its hash exactly, the
//! incremental hash equals a from-scratch hash, the board hash leaves the hands out, SFEN round-trips, and the single-move legality
//! check agrees with the move generator, the capture generator gives exactly the legal captures, and the left–right reflection is a symmetry of the rules
//! (mirrored legal moves, check, status and mate in one).

use koma_shogi::{Color, Handicap, Move, Position};
use proptest::prelude::*;

mod common;
use common::Rng;

/// Picks a move favouring captures and drops, so hands fill and unusual positions arise.
fn pick(pos: &Position, rng: &mut Rng) -> Option<Move> {
    let moves = pos.legal_moves();
    if moves.is_empty() {
        return None;
    }
    let interesting: Vec<Move> =
        moves.iter().copied().filter(|m| m.is_drop() || pos.piece_at(m.to()).is_some()).collect();
    if !interesting.is_empty() && rng.below(3) > 0 {
        return Some(interesting[rng.below(interesting.len())]);
    }
    Some(moves[rng.below(moves.len())])
}

/// The mirrored position has exactly the mirrored legal moves and the same check, status and
/// mate-in-one answer; mirroring twice gives the position back.
fn check_mirror(pos: &Position) {
    let sfen = pos.to_sfen();
    let mut mirrored = pos.mirror();
    assert_eq!(mirrored.mirror().to_sfen(), sfen);
    let mut expected: Vec<Move> = pos.legal_moves().iter().map(|m| m.mirror()).collect();
    let mut got: Vec<Move> = mirrored.legal_moves().iter().copied().collect();
    expected.sort();
    got.sort();
    assert_eq!(got, expected, "legal moves of the mirror of {sfen}");
    assert_eq!(mirrored.in_check(), pos.in_check(), "check in the mirror of {sfen}");
    // Without history on both sides: repetitions are not carried over.
    let mut original = pos.without_history();
    let rules = koma_shogi::GameRules::default();
    assert_eq!(mirrored.status(&rules), original.status(&rules), "status of the mirror of {sfen}");
    // Either side may find another of several mates first: compare whether there is one.
    assert_eq!(
        mirrored.mate_in_one().is_some(),
        original.mate_in_one().is_some(),
        "mate in one in the mirror of {sfen}"
    );
}

fn check_position(pos: &mut Position, rng: &mut Rng) {
    check_mirror(pos);
    assert_eq!(pos.hash(), pos.hash_from_scratch(), "incremental hash differs at {}", pos.to_sfen());
    let sfen = pos.to_sfen();
    let reparsed = Position::from_sfen(&sfen).expect("our SFEN parses");
    assert_eq!(reparsed.to_sfen(), sfen);
    assert_eq!(reparsed.hash(), pos.hash(), "hash depends on history at {sfen}");
    // The board hash leaves the hands out: the same board without hands has it too.
    let fields: Vec<&str> = sfen.split(' ').collect();
    let handless = Position::from_sfen(&format!("{} {} - {}", fields[0], fields[1], fields[3])).unwrap();
    assert_eq!(handless.board_hash(), pos.board_hash(), "board hash depends on the hands at {sfen}");
    assert_eq!(handless.board_hash(), handless.hash());
    let empty_hands = Color::ALL.iter().all(|&c| pos.hand(c).is_empty());
    assert_eq!(pos.board_hash() == pos.hash(), empty_hands, "{sfen}");
    let before = pos.clone();
    let moves = pos.legal_moves();
    for &m in moves.iter() {
        assert!(pos.is_legal(m), "generated move {m} is not is_legal in {sfen}");
        let gives = pos.gives_check(m);
        pos.do_move(m);
        assert_eq!(pos.in_check(), gives, "gives_check({m}) wrong in {sfen}");
        assert_eq!(pos.hash(), pos.hash_from_scratch(), "hash after {m} in {sfen}");
        pos.undo_move();
        assert_eq!(*pos, before, "undo of {m} in {sfen}");
        assert_eq!(pos.hash(), before.hash(), "hash after undo of {m} in {sfen}");
    }
    // The check generator gives exactly the legal moves after which the opponent is in check.
    let mut checks = pos.checking_moves();
    let mut expected: Vec<Move> = moves
        .iter()
        .copied()
        .filter(|&m| {
            pos.do_move(m);
            let check = pos.in_check();
            pos.undo_move();
            check
        })
        .collect();
    checks.sort();
    expected.sort();
    assert_eq!(checks, expected, "checking_moves in {sfen}");
    // The capture generator gives exactly the legal captures out of check, every legal move in it.
    let mut captures = koma_shogi::MoveList::new();
    pos.generate_captures(&mut captures);
    let mut captures: Vec<Move> = captures.iter().copied().collect();
    let mut expected: Vec<Move> =
        moves.iter().copied().filter(|&m| pos.in_check() || (!m.is_drop() && pos.piece_at(m.to()).is_some())).collect();
    captures.sort();
    expected.sort();
    assert_eq!(captures, expected, "generate_captures in {sfen}");
    // The mate-in-one filter: exactly whether the checked king has a move of its own.
    for &m in &checks {
        let escapes = pos.king_escapes_after(m);
        pos.do_move(m);
        let ksq = pos.king_square(pos.side_to_move());
        let king_moves = pos.legal_moves().iter().any(|r| !r.is_drop() && r.from() == ksq);
        pos.undo_move();
        assert_eq!(escapes, king_moves, "king_escapes_after({m}) in {sfen}");
    }
    // Random move codes: is_legal must agree with membership in the generated list.
    for _ in 0..64 {
        if let Some(m) = Move::from_u16(rng.next() as u16) {
            assert_eq!(pos.is_legal(m), moves.contains(&m), "is_legal({m}) disagrees with movegen in {sfen}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_games_keep_every_invariant(seed in 1u64..u64::MAX, start in 0usize..Handicap::ALL.len()) {
        let mut rng = Rng(seed);
        let mut pos = Handicap::ALL[start].position();
        let root = pos.to_sfen();
        let mut played = 0;
        for _ in 0..160 {
            check_position(&mut pos, &mut rng);
            let Some(m) = pick(&pos, &mut rng) else { break };
            pos.do_move(m);
            played += 1;
        }
        for _ in 0..played {
            pos.undo_move();
        }
        prop_assert_eq!(pos.to_sfen(), root);
    }
}
