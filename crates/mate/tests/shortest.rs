//! `DfPn::search_shortest` (what `go mate` answers): the shortest mate with its main line, checked
//! against the exact search on short mates and against lengths from an independent solver on
//! longer ones.

use koma_mate::exact::{MateResult, MateSearch};
use koma_mate::problems::random_problems;
use koma_mate::{verify_mate_line, DfPn, Limits, Outcome, Shortest};
use koma_shogi::{Move, Position};

fn shortest(pos: &Position, nodes: u64, more_nodes: u64) -> (Shortest, u64) {
    let mut solver = DfPn::new(16);
    let limits = Limits { max_plies: 1023, max_nodes: nodes, ..Limits::default() };
    let answer = solver.search_shortest(pos, &limits, more_nodes, |_, _| {});
    (answer, solver.nodes())
}

fn line(answer: &Shortest) -> &[Move] {
    match &answer.outcome {
        Outcome::Mate(line) => line,
        other => panic!("no mate: {other:?}"),
    }
}

/// Mates of 11 to 15 plies where df-pn's first line is longer than the shortest mate, or its
/// defence shorter than the longest (the line `go mate` gave before). Their lengths come from an
/// independent solver (python/tests/test_mate_oracle.py: an exhaustive search over cshogi's moves).
const LONGER_LINES: [(&str, usize); 3] = [
    // df-pn's first line: 29 plies.
    ("1+Ppgsp1nl/2G1s4/+P3sb1pp/nL1ppkP2/p2P1gN2/1pP2PgN1/P3P1R1P/L1+p3K2/4S3L w Br 166", 13),
    // df-pn's first line 25 plies; the shortening of before stopped at a 13-ply line (a defence
    // shorter than the longest).
    ("2G1g4/1+L1s1g2l/p3p1kBb/P2p1p1Pp/2P1PP3/3P4S/1PSNNR2P/2R4pl/3K2+sNL b G4Pn 129", 15),
    // The shortening of before gave 13 plies.
    ("G1R2p+N2/g2k3+PP/p2p1+Ps1l/lp7/2P2G1sp/SPpP2p2/P1N1pRN1g/L+l1K1N1+p1/2B4+p1 b Sbp 187", 15),
];

#[test]
fn the_shortest_mate_and_its_main_line() {
    for (sfen, plies) in LONGER_LINES {
        let pos = Position::from_sfen(sfen).unwrap();
        let (answer, _) = shortest(&pos, 5_000_000, u64::MAX);
        let line = line(&answer);
        assert!(answer.proved, "{sfen}");
        assert_eq!(line.len(), plies, "{sfen}: {:?}", line.iter().map(|m| m.to_usi()).collect::<Vec<_>>());
        assert_eq!(verify_mate_line(&pos, line), Ok(()), "{sfen}");
        // Every defender move of the line resists as long as possible: after it, no mate comes
        // two plies sooner than the line's.
        let mut walk = pos.clone();
        for (i, &m) in line.iter().enumerate() {
            walk.do_move(m);
            let left = (line.len() - i - 1) as u32;
            if i % 2 == 1 && left >= 3 {
                let sooner = Limits { max_plies: left - 2, proofs_within_depth: true, ..Limits::default() };
                assert_eq!(DfPn::new(16).search(&walk, &sooner), Outcome::NoMateWithin, "{sfen}: after move {}", i + 1);
            }
        }
    }
}

/// On random positions with a mate, the length of the exact search's line (the attacker mating
/// as fast as it can, the defender resisting as long as it can) wherever it finds a mate within 9
/// plies, and longer lines only where it finds none.
#[test]
fn agrees_with_the_exact_search_on_short_mates() {
    let (mut lengths, mut unproved) = (std::collections::BTreeMap::new(), 0);
    for pos in random_problems(150, 0x5eed_0004) {
        // A long mate may take more nodes to prove the shortest.
        let (answer, _) = shortest(&pos, 50_000, 200_000);
        let Outcome::Mate(line) = &answer.outcome else { continue };
        let sfen = pos.to_sfen();
        assert_eq!(verify_mate_line(&pos, line), Ok(()), "{sfen}");
        match MateSearch::new(1_000_000, None, None).run(&mut pos.clone(), 9) {
            MateResult::Mate(exact) if answer.proved => assert_eq!(line.len(), exact.len(), "{sfen}"),
            MateResult::Mate(exact) => assert!(line.len() >= exact.len(), "{sfen}"),
            MateResult::NoMateWithin => assert!(line.len() > 9, "{sfen}"),
            // Too many checks for the exact search's nodes.
            MateResult::Aborted => continue,
            MateResult::NoMate => panic!("{sfen}: exact: no mate, df-pn {}", line.len()),
        }
        unproved += usize::from(!answer.proved);
        *lengths.entry(line.len()).or_insert(0) += 1;
    }
    let at_least = |n: usize| lengths.range(n..).map(|(_, c)| c).sum::<usize>();
    let mates = at_least(1);
    assert!(
        at_least(5) >= 15 && at_least(11) >= 3 && unproved * 5 <= mates,
        "{unproved} unproved, mates by length: {lengths:?}"
    );
}

/// Without nodes for the shortening, the answer is the first proof's line, verified, and not
/// claimed the shortest.
#[test]
fn a_limit_keeps_the_first_line() {
    let pos = Position::from_sfen(LONGER_LINES[0].0).unwrap();
    let (answer, _) = shortest(&pos, 5_000_000, 0);
    assert!(!answer.proved);
    assert!(line(&answer).len() > LONGER_LINES[0].1);
    assert_eq!(verify_mate_line(&pos, line(&answer)), Ok(()));
    // No mate: the plain answer.
    let (answer, _) = shortest(&Position::startpos(), 5_000_000, u64::MAX);
    assert_eq!(answer, Shortest { outcome: Outcome::NoMate, proved: false });
}
