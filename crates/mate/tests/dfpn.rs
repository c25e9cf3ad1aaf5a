//! df-pn against hand-checked positions and against the exact short-mate search: every mate it
//! returns is a verified line; within the same depth it finds a mate whenever the exact search
//! does; proofs of no mate, depth-limited answers and limits are told apart.

use koma_mate::exact::{MateResult, MateSearch};
use koma_mate::problems::random_problems;
use koma_mate::{verify_mate_line, DfPn, Limits, Outcome};
use koma_shogi::{Color, Move, PieceType, Position};

fn solve(sfen: &str, max_plies: u32) -> Outcome {
    let pos = Position::from_sfen(sfen).unwrap();
    DfPn::new(4).search(&pos, &Limits { max_plies, max_nodes: 2_000_000, ..Limits::default() })
}

fn usi(line: &[Move]) -> Vec<String> {
    line.iter().map(|m| m.to_usi()).collect()
}

#[test]
fn mates_in_one_and_three() {
    assert_eq!(solve("4k4/9/4P4/9/9/9/9/9/4K4 b G 1", 31), Outcome::Mate(vec![Move::from_usi("G*5b").unwrap()]));
    // A mate in three from random play (cshogi's mate_move(3) agrees; there is no mate in one).
    let three = "2s1k3p/l2p2s1l/g1+B1p+P2n/pG2R1p1P/P6p1/Np2Ppg1L/+n2P2l2/R2K3P1/1NP1S2S1 b Pbg2p 157";
    let Outcome::Mate(line) = solve(three, 31) else { panic!("no mate found") };
    assert!(line.len() >= 3, "{:?}", usi(&line));
    assert_eq!(verify_mate_line(&Position::from_sfen(three).unwrap(), &line), Ok(()));
    // Within one ply there is none, and that is no proof.
    assert_eq!(solve(three, 1), Outcome::NoMateWithin);
}

#[test]
fn pawn_drop_mate_is_no_mate() {
    // Only P*1b would mate, and a pawn-drop mate is illegal (cshogi: no mate, 20 nodes).
    assert_eq!(solve("7lk/7p1/8G/9/9/9/9/9/4K4 b P 1", 31), Outcome::NoMate);
    // With a gold in hand instead the drop mates.
    assert_eq!(solve("7lk/7p1/8G/9/9/9/9/9/4K4 b G 1", 31), Outcome::Mate(vec![Move::from_usi("G*1b").unwrap()]));
}

#[test]
fn no_check_is_a_proof_and_limits_are_unknown() {
    assert_eq!(solve(koma_shogi::STARTPOS_SFEN, 31), Outcome::NoMate);
    let pos = Position::from_sfen("8k/9/9/9/9/9/9/9/K8 b 2G2S2N 1").unwrap();
    let mut solver = DfPn::new(1);
    assert_eq!(solver.search(&pos, &Limits { max_nodes: 10, ..Limits::default() }), Outcome::Unknown);
    assert!(solver.nodes() <= 10);
    // The stop flag and the deadline are read every 1024 descents.
    let stop = std::sync::atomic::AtomicBool::new(true);
    solver.search(&pos, &Limits { stop: Some(&stop), ..Limits::default() });
    assert!(solver.nodes() <= 1024, "{}", solver.nodes());
    solver.search(&pos, &Limits { deadline: Some(std::time::Instant::now()), ..Limits::default() });
    assert!(solver.nodes() <= 1024, "{}", solver.nodes());
}

/// Every mate in three (and one) is proved by the look-ahead of the root alone, without a node:
/// df-pn counts descents, and cshogi's df-pn proves these without one too.
#[test]
fn mates_in_three_cost_no_node() {
    let mut solver = DfPn::new(4);
    let mut threes = 0;
    for pos in random_problems(1000, 0x5eed_0003) {
        let MateResult::Mate(shortest) = MateSearch::new(200_000, None, None).run(&mut pos.clone(), 3) else {
            continue;
        };
        let outcome = solver.search(&pos, &Limits { max_plies: 31, ..Limits::default() });
        let sfen = pos.to_sfen();
        assert!(matches!(&outcome, Outcome::Mate(line) if line.len() <= 3), "{sfen}: {outcome:?}");
        assert_eq!(solver.nodes(), 0, "{sfen}: a mate in {} took nodes", shortest.len());
        threes += usize::from(shortest.len() == 3);
    }
    assert!(threes >= 10, "only {threes} mates in three");
}

/// The game before the root does not hide a mate that repeats nothing.
#[test]
fn a_mate_after_a_repetition_in_the_game() {
    let mut pos = Position::from_sfen("4k4/9/4P4/9/9/9/9/9/4K4 b G 1").unwrap();
    for m in ["5i4i", "5a4a", "4i5i", "4a5a"] {
        pos.do_move(Move::from_usi(m).unwrap());
    }
    let outcome = DfPn::new(1).search(&pos, &Limits::default());
    assert_eq!(outcome, Outcome::Mate(vec![Move::from_usi("G*5b").unwrap()]));
}

/// Within the same depth, df-pn finds a mate whenever the exact search does and every line it
/// returns is a verified mate. A line longer than the depth (a proof met through a transposition)
/// is checked again with bounded proofs: those find a line within the depth exactly when the exact
/// search found a mate there. Where df-pn proves that no mate exists the exact search finds none
/// two plies deeper either.
#[test]
fn agrees_with_the_exact_search_on_random_positions() {
    const PLIES: u32 = 7;
    let mut solver = DfPn::new(16);
    let (mut mates, mut others, mut skipped, mut proofs, mut longer) = (0, 0, 0, 0, 0);
    for (i, pos) in random_problems(120, 0x5eed_0001).into_iter().enumerate() {
        let exact = MateSearch::new(1_000_000, None, None).run(&mut pos.clone(), PLIES);
        if exact == MateResult::Aborted {
            skipped += 1;
            continue;
        }
        let limits = Limits { max_plies: PLIES, max_nodes: 5_000_000, ..Limits::default() };
        let outcome = solver.search(&pos, &limits);
        let sfen = pos.to_sfen();
        match (&exact, &outcome) {
            (MateResult::Mate(_), Outcome::Mate(line)) => {
                assert_eq!(verify_mate_line(&pos, line), Ok(()), "position {i} {sfen}: {:?}", usi(line));
                if line.len() as u32 > PLIES {
                    // Proved through a transposition: bounded proofs find one that fits.
                    let within = solver.search(&pos, &Limits { proofs_within_depth: true, ..limits });
                    assert!(
                        matches!(&within, Outcome::Mate(l) if l.len() as u32 <= PLIES),
                        "position {i} {sfen}: {within:?}"
                    );
                    longer += 1;
                }
                mates += 1;
            }
            (MateResult::NoMateWithin, Outcome::Mate(line)) => {
                assert!(line.len() as u32 > PLIES, "position {i} {sfen}: {:?}", usi(line));
                assert_eq!(verify_mate_line(&pos, line), Ok(()), "position {i} {sfen}: {:?}", usi(line));
                let within = solver.search(&pos, &Limits { proofs_within_depth: true, ..limits });
                assert_eq!(within, Outcome::NoMateWithin, "position {i} {sfen}");
                longer += 1;
            }
            (MateResult::NoMate | MateResult::NoMateWithin, Outcome::NoMate | Outcome::NoMateWithin) => others += 1,
            _ => panic!("position {i} {sfen}: exact {exact:?}, df-pn {outcome:?}"),
        }
        // A proof of no mate holds deeper too.
        if outcome == Outcome::NoMate {
            let deeper = MateSearch::new(1_000_000, None, None).run(&mut pos.clone(), PLIES + 2);
            assert!(
                !matches!(deeper, MateResult::Mate(_)),
                "position {i} {sfen}: df-pn proved no mate, exact: {deeper:?}"
            );
            proofs += 1;
        }
    }
    assert!(
        mates >= 20 && others >= 20 && proofs >= 5,
        "{mates} mates, {others} without ({proofs} proofs), {longer} longer mates, {skipped} skipped"
    );
}

/// Hand dominance, checked on the positions themselves: a mate stays a mate when a piece moves
/// from the defender's hand to the attacker's, and no mate stays no mate the other way round.
#[test]
fn more_pieces_in_hand_never_hurt_the_attacker() {
    let mut solver = DfPn::new(16);
    let limits = Limits { max_plies: 9, max_nodes: 2_000_000, ..Limits::default() };
    let mut checked = 0;
    for pos in random_problems(120, 0x5eed_0002) {
        let attacker = pos.side_to_move();
        let outcome = solver.search(&pos, &limits);
        let (from, to) = match outcome {
            // A mate longer than the depth came through a transposition the other search may
            // not meet.
            Outcome::Mate(ref line) if line.len() as u32 > limits.max_plies => continue,
            Outcome::Mate(_) => (!attacker, attacker),
            Outcome::NoMate => (attacker, !attacker),
            _ => continue,
        };
        let Some(pt) = PieceType::HAND.into_iter().find(|&pt| pos.hand(from).count(pt) > 0) else { continue };
        let moved = move_in_hand(&pos, from, to, pt);
        let again = solver.search(&moved, &limits);
        match outcome {
            Outcome::Mate(_) => assert!(matches!(again, Outcome::Mate(_)), "{} → {again:?}", moved.to_sfen()),
            _ => assert!(matches!(again, Outcome::NoMate | Outcome::NoMateWithin), "{} → {again:?}", moved.to_sfen()),
        }
        checked += 1;
    }
    assert!(checked >= 20, "{checked}");
}

/// `pos` with one `pt` moved from `from`'s hand to `to`'s (through SFEN).
fn move_in_hand(pos: &Position, from: Color, to: Color, pt: PieceType) -> Position {
    let mut hands = [pos.hand(Color::Black), pos.hand(Color::White)];
    hands[from.index()].remove(pt);
    hands[to.index()].add(pt);
    let sfen = pos.to_sfen();
    let fields: Vec<&str> = sfen.split(' ').collect();
    let mut hand_text = String::new();
    for (color, hand) in [(Color::Black, hands[0]), (Color::White, hands[1])] {
        for pt in PieceType::HAND_WRITE_ORDER {
            let n = hand.count(pt);
            if n == 0 {
                continue;
            }
            if n > 1 {
                hand_text.push_str(&n.to_string());
            }
            let letter = pt.sfen_letter();
            hand_text.push(if color == Color::Black {
                letter.to_ascii_uppercase()
            } else {
                letter.to_ascii_lowercase()
            });
        }
    }
    if hand_text.is_empty() {
        hand_text.push('-');
    }
    Position::from_sfen(&format!("{} {} {} {}", fields[0], fields[1], hand_text, fields[3])).unwrap()
}
