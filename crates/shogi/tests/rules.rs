//! Targeted rule tests through koma-shogi's public API: every rule with hand-built positions, each
//! checked for both colours (the Black case is written out; the White case is the same position
//! turned 180 degrees), plus is_legal / gives_check / do-undo consistency on random positions.
//!
//! Expected move sets were worked out by hand (and cross-checked against an independent
//! implementation); none is derived from koma itself.

use std::collections::BTreeSet;

use koma_shogi::rules::{GameRules, ImpasseRule, MaxMovesRule, Status};
use koma_shogi::usi::parse_position;
use koma_shogi::{Color, Handicap, Move, PieceType, Position, SfenError, Square};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn pos(sfen: &str) -> Position {
    Position::from_sfen(sfen).unwrap_or_else(|e| panic!("bad test SFEN {sfen}: {e}"))
}

fn mv(usi: &str) -> Move {
    Move::from_usi(usi).unwrap_or_else(|| panic!("bad test move {usi}"))
}

fn legal(p: &Position) -> BTreeSet<String> {
    p.legal_moves().iter().map(|m| m.to_usi()).collect()
}

/// Whether `usi` is legal, insisting that `legal_moves` and `is_legal` agree about it.
fn is_legal(p: &Position, usi: &str) -> bool {
    let m = mv(usi);
    let in_list = p.legal_moves().contains(&m);
    assert_eq!(p.is_legal(m), in_list, "is_legal({usi}) disagrees with legal_moves in {p:?}");
    in_list
}

/// The moves, each passed through `r` (the identity, or the rotation for White).
fn rset(r: &dyn Fn(&str) -> String, moves: &[&str]) -> BTreeSet<String> {
    moves.iter().map(|m| r(m)).collect()
}

/// The square seen from the other side.
fn rot_square(sq: &str) -> String {
    let b = sq.as_bytes();
    format!("{}{}", (b'9' - b[0] + b'1') as char, (b'i' - b[1] + b'a') as char)
}

/// A USI move seen from the other side.
fn rot_move(m: &str) -> String {
    if m.as_bytes()[1] == b'*' {
        format!("{}{}", &m[..2], rot_square(&m[2..4]))
    } else {
        format!("{}{}{}", rot_square(&m[0..2]), rot_square(&m[2..4]), &m[4..])
    }
}

/// The board turned 180 degrees and the colours swapped: the same position for the other side.
/// Written on the text, independently of koma's SFEN code.
fn rot_sfen(sfen: &str) -> String {
    let f: Vec<&str> = sfen.split(' ').collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for row in f[0].split('/') {
        let mut cells = Vec::new();
        let mut plus = false;
        for c in row.chars() {
            if let Some(d) = c.to_digit(10) {
                cells.extend((0..d).map(|_| String::new()));
            } else if c == '+' {
                plus = true;
            } else {
                let swapped = if c.is_ascii_uppercase() { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() };
                cells.push(format!("{}{swapped}", if plus { "+" } else { "" }));
                plus = false;
            }
        }
        rows.push(cells);
    }
    let mut out_rows = Vec::new();
    for row in rows.iter().rev() {
        let mut s = String::new();
        let mut empty = 0;
        for cell in row.iter().rev() {
            if cell.is_empty() {
                empty += 1;
            } else {
                if empty > 0 {
                    s += &empty.to_string();
                    empty = 0;
                }
                s += cell;
            }
        }
        if empty > 0 {
            s += &empty.to_string();
        }
        out_rows.push(s);
    }
    let side = if f[1] == "b" { "w" } else { "b" };
    // Hands: swap the case; keep Black's part first.
    let hands = if f[2] == "-" {
        "-".to_string()
    } else {
        let mut black = String::new();
        let mut white = String::new();
        let mut digits = String::new();
        for c in f[2].chars() {
            if c.is_ascii_digit() {
                digits.push(c);
            } else {
                let target = if c.is_ascii_uppercase() { &mut white } else { &mut black };
                target.push_str(&digits);
                target.push(if c.is_ascii_uppercase() { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() });
                digits.clear();
            }
        }
        black + &white
    };
    let mut out = format!("{} {side} {hands}", out_rows.join("/"));
    if let Some(n) = f.get(3) {
        out += &format!(" {n}");
    }
    out
}

/// Runs `check` on the position and on its rotation (White's version), with moves rotated too.
fn both_colours(sfen: &str, check: impl Fn(&Position, &dyn Fn(&str) -> String)) {
    let black = pos(sfen);
    check(&black, &|m: &str| m.to_string());
    let white = pos(&rot_sfen(sfen));
    check(&white, &|m: &str| rot_move(m));
}

fn rules(impasse: ImpasseRule) -> GameRules {
    GameRules { impasse, ..GameRules::default() }
}

fn play(p: &mut Position, moves: &[&str]) {
    for m in moves {
        let m = mv(m);
        assert!(p.is_legal(m), "test bug: {m} illegal in {p:?}");
        p.do_move(m);
    }
}

#[test]
fn rotation_helper_is_sound() {
    assert_eq!(rot_square("1a"), "9i");
    assert_eq!(rot_square("7c"), "3g");
    assert_eq!(rot_move("P*9b"), "P*1h");
    assert_eq!(rot_move("8h2b+"), "2b8h+");
    let start = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1";
    assert_eq!(rot_sfen(start), "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1");
    assert_eq!(rot_sfen("kn7/9/1+G7/9/9/9/9/9/4K4 b 2Pr 5"), "4k4/9/9/9/9/9/7+g1/9/7NK w R2p 5");
    assert_eq!(rot_sfen(&rot_sfen("kn7/9/1+G7/9/9/9/9/9/4K4 b 2Pr 5")), "kn7/9/1+G7/9/9/9/9/9/4K4 b 2Pr 5");
}

// ---------------------------------------------------------------------------------------------
// Drops: uchifuzume, nifu, dead squares
// ---------------------------------------------------------------------------------------------

#[test]
fn pawn_drop_mate_is_illegal() {
    // White king 9a, knight 8a; Black gold 8c defends 9b and covers 8b.
    both_colours("kn7/9/1G7/9/9/9/9/9/4K4 b P 1", |p, r| {
        assert!(!is_legal(p, &r("P*9b")));
        assert!(is_legal(p, &r("P*9c")), "other pawn drops stay legal");
    });
    // Black silver 8c covers 9b and 8b the same way.
    both_colours("kn7/9/1S7/9/9/9/9/9/4K4 b P 1", |p, r| assert!(!is_legal(p, &r("P*9b"))));
    // The only defender that could take the pawn (silver 8a) is pinned by the rook on 5a.
    both_colours("ks3R3/9/1G7/9/9/9/9/9/4K4 b P 1", |p, r| assert!(!is_legal(p, &r("P*9b"))));
}

#[test]
fn pawn_drop_check_that_does_not_mate_is_legal() {
    // The king escapes to 8a.
    both_colours("k8/9/1G7/9/9/9/9/9/4K4 b P 1", |p, r| assert!(is_legal(p, &r("P*9b"))));
    // The king takes the undefended pawn (silver 7c covers only 8b).
    both_colours("kn7/9/2S6/9/9/9/9/9/4K4 b P 1", |p, r| assert!(is_legal(p, &r("P*9b"))));
    // The silver on 8a takes it.
    both_colours("ks7/9/1G7/9/9/9/9/9/4K4 b P 1", |p, r| assert!(is_legal(p, &r("P*9b"))));
    // The gold on 9c, pinned along the file by the rook on 9e, takes it along the pin line.
    both_colours("k8/2G6/g8/1N7/R8/9/9/9/4K4 b P 1", |p, r| {
        assert!(is_legal(p, &r("P*9b")));
        let mut q = p.clone();
        q.do_move(mv(&r("P*9b")));
        assert!(q.in_check());
        assert_eq!(legal(&q), rset(r, &["9c9b"]), "only the pinned gold's capture answers the check");
    });
}

#[test]
fn other_mates_by_pawn_or_drop_are_legal() {
    // A pawn moved from the board may mate (and may promote on rank b).
    both_colours("kn7/9/PG7/9/9/9/9/9/4K4 b - 1", |p, r| {
        for m in ["9c9b", "9c9b+"] {
            assert!(is_legal(p, &r(m)));
            let mut q = p.clone();
            q.do_move(mv(&r(m)));
            assert_eq!(q.status(&GameRules::default()), Status::Checkmate, "{m}");
            assert!(legal(&q).is_empty());
        }
        let mut q = p.clone();
        assert!(q.mate_in_one().is_some());
    });
    // Lance and gold drops that mate are legal.
    both_colours("kn7/9/1G7/9/9/9/9/9/4K4 b LG 1", |p, r| {
        for m in ["L*9b", "G*9b"] {
            assert!(is_legal(p, &r(m)));
            assert!(p.gives_check(mv(&r(m))));
            let mut q = p.clone();
            q.do_move(mv(&r(m)));
            assert_eq!(q.status(&GameRules::default()), Status::Checkmate, "{m}");
        }
    });
    // With only a pawn in hand, the pawn-drop mate is not a mate in one.
    let mut p = pos("kn7/9/1G7/9/9/9/9/9/4K4 b P 1");
    assert_eq!(p.mate_in_one(), None);
}

#[test]
fn nifu() {
    both_colours("4k4/9/9/9/9/9/4P4/9/4K4 b P 1", |p, r| {
        assert!(!is_legal(p, &r("P*5e")), "own pawn on the 5 file");
        assert!(!is_legal(p, &r("P*5b")));
        assert!(is_legal(p, &r("P*4e")));
        let drops = legal(p).iter().filter(|m| m.starts_with("P*")).count();
        // 78 empty squares, minus the 8 empty on the last rank, minus the 6 other empty squares of file 5.
        assert_eq!(drops, 78 - 8 - 6);
    });
    // A tokin on the file does not count; neither does an enemy pawn.
    both_colours("4k4/9/9/9/9/9/4+P4/9/4K4 b P 1", |p, r| assert!(is_legal(p, &r("P*5e"))));
    both_colours("4k4/9/4p4/9/9/9/9/9/4K4 b P 1", |p, r| assert!(is_legal(p, &r("P*5e"))));
}

#[test]
fn dead_squares_for_drops() {
    both_colours("4k4/9/9/9/9/9/9/9/4K4 b PLN 1", |p, r| {
        for m in ["P*1a", "L*1a", "N*1a", "N*1b", "P*9a", "L*9a", "N*9b"] {
            assert!(!is_legal(p, &r(m)), "{m}");
        }
        for m in ["P*1b", "L*1b", "N*1c", "P*1i", "L*1i", "N*1i"] {
            assert!(is_legal(p, &r(m)), "{m}");
        }
        let moves = legal(p);
        let count = |prefix: &str| moves.iter().filter(|m| m.starts_with(prefix)).count();
        assert_eq!(count("P*"), 79 - 8);
        assert_eq!(count("L*"), 79 - 8);
        assert_eq!(count("N*"), 79 - 8 - 9);
    });
}

// ---------------------------------------------------------------------------------------------
// Promotion
// ---------------------------------------------------------------------------------------------

#[test]
fn forced_and_optional_promotion() {
    both_colours("4k4/P8/L8/7N1/N8/9/9/9/4K4 b - 1", |p, r| {
        // Pawn and lance to the last rank must promote.
        assert!(is_legal(p, &r("9b9a+")) && !is_legal(p, &r("9b9a")));
        // Knight 2d to rank b must promote; knight 9e to rank c may choose.
        assert!(is_legal(p, &r("2d1b+")) && !is_legal(p, &r("2d1b")));
        assert!(is_legal(p, &r("2d3b+")) && !is_legal(p, &r("2d3b")));
        assert!(is_legal(p, &r("9e8c+")) && is_legal(p, &r("9e8c")));
    });
    both_colours("4k4/9/L8/9/9/9/9/9/4K4 b - 1", |p, r| {
        assert!(is_legal(p, &r("9c9a+")) && !is_legal(p, &r("9c9a")));
        assert!(is_legal(p, &r("9c9b+")) && is_legal(p, &r("9c9b")));
    });
    // Pawn into the zone: optional until the last rank. Outside the zone: no promotion.
    both_colours("4k4/9/9/4P4/9/3P5/9/9/4K4 b - 1", |p, r| {
        assert!(is_legal(p, &r("5d5c+")) && is_legal(p, &r("5d5c")));
        assert!(!is_legal(p, &r("6f6e+")) && is_legal(p, &r("6f6e")));
    });
}

#[test]
fn promotion_when_leaving_the_zone() {
    // Silver 5c, bishop 2b, rook 8c, gold 9b; all Black.
    both_colours("4k4/G6B1/1R2S4/9/9/9/9/9/4K4 b - 1", |p, r| {
        // Silver out of the zone backwards, and within it.
        assert!(is_legal(p, &r("5c4d+")) && is_legal(p, &r("5c4d")));
        assert!(is_legal(p, &r("5c5b+")) && is_legal(p, &r("5c5b")));
        // Bishop and rook from inside the zone to far outside.
        assert!(is_legal(p, &r("2b6f+")) && is_legal(p, &r("2b6f")));
        assert!(is_legal(p, &r("8c8i+")) && is_legal(p, &r("8c8i")));
        // Gold and king never promote.
        assert!(is_legal(p, &r("9b9a")) && !is_legal(p, &r("9b9a+")));
        assert!(is_legal(p, &r("5i5h")) && !is_legal(p, &r("5i5h+")));
    });
    // Entering or leaving the zone is needed: rook 8d to 8h stays outside.
    both_colours("4k4/9/9/1R7/9/9/9/9/4K4 b - 1", |p, r| {
        assert!(!is_legal(p, &r("8d8h+")) && is_legal(p, &r("8d8h")));
        assert!(is_legal(p, &r("8d8c+")) && is_legal(p, &r("8d8a+")));
    });
    // Promoted pieces do not promote again.
    both_colours("4k4/9/1+R2+S4/9/9/9/9/9/4K4 b - 1", |p, r| {
        assert!(!is_legal(p, &r("8c8d+")) && is_legal(p, &r("8c8d")));
        assert!(!is_legal(p, &r("5c5b+")) && is_legal(p, &r("5c5b")));
    });
}

// ---------------------------------------------------------------------------------------------
// Check: evasions, double check, pins, the king's own safety
// ---------------------------------------------------------------------------------------------

#[test]
fn evasions_interpose_capture_or_step_aside() {
    // White rook 5e checks the king on 5i; Black can interpose (drop or silver 4g), capture with
    // the bishop from 8b (promoting or not), or step aside.
    both_colours("4k4/1B7/9/9/4r4/9/5S3/9/4K4 b G 1", |p, r| {
        assert!(p.in_check());
        let want: BTreeSet<String> =
            rset(r, &["4g5f", "4g5h", "5i4h", "5i4i", "5i6h", "5i6i", "8b5e", "8b5e+", "G*5f", "G*5g", "G*5h"]);
        assert_eq!(legal(p), want);
        assert!(!is_legal(p, &r("G*1a")) && !is_legal(p, &r("4g3f")) && !is_legal(p, &r("5i5h")));
    });
}

#[test]
fn double_check_allows_only_king_moves() {
    // Rook 5e and bishop 1e both check the king on 5i; the gold on 4i could block either alone.
    both_colours("4k4/9/9/9/4r3b/9/9/9/4KG3 b G 1", |p, r| {
        assert!(p.in_check());
        assert_eq!(p.checkers().count(), 2);
        assert_eq!(legal(p), rset(r, &["5i6h", "5i6i"]));
        for m in ["4i4h", "4i5h", "G*5h", "G*4h", "G*5f"] {
            assert!(!is_legal(p, &r(m)), "{m}");
        }
    });
}

#[test]
fn pinned_pieces_move_only_along_the_pin() {
    // Rook pin on the file: the gold may only step along it.
    both_colours("4k4/4r4/9/9/9/9/9/4G4/4K4 b - 1", |p, r| {
        assert!(!p.in_check());
        assert_eq!(legal(p), rset(r, &["5h5g", "5i4h", "5i4i", "5i6h", "5i6i"]));
    });
    // Bishop pin on the diagonal: the silver may only capture the pinner.
    both_colours("4k4/9/9/9/9/9/2b6/3S5/4K4 b - 1", |p, r| {
        assert_eq!(legal(p), rset(r, &["5i4h", "5i4i", "5i5h", "5i6i", "6h7g"]));
    });
    // Lance pin: the gold keeps to the file, forwards or backwards.
    both_colours("3k5/9/4l4/9/9/9/4G4/9/4K4 b - 1", |p, r| {
        assert_eq!(legal(p), rset(r, &["5g5f", "5g5h", "5i4h", "5i4i", "5i5h", "5i6h", "5i6i"]));
    });
}

#[test]
fn the_king_never_moves_into_check() {
    // Stepping back along the checking rook's file stays in check (the king no longer blocks it).
    both_colours("4k4/9/9/9/4r4/9/9/4K4/9 b - 1", |p, r| {
        assert_eq!(legal(p), rset(r, &["5h4g", "5h4h", "5h4i", "5h6g", "5h6h", "5h6i"]));
    });
    // The checking gold is defended by the pawn: the king cannot take it.
    both_colours("4k4/9/9/9/9/4p4/4g4/4K4/9 b - 1", |p, r| {
        assert_eq!(legal(p), rset(r, &["5h4i", "5h5i", "5h6i"]));
    });
    // Kings may not touch.
    both_colours("9/9/9/4k4/9/4K4/9/9/9 b - 1", |p, r| {
        assert!(!is_legal(p, &r("5f5e")) && !is_legal(p, &r("5f4e")) && !is_legal(p, &r("5f6e")));
        assert!(is_legal(p, &r("5f5g")) && is_legal(p, &r("5f4f")));
    });
}

// ---------------------------------------------------------------------------------------------
// Sennichite
// ---------------------------------------------------------------------------------------------

/// Statuses after each ply of `moves` from `sfen` (index 0: the root).
fn statuses(sfen: &str, moves: &[String], rules: &GameRules) -> Vec<Status> {
    let mut p = pos(sfen);
    let mut out = vec![p.status(rules)];
    for m in moves {
        let m = mv(m);
        assert!(p.is_legal(m), "test bug: {m} illegal in {p:?}");
        p.do_move(m);
        out.push(p.status(rules));
    }
    out
}

fn repeat(cycle: &[&str], times: usize) -> Vec<String> {
    (0..times).flat_map(|_| cycle.iter().map(|m| m.to_string())).collect()
}

#[test]
fn repetition_draw_on_the_fourth_occurrence() {
    let moves = repeat(&["5i5h", "5a5b", "5h5i", "5b5a"], 4);
    let s = statuses("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", &moves, &GameRules::default());
    for (ply, st) in s.iter().enumerate() {
        // The start position occurs at plies 0, 4, 8, 12; the others at most 4 times by ply 16,
        // the position after 5i5h (ply 1) for the 4th time at ply 13.
        let want = if ply >= 12 { Status::RepetitionDraw } else { Status::Ongoing };
        assert_eq!(*st, want, "ply {ply}");
    }
    // Three occurrences are not enough by default; they are when the rules say so.
    let three = GameRules { repetitions: 3, ..GameRules::default() };
    let s = statuses("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", &moves[..8], &three);
    assert_eq!(s[7], Status::Ongoing);
    assert_eq!(s[8], Status::RepetitionDraw);
}

#[test]
fn perpetual_check_loses_for_the_checker() {
    // Black's rook checks on every move while White's king shuffles between 1a and 2a.
    let cycle = ["2h1h", "1a2a", "1h2h", "2a1a"];
    for white in [false, true] {
        let root =
            if white { rot_sfen("8k/9/9/9/9/9/9/7R1/K8 b - 1") } else { "8k/9/9/9/9/9/9/7R1/K8 b - 1".to_string() };
        let moves: Vec<String> =
            repeat(&cycle, 4).iter().map(|m| if white { rot_move(m) } else { m.clone() }).collect();
        let s = statuses(&root, &moves, &GameRules::default());
        for (ply, st) in s[..12].iter().enumerate() {
            assert_eq!(*st, Status::Ongoing, "ply {ply}");
        }
        // Ply 12: the root for the 4th time, the checker to move: it loses.
        assert_eq!(s[12], Status::PerpetualCheckLoss);
        // Ply 13: the position after the first check for the 4th time, the checked side to move.
        assert_eq!(s[13], Status::PerpetualCheckWin);
        assert_eq!(s[14], Status::PerpetualCheckLoss);
    }
}

#[test]
fn checks_on_only_some_moves_are_a_plain_draw() {
    // The rook checks from 1h but not from 3h.
    let s =
        statuses("8k/9/9/9/9/9/9/6R2/K8 b - 1", &repeat(&["3h1h", "1a2a", "1h3h", "2a1a"], 4), &GameRules::default());
    assert_eq!(s[12], Status::RepetitionDraw);
    assert_eq!(s[13], Status::RepetitionDraw);
    // Quiet moves before the checking starts count when they follow the first occurrence.
    let mut moves = repeat(&["9i9h", "1a1b", "9h9i", "1b1a"], 1);
    moves.extend(repeat(&["2h1h", "1a2a", "1h2h", "2a1a"], 3));
    let s = statuses("8k/9/9/9/9/9/9/7R1/K8 b - 1", &moves, &GameRules::default());
    assert_eq!(s[11], Status::Ongoing);
    assert_eq!(s[12], Status::RepetitionDraw);
    // Quiet moves before the first occurrence do not count. The root occurs at plies 0, 4, 8, 12
    // (quiet moves since its first occurrence: a draw); the position after 2h1h at plies 5, 9,
    // 13, 17, with only checks by Black since ply 5: White wins.
    let mut moves = repeat(&["9i8i", "1a1b", "8i9i", "1b1a"], 1);
    moves.push("2h1h".to_string());
    moves.extend(repeat(&["1a2a", "1h2h", "2a1a", "2h1h"], 3));
    let s = statuses("8k/9/9/9/9/9/9/7R1/K8 b - 1", &moves, &GameRules::default());
    assert_eq!(s[12], Status::RepetitionDraw);
    assert_eq!(s[13], Status::Ongoing);
    assert_eq!(s[17], Status::PerpetualCheckWin);
}

#[test]
fn repetition_through_usi_position_history() {
    let line = format!("startpos moves {}", repeat(&["5i5h", "5a5b", "5h5i", "5b5a"], 3).join(" "));
    assert_eq!(parse_position(&line).unwrap().status(&GameRules::default()), Status::RepetitionDraw);
    // An SFEN without history has no repetition, whatever its move number.
    let p = parse_position("sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 13").unwrap();
    assert_eq!(p.status(&GameRules::default()), Status::Ongoing);
}

// ---------------------------------------------------------------------------------------------
// Impasse declaration
// ---------------------------------------------------------------------------------------------

/// A Black-to-move position: king on 5b; in the camp a dragon, a horse and 8 (or `tokins_b` + 6)
/// tokins: 10 pieces (or 9) and 18 points (or 17); `hand` is Black's hand; White's king on 5i (or
/// 4i with `check`, a white gold checking from 5c).
fn impasse_sfen(tokins_b: usize, hand: &str, check: bool, king_rank: char) -> String {
    let rank_a = "+R+B+P+P1+P+P+P+P";
    let rank_b = match (tokins_b, king_rank) {
        (2, 'b') => "+P3K3+P",
        (1, 'b') => "+P3K4",
        (2, 'd') => "+P7+P",
        (1, 'd') => "+P8",
        _ => unreachable!(),
    };
    let rank_c = if check { "4g4" } else { "9" };
    let rank_d = if king_rank == 'd' { "4K4" } else { "9" };
    let hand = if hand.is_empty() { "-" } else { hand };
    format!("{rank_a}/{rank_b}/{rank_c}/{rank_d}/9/9/9/9/4k4 b {hand} 1")
}

#[test]
fn impasse_helper_is_sound() {
    let p = pos(&impasse_sfen(2, "RB", false, 'b'));
    assert_eq!(p.to_sfen(), "+R+B+P+P1+P+P+P+P/+P3K3+P/9/9/9/9/9/9/4k4 b RB 1");
    assert_eq!(p.impasse_points(Color::Black), (28, 10));
    assert_eq!(pos(&impasse_sfen(1, "RB", false, 'b')).impasse_points(Color::Black), (27, 9));
    assert!(pos(&impasse_sfen(2, "", true, 'b')).in_check());
    assert_eq!(pos(&impasse_sfen(2, "", false, 'd')).to_sfen(), "+R+B+P+P1+P+P+P+P/+P7+P/9/4K4/9/9/9/9/4k4 b - 1");
}

#[test]
fn csa_27_point_declaration() {
    let csa = rules(ImpasseRule::Csa27);
    // (sfen, Black's result, White's result): Black needs 28, White 27.
    let cases = [
        (impasse_sfen(2, "R5P", false, 'b'), Status::DeclarationWin, Status::DeclarationWin), // 28
        (impasse_sfen(2, "RB", false, 'b'), Status::DeclarationWin, Status::DeclarationWin),  // 28
        (impasse_sfen(2, "R4P", false, 'b'), Status::Ongoing, Status::DeclarationWin),        // 27
        (impasse_sfen(2, "R3P", false, 'b'), Status::Ongoing, Status::Ongoing),               // 26
        (impasse_sfen(2, "", false, 'b'), Status::Ongoing, Status::Ongoing),                  // 18
        (impasse_sfen(1, "RBP", false, 'b'), Status::Ongoing, Status::Ongoing),               // 28, 9 pieces
        (impasse_sfen(1, "RB4P", false, 'b'), Status::Ongoing, Status::Ongoing),              // 31, 9 pieces
        (impasse_sfen(2, "RB4P", true, 'b'), Status::Ongoing, Status::Ongoing),               // in check
        (impasse_sfen(2, "RB4P", false, 'd'), Status::Ongoing, Status::Ongoing),              // king outside
    ];
    for (sfen, black, white) in &cases {
        assert_eq!(pos(sfen).status(&csa), *black, "Black: {sfen}");
        assert_eq!(pos(&rot_sfen(sfen)).status(&csa), *white, "White: {}", rot_sfen(sfen));
        // The other rules never declare this way.
        assert_eq!(pos(sfen).status(&rules(ImpasseRule::None)), Status::Ongoing);
    }
    // Pieces outside the camp and the opponent's hand do not count.
    let p = pos("+R+B+P+P1+P+P+P+P/+P3K3+P/9/G8/9/9/9/9/4k4 b R4Pg 1");
    assert_eq!(p.impasse_points(Color::Black), (27, 10));
    assert_eq!(p.status(&csa), Status::Ongoing);
}

#[test]
fn jsa_24_point_declaration() {
    let jsa = rules(ImpasseRule::Jsa24);
    for (hand, want) in [
        ("5P", Status::Ongoing),          // 23
        ("6P", Status::DeclarationDraw),  // 24
        ("R4P", Status::DeclarationDraw), // 27
        ("R7P", Status::DeclarationDraw), // 30
        ("R8P", Status::DeclarationWin),  // 31
        ("RB3P", Status::DeclarationWin), // 31
    ] {
        let sfen = impasse_sfen(2, hand, false, 'b');
        assert_eq!(pos(&sfen).status(&jsa), want, "Black: {sfen}");
        // The same thresholds for White.
        assert_eq!(pos(&rot_sfen(&sfen)).status(&jsa), want, "White: {sfen}");
    }
    assert_eq!(pos(&impasse_sfen(1, "RB4P", false, 'b')).status(&jsa), Status::Ongoing, "9 pieces");
    assert_eq!(pos(&impasse_sfen(2, "RB4P", true, 'b')).status(&jsa), Status::Ongoing, "in check");
    assert_eq!(pos(&impasse_sfen(2, "RB4P", false, 'd')).status(&jsa), Status::Ongoing, "king outside the camp");
    assert!(!Status::DeclarationDraw.is_terminal() && !Status::DeclarationWin.is_terminal());
}

#[test]
fn try_rule() {
    let try_rules = rules(ImpasseRule::Try);
    // Black's king next to 5a, which is free and safe: the Try wins.
    both_colours("9/4K4/9/9/9/9/9/9/k8 b - 1", |p, r| {
        assert_eq!(p.status(&try_rules), Status::DeclarationWin);
        assert_eq!(p.try_move().map(|m| m.to_usi()), Some(r("5b5a")));
        assert_eq!(p.status(&GameRules::default()), Status::Ongoing);
        let mut q = p.clone();
        q.do_move(mv(&r("5b5a")));
        assert_eq!(q.status(&try_rules), Status::TryLoss);
        assert_eq!(q.status(&GameRules::default()), Status::Ongoing);
    });
    // 5a attacked by the rook on 1a: no Try.
    both_colours("8r/4K4/9/9/9/9/9/9/k8 b - 1", |p, _| {
        assert_eq!(p.try_move(), None);
        assert_eq!(p.status(&try_rules), Status::Ongoing);
    });
    // 5a occupied by an own piece: no Try; by an undefended enemy piece: the capture is the Try.
    both_colours("4G4/4K4/9/9/9/9/9/9/k8 b - 1", |p, _| assert_eq!(p.status(&try_rules), Status::Ongoing));
    both_colours("4s4/4K4/9/9/9/9/9/9/k8 b - 1", |p, r| {
        assert_eq!(p.try_move().map(|m| m.to_usi()), Some(r("5b5a")));
        assert_eq!(p.status(&try_rules), Status::DeclarationWin);
    });
    // Two steps away: no Try yet.
    both_colours("9/9/4K4/9/9/9/9/9/k8 b - 1", |p, _| assert_eq!(p.status(&try_rules), Status::Ongoing));
    // The opponent's king already on its Try square: lost, before anything else.
    both_colours("K8/9/9/9/9/9/9/9/4k4 b - 1", |p, _| assert_eq!(p.status(&try_rules), Status::TryLoss));
    // The own king on the opponent's start square is nothing special for the side to move.
    both_colours("4K4/9/9/9/9/9/9/9/k8 b - 1", |p, _| assert_eq!(p.status(&try_rules), Status::Ongoing));
}

#[test]
fn try_rule_needs_both_kings_in_their_zones() {
    let try_rules = rules(ImpasseRule::Try);
    let anywhere = rules(ImpasseRule::TryUnconditional);
    // White's king on 9f, outside its zone (ranks g–i): Black's king next to 5a may not Try yet
    // under the Try rule; the unconditional variant allows it.
    both_colours("9/4K4/9/9/9/k8/9/9/9 b - 1", |p, r| {
        assert!(!p.both_kings_entered());
        assert_eq!(p.try_move().map(|m| m.to_usi()), Some(r("5b5a")));
        assert_eq!(p.status(&try_rules), Status::Ongoing);
        assert_eq!(p.declaration(ImpasseRule::Try), None);
        assert_eq!(p.status(&anywhere), Status::DeclarationWin);
        let mut q = p.clone();
        q.do_move(mv(&r("5b5a")));
        assert!(!q.lost_by_try(ImpasseRule::Try) && q.lost_by_try(ImpasseRule::TryUnconditional));
        assert_eq!(q.status(&try_rules), Status::Ongoing);
        assert_eq!(q.status(&anywhere), Status::TryLoss);
    });
    // White's king on 9g, the first rank of its zone: both have entered, the Try wins.
    both_colours("9/4K4/9/9/9/9/k8/9/9 b - 1", |p, r| {
        assert!(p.both_kings_entered());
        assert_eq!(p.status(&try_rules), Status::DeclarationWin);
        let mut q = p.clone();
        q.do_move(mv(&r("5b5a")));
        assert_eq!(q.status(&try_rules), Status::TryLoss);
        assert_eq!(q.status(&GameRules::default()), Status::Ongoing);
    });
    // The opponent's king on its Try square, the own king outside its zone: not lost under the
    // Try rule (both kings have not entered), lost under the unconditional variant.
    both_colours("9/9/9/9/K8/9/9/9/4k4 b - 1", |p, _| {
        assert_eq!(p.status(&try_rules), Status::Ongoing);
        assert_eq!(p.status(&anywhere), Status::TryLoss);
    });
    both_colours("9/9/K8/9/9/9/9/9/4k4 b - 1", |p, _| assert_eq!(p.status(&try_rules), Status::TryLoss));
    // No other rule knows the Try.
    for impasse in [ImpasseRule::None, ImpasseRule::Csa27, ImpasseRule::Jsa24, ImpasseRule::Agreement] {
        assert!(!pos("9/9/K8/9/9/9/9/9/4k4 b - 1").lost_by_try(impasse));
    }
}

#[test]
fn jishogi_by_agreement() {
    let agreement = rules(ImpasseRule::Agreement);
    // Kings on 5c and 5g (both in their zones); everything else in hand. 54 points in all.
    let both_in = |black: &str, white: &str| format!("9/9/4K4/9/9/9/4k4/9/9 b {black}{white} 1");
    // Counting: rook and bishop class 5 (promoted too), everything else 1, board and hand, anywhere.
    let p = pos("+R+B7/9/4K4/9/9/9/4k4/9/8+P b G2P 1");
    assert_eq!(p.jishogi_points(Color::Black), 5 + 5 + 1 + 1 + 2);
    assert_eq!(p.jishogi_points(Color::White), 0);
    for (black, white, want) in [
        ("RB14P", "rb4p", Status::JishogiWin),        // 24 v 14
        ("RB13P", "rb14p", Status::JishogiLoss),      // 23 v 24
        ("RB17P", "rb1p", Status::JishogiWin),        // 27 v 11
        ("RB14P", "rb4g4s6p", Status::JishogiDraw),   // 24 v 24: both have 24 or more
        ("RB4G4S", "rb4n4l10p", Status::JishogiLoss), // 18 v 28
    ] {
        let sfen = both_in(black, white);
        let p = pos(&sfen);
        assert_eq!(p.status(&agreement), want, "Black to move: {sfen}");
        let flipped = match want {
            Status::JishogiWin => Status::JishogiLoss,
            Status::JishogiLoss => Status::JishogiWin,
            other => other,
        };
        // The same position with White to move, and the rotated position.
        assert_eq!(pos(&sfen.replace(" b ", " w ")).status(&agreement), flipped, "White to move: {sfen}");
        assert_eq!(pos(&rot_sfen(&sfen)).status(&agreement), want, "rotated: {sfen}");
        assert!(pos(&sfen).status(&agreement).is_terminal());
        // Other rules do not adjudicate.
        assert_eq!(pos(&sfen).status(&rules(ImpasseRule::Csa27)), Status::Ongoing);
    }
    // Both kings short (a handicap game's material): drawn.
    assert_eq!(pos(&both_in("R", "b")).status(&agreement), Status::JishogiDraw);
    // One king outside its zone: no adjudication.
    for sfen in ["9/9/9/4K4/9/9/4k4/9/9 b RB14P 1", "9/9/4K4/9/9/4k4/9/9/9 b RB14P 1"] {
        assert_eq!(pos(sfen).status(&agreement), Status::Ongoing, "{sfen}");
    }
    // Mate and the move limit come first; no declaration under this rule.
    let sfen = both_in("RB14P", "rb4p").replace(" 1", " 100");
    assert_eq!(pos(&sfen).status(&GameRules { max_plies: 99, ..agreement }), Status::MaxMovesDraw);
    // A position where the CSA rule would let Black declare: under this rule it is adjudicated.
    assert_eq!(pos(&impasse_sfen(2, "RB", false, 'b')).status(&agreement), Status::JishogiWin);
    // Results: the side to move wins, loses, or a draw; all impasse results.
    let r = koma_shogi::GameResult::from_status(Status::JishogiLoss, Color::White).unwrap();
    assert_eq!((r.winner, r.reason), (Some(Color::Black), koma_shogi::EndReason::Declaration));
    let r = koma_shogi::GameResult::from_status(Status::JishogiDraw, Color::White).unwrap();
    assert_eq!((r.winner, r.reason), (None, koma_shogi::EndReason::Declaration));
}

#[test]
fn rule_names() {
    for r in ImpasseRule::ALL {
        assert_eq!(ImpasseRule::from_name(r.name()), Some(r));
        assert_eq!(r.name().parse::<ImpasseRule>(), Ok(r));
    }
    assert_eq!(ImpasseRule::from_name("TRY"), Some(ImpasseRule::Try));
    assert_eq!(ImpasseRule::from_name("27"), Some(ImpasseRule::Csa27));
    assert_eq!(ImpasseRule::from_name("agreement"), Some(ImpasseRule::Agreement));
    assert_eq!(ImpasseRule::expected(), "csa27, jsa24, try, try-unconditional, jishogi or none");
    let err = "bogus".parse::<ImpasseRule>().unwrap_err();
    assert!(err.contains("\"bogus\"") && err.contains("try-unconditional"), "{err}");
    for r in [MaxMovesRule::Draw, MaxMovesRule::DrawAfterChecks] {
        assert_eq!(MaxMovesRule::from_name(r.name()), Some(r));
    }
    assert!("sometimes".parse::<MaxMovesRule>().is_err());
    assert!(ImpasseRule::Try.is_try() && ImpasseRule::TryUnconditional.is_try() && !ImpasseRule::Csa27.is_try());
}

// ---------------------------------------------------------------------------------------------
// Move limit and precedence
// ---------------------------------------------------------------------------------------------

#[test]
fn max_plies_both_variants() {
    let draw = GameRules { max_plies: 3, max_moves_rule: MaxMovesRule::Draw, ..GameRules::default() };
    let checks = GameRules { max_plies: 3, max_moves_rule: MaxMovesRule::DrawAfterChecks, ..GameRules::default() };
    let moves: Vec<String> = ["2h1h", "1a2a", "1h2h", "2a1a", "2h2g", "1a1b"].iter().map(|m| m.to_string()).collect();
    let d = statuses("8k/9/9/9/9/9/9/7R1/K8 b - 1", &moves, &draw);
    let c = statuses("8k/9/9/9/9/9/9/7R1/K8 b - 1", &moves, &checks);
    assert_eq!(d[..3], [Status::Ongoing; 3]);
    assert_eq!(c[..3], [Status::Ongoing; 3]);
    // Ply 3 (1h2h) is a check: the JSA rule plays on while Black checks. White's reply (ply 4)
    // leaves the game going; Black's next move (ply 5, 2h2g) is no check: drawn there.
    assert_eq!(d[3], Status::MaxMovesDraw);
    assert_eq!(c[3], Status::Ongoing);
    assert_eq!(d[4], Status::MaxMovesDraw);
    assert_eq!(c[4], Status::Ongoing);
    assert_eq!(c[5], Status::MaxMovesDraw);
    assert_eq!(c[6], Status::MaxMovesDraw);
    // The SFEN move number counts: move 11 means 10 plies played.
    let ten = GameRules { max_plies: 10, ..GameRules::default() };
    assert_eq!(
        pos("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 11").status(&ten),
        Status::MaxMovesDraw
    );
    assert_eq!(pos("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 10").status(&ten), Status::Ongoing);
    // The default is 512 plies.
    assert_eq!(
        pos("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 513").status(&GameRules::default()),
        Status::MaxMovesDraw
    );
    assert_eq!(
        pos("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 512").status(&GameRules::default()),
        Status::Ongoing
    );
}

#[test]
fn jsa_move_limit_plays_on_while_the_checks_go_on() {
    let checks = |n| GameRules { max_plies: n, max_moves_rule: MaxMovesRule::DrawAfterChecks, ..GameRules::default() };
    let moves: Vec<String> =
        ["2h1h", "1a2a", "1h2h", "2a1a", "2h1h", "1a2a", "1h1g", "2a3a"].iter().map(|m| m.to_string()).collect();
    let start = "8k/9/9/9/9/9/9/7R1/K8 b - 1";
    // Limit 1: Black checks at plies 1, 3 and 5; its move at ply 7 is no check: drawn there.
    let s = statuses(start, &moves, &checks(1));
    assert_eq!(s[..7], [Status::Ongoing; 7]);
    assert_eq!(s[7..], [Status::MaxMovesDraw; 2]);
    // Limit 2: the move at the limit (White's 1a2a) is no check: drawn at once.
    let s = statuses(start, &moves, &checks(2));
    assert_eq!(s[..2], [Status::Ongoing; 2]);
    assert!(s[2..].iter().all(|&st| st == Status::MaxMovesDraw), "{s:?}");
    // Limit 5 (a check at the limit) and 6 (a reply at the limit).
    let s = statuses(start, &moves, &checks(5));
    assert_eq!(s[5..], [Status::Ongoing, Status::Ongoing, Status::MaxMovesDraw, Status::MaxMovesDraw]);
    let s = statuses(start, &moves, &checks(6));
    assert_eq!(s[6..], [Status::MaxMovesDraw; 3]);
    // White as the checking side (the same game turned round).
    let rotated: Vec<String> = moves.iter().map(|m| rot_move(m)).collect();
    let s = statuses(&rot_sfen(start), &rotated, &checks(1));
    assert_eq!(s[..7], [Status::Ongoing; 7]);
    assert_eq!(s[7..], [Status::MaxMovesDraw; 2]);
    // A position set up at the limit: its own check (the move that led to it) is known.
    assert_eq!(pos("8k/9/9/9/9/9/9/8R/K8 w - 11").status(&checks(10)), Status::Ongoing);
    assert_eq!(pos("8k/9/9/9/9/9/9/7R1/K8 w - 11").status(&checks(10)), Status::MaxMovesDraw);
    let mut p = pos("8k/9/9/9/9/9/9/8R/K8 w - 11");
    play(&mut p, &["1a2a"]);
    assert_eq!(p.status(&checks(10)), Status::Ongoing);
    play(&mut p, &["1h1g"]);
    assert_eq!(p.status(&checks(10)), Status::MaxMovesDraw);
    // Mate during the series ends the game as a mate.
    let mut p = pos("k8/9/1G7/9/9/9/9/9/4K4 b G 11");
    play(&mut p, &["G*9b"]);
    assert_eq!(p.status(&checks(10)), Status::Checkmate);
    // The plain rule draws at the limit whatever the move.
    let draw = GameRules { max_plies: 10, ..GameRules::default() };
    assert_eq!(pos("8k/9/9/9/9/9/9/8R/K8 w - 11").status(&draw), Status::MaxMovesDraw);
    assert!(pos("8k/9/9/9/9/9/9/8R/K8 w - 11").move_limit_reached(&draw));
}

#[test]
fn status_precedence() {
    let limit = |n| GameRules { max_plies: n, ..GameRules::default() };
    // Checkmate beats the move limit.
    let mut p = pos("kn7/9/PG7/9/9/9/9/9/4K4 b - 600");
    play(&mut p, &["9c9b+"]);
    assert_eq!(p.status(&GameRules::default()), Status::Checkmate);
    // Repetition beats the move limit.
    let mut p = Position::startpos();
    play(&mut p, &repeat(&["5i5h", "5a5b", "5h5i", "5b5a"], 3).iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert_eq!(p.status(&limit(12)), Status::RepetitionDraw);
    assert_eq!(p.status(&limit(13)), Status::RepetitionDraw);
    // The move limit beats a declaration.
    let sfen = impasse_sfen(2, "RB", false, 'b').replace(" 1", " 100");
    assert_eq!(pos(&sfen).status(&limit(99)), Status::MaxMovesDraw);
    assert_eq!(pos(&sfen).status(&limit(100)), Status::DeclarationWin);
    // The Try loss beats checkmate: Black is mated (gold 1h, defended by the pawn on 1g) and
    // White's king stands on 5i. Black's king is outside its zone, so only the unconditional
    // variant knows a Try here.
    let p = pos("9/9/9/9/9/9/8p/8g/4k3K b - 1");
    assert!(legal(&p).is_empty());
    assert_eq!(p.status(&GameRules::default()), Status::Checkmate);
    assert_eq!(p.status(&rules(ImpasseRule::TryUnconditional)), Status::TryLoss);
    assert_eq!(p.status(&rules(ImpasseRule::Try)), Status::Checkmate);
    // Checkmate: no legal move, whether in check or not (stalemate is a loss too).
    let mated = pos("kn7/9/1G7/9/9/9/9/9/4K4 b L 1");
    let mut q = mated.clone();
    play(&mut q, &["L*9b"]);
    assert!(q.in_check());
    assert_eq!(q.status(&rules(ImpasseRule::Try)), Status::Checkmate);
}

// ---------------------------------------------------------------------------------------------
// SFEN errors
// ---------------------------------------------------------------------------------------------

#[test]
fn sfen_errors() {
    const K: &str = "4k4/9/9/9/9/9/9/9/4K4";
    let err = |s: &str| Position::from_sfen(s).expect_err(s);
    assert_eq!(err(&format!("{K} b")), SfenError::FieldCount(2));
    assert_eq!(err(&format!("{K} b - 1 1")), SfenError::FieldCount(5));
    assert_eq!(err(""), SfenError::FieldCount(0));
    assert_eq!(err("9/9/9/9/9/9/9/9 b - 1"), SfenError::RankCount(8));
    assert_eq!(err(&format!("{K}/9 b - 1")), SfenError::RankCount(10));
    assert!(matches!(err("4k5/9/9/9/9/9/9/9/4K4 b - 1"), SfenError::RankWidth { rank: 'a', files: 10 }));
    assert!(matches!(err("4k4/9/8/9/9/9/9/9/4K4 b - 1"), SfenError::RankWidth { rank: 'c', files: 8 }));
    assert!(matches!(err("4k4/9/9/9/9/9/9/9/4K4P b - 1"), SfenError::RankWidth { rank: 'i', files: 10 }));
    assert!(matches!(err("4k4/9/9/9/4x4/9/9/9/4K4 b - 1"), SfenError::BoardChar { rank: 'e', found: 'x' }));
    assert!(matches!(err("4k4/0/9/9/9/9/9/9/4K4 b - 1"), SfenError::BoardChar { rank: 'b', found: '0' }));
    assert!(matches!(err("4k4/9/4+G4/9/9/9/9/9/4K4 b - 1"), SfenError::BadPromotion { rank: 'c', .. }));
    assert!(matches!(err("4k4/9/9/9/9/9/9/9/4K3+ b - 1"), SfenError::BadPromotion { rank: 'i', .. }));
    assert!(matches!(err("4k4/9/9/9/9/9/9/9/3+K4 b - 1"), SfenError::BadPromotion { .. }));
    assert_eq!(err(&format!("{K} x - 1")), SfenError::Side("x".into()));
    assert_eq!(err(&format!("{K} B - 1")), SfenError::Side("B".into()));
    assert_eq!(err(&format!("{K} b K 1")), SfenError::HandChar('K'));
    assert_eq!(err(&format!("{K} b P? 1")), SfenError::HandChar('?'));
    assert!(matches!(err(&format!("{K} b 0P 1")), SfenError::HandCount(_)));
    assert!(matches!(err(&format!("{K} b 4R 1")), SfenError::HandCount(_)));
    assert!(matches!(err(&format!("{K} b 2 1")), SfenError::HandCount(_)));
    assert_eq!(err(&format!("{K} b PP 1")), SfenError::HandRepeated('P'));
    assert_eq!(err(&format!("{K} b 2pP3p 1")), SfenError::HandRepeated('p'));
    assert_eq!(err(&format!("{K} b - 0")), SfenError::MoveNumber("0".into()));
    assert_eq!(err(&format!("{K} b - x")), SfenError::MoveNumber("x".into()));
    assert_eq!(err(&format!("{K} b - -3")), SfenError::MoveNumber("-3".into()));
    assert_eq!(err("9/9/9/9/9/9/9/9/4K4 b - 1"), SfenError::KingCount { color: Color::White, count: 0 });
    assert_eq!(err("4k4/9/9/9/9/9/9/9/3KK4 b - 1"), SfenError::KingCount { color: Color::Black, count: 2 });
    let dead = |s: &str, sq: &str| match err(s) {
        SfenError::DeadPiece { square, .. } => assert_eq!(square, Square::from_usi(sq).unwrap(), "{s}"),
        other => panic!("{s}: {other:?}"),
    };
    dead("P3k4/9/9/9/9/9/9/9/4K4 b - 1", "9a");
    dead("4k3L/9/9/9/9/9/9/9/4K4 b - 1", "1a");
    dead("4k4/N8/9/9/9/9/9/9/4K4 b - 1", "9b");
    dead("4k4/9/9/9/9/9/9/9/p3K4 b - 1", "9i");
    dead("4k4/9/9/9/9/9/9/8n/4K4 b - 1", "1h");
    assert!(Position::from_sfen("4k4/N8/9/9/9/9/9/9/4K4 b - 1").is_err());
    assert!(Position::from_sfen("4k4/+N8/9/9/9/9/9/9/4K4 b - 1").is_ok(), "a promoted knight is not dead");
    assert!(Position::from_sfen("4k4/n8/9/9/9/9/9/9/4K4 b - 1").is_ok(), "a white knight on rank b is fine");
    assert_eq!(err("4k4/9/P8/9/P8/9/9/9/4K4 b - 1"), SfenError::Nifu { color: Color::Black, file: 9 });
    assert_eq!(err("4k4/9/9/9/9/p8/9/p8/4K4 b - 1"), SfenError::Nifu { color: Color::White, file: 9 });
    assert!(Position::from_sfen("4k4/9/P8/9/+P8/9/9/9/4K4 b - 1").is_ok());
    assert!(Position::from_sfen("4k4/9/P8/9/p8/9/9/9/4K4 b - 1").is_ok());
    assert!(matches!(
        err("4k4/9/9/9/9/9/9/9/RR2K4 b 2R 1"),
        SfenError::TooManyPieces { kind: PieceType::Rook, count: 4, .. }
    ));
    assert!(matches!(
        err("4k4/9/9/9/9/9/9/+B7+b/4K4 b Bb 1"),
        SfenError::TooManyPieces { kind: PieceType::Bishop, count: 4, max: 3 }
    ));
    assert_eq!(err("4k4/4R4/9/9/9/9/9/9/4K4 b - 1"), SfenError::OpponentInCheck(Color::White));
    assert_eq!(err("4k4/9/9/9/9/9/9/4r4/4K4 w - 1"), SfenError::OpponentInCheck(Color::Black));
    // Side to move in check is fine; so is a missing move number.
    assert!(Position::from_sfen("4k4/4R4/9/9/9/9/9/9/4K4 w - 1").is_ok());
    assert_eq!(pos(&format!("{K} b -")).to_sfen(), format!("{K} b - 1"));
}

#[test]
fn sfen_round_trip() {
    for sfen in [
        "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",
        "R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1",
        "k+n7/sg7/9/9/9/9/+r5K1g/7L1/2LN1R1+Bb b RBGSNLP 1",
        "9/9/9/3k5/9/5K3/9/9/9 b RB2G2S2N2L9Prb2g2s2n2l9p 77",
    ] {
        assert_eq!(pos(sfen).to_sfen(), sfen);
        assert_eq!(pos(&rot_sfen(sfen)).to_sfen(), rot_sfen(sfen));
    }
}

// ---------------------------------------------------------------------------------------------
// Consistency on random positions: is_legal, gives_check, do/undo, mate_in_one
// ---------------------------------------------------------------------------------------------

/// SplitMix64: a small deterministic generator, so the test needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Positions from random games from every start, captures favoured so that hands fill up.
fn random_positions(rng: &mut Rng, games_per_start: usize, plies: usize) -> Vec<Position> {
    let mut out = Vec::new();
    for h in Handicap::ALL {
        for _ in 0..games_per_start {
            let mut p = h.position();
            for _ in 0..plies {
                let moves = p.legal_moves();
                if moves.is_empty() {
                    break;
                }
                let captures: Vec<Move> =
                    moves.iter().copied().filter(|m| !m.is_drop() && p.piece_at(m.to()).is_some()).collect();
                let drops: Vec<Move> = moves.iter().copied().filter(|m| m.is_drop()).collect();
                let m = match rng.below(10) {
                    0..=4 if !captures.is_empty() => captures[rng.below(captures.len())],
                    5 if !drops.is_empty() => drops[rng.below(drops.len())],
                    _ => moves[rng.below(moves.len())],
                };
                p.do_move(m);
                out.push(p.clone());
            }
        }
    }
    out
}

#[test]
fn is_legal_agrees_with_legal_moves() {
    let mut rng = Rng(0x5EED);
    let positions = random_positions(&mut rng, 4, 150);
    assert!(positions.len() > 5000);
    let mut checked_codes = 0u64;
    let mut legal_hits = 0u64;
    for (i, p) in positions.iter().enumerate() {
        let moves: BTreeSet<u16> = p.legal_moves().iter().map(|m| m.to_u16()).collect();
        assert_eq!(moves.len(), p.legal_moves().len(), "duplicate moves in {p:?}");
        for &code in &moves {
            let m = Move::from_u16(code).expect("legal moves round-trip through u16");
            assert!(p.is_legal(m), "{m} from legal_moves is not is_legal in {p:?}");
            assert_eq!(Move::from_usi(&m.to_usi()), Some(m));
        }
        // Near-miss candidates: from own pieces' squares (or drops of any kind) to anywhere,
        // with and without promotion.
        let own: Vec<Square> = p.pieces_of(p.side_to_move()).collect();
        for _ in 0..200 {
            let to = rng.below(81) as u16;
            let code = match rng.below(4) {
                0 => to | ((1 + rng.below(7) as u16) << 7) | (1 << 15),
                1 => to | ((own[rng.below(own.len())].index() as u16) << 7) | (1 << 14),
                2 => to | ((own[rng.below(own.len())].index() as u16) << 7),
                _ => rng.next() as u16,
            };
            if let Some(m) = Move::from_u16(code) {
                assert_eq!(p.is_legal(m), moves.contains(&m.to_u16()), "is_legal({m}) in {p:?}");
                checked_codes += 1;
                legal_hits += moves.contains(&m.to_u16()) as u64;
            }
        }
        // Every code, for some positions.
        if i % 200 == 0 {
            for code in 0..=u16::MAX {
                if let Some(m) = Move::from_u16(code) {
                    assert_eq!(p.is_legal(m), moves.contains(&m.to_u16()), "is_legal({m}) in {p:?}");
                }
            }
        }
    }
    println!("{} positions, {checked_codes} random move codes ({legal_hits} legal)", positions.len());
    assert!(legal_hits > 10_000 && checked_codes - legal_hits > 100_000, "{legal_hits} legal of {checked_codes}");
}

#[test]
fn gives_check_do_undo_and_mate_in_one_agree() {
    let mut rng = Rng(0xC0FFEE);
    let positions = random_positions(&mut rng, 2, 120);
    let mut mates = 0;
    for p in &positions {
        let before = p.to_sfen();
        let mut q = p.clone();
        let mut mating = Vec::new();
        for &m in p.legal_moves().iter() {
            let check = q.gives_check(m);
            q.do_move(m);
            assert_eq!(q.in_check(), check, "gives_check({m}) in {before}");
            assert_eq!(q.hash(), q.hash_from_scratch(), "hash after {m} in {before}");
            // The side that just moved is never left in check: the SFEN is valid.
            let after = q.to_sfen();
            assert_eq!(pos(&after).to_sfen(), after);
            if !q.has_legal_move() {
                // No legal reply: a loss for the side to move, by checkmate or (rarely) stalemate.
                assert_eq!(q.status(&GameRules::default()), Status::Checkmate);
                if check {
                    mating.push(m);
                }
            }
            q.undo_move();
            assert_eq!(q.to_sfen(), before, "undo of {m}");
            assert_eq!(q.hash(), p.hash());
        }
        // mate_in_one looks for checkmates only (a stalemating move is not one).
        let found = q.mate_in_one();
        assert_eq!(found.is_some(), !mating.is_empty(), "mate_in_one in {before}: {mating:?}");
        if let Some(m) = found {
            assert!(mating.contains(&m));
            mates += 1;
        }
    }
    assert!(mates > 0);
}
