//! Garbage in, correct answers out: random lines, invalid UTF-8, huge lines, wrong move strings,
//! illegal positions, every kind of `go` with random (also malformed) arguments, `stop` and
//! `ponderhit` at random times. After each `go` the engine must answer exactly once, with a legal
//! move for the position it was given (as the engine documents it: the legal prefix of the moves,
//! the start position after a bad base position), and it must stay alive to the end.

mod common;

use std::time::Duration;

use common::*;
use koma_engine::time::GoParams;
use koma_shogi::rules::ImpasseRule;
use koma_shogi::{Move, Position, Status};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What the engine does with `position` arguments (see `Engine::position`).
fn expected_position(args: &[&str]) -> Position {
    let (mut pos, rest) = match args.first() {
        Some(&"startpos") => (Position::startpos(), &args[1..]),
        Some(&"sfen") => {
            let end = args.iter().position(|w| *w == "moves").unwrap_or(args.len());
            match Position::from_sfen(&args[1..end].join(" ")) {
                Ok(p) => (p, &args[end..]),
                Err(_) => return Position::startpos(),
            }
        }
        _ => return Position::startpos(),
    };
    if rest.first() == Some(&"moves") {
        for text in &rest[1..] {
            match Move::from_usi(text).filter(|&m| pos.is_legal(m)) {
                Some(m) => pos.do_move(m),
                None => break,
            }
        }
    }
    pos
}

const COMMANDS: [&str; 14] = [
    "usi",
    "isready",
    "setoption",
    "usinewgame",
    "position",
    "go",
    "stop",
    "ponderhit",
    "gameover",
    "quit",
    "debug",
    "register",
    "d",
    "eval",
];

fn garbage_line(rng: &mut Rng) -> Vec<u8> {
    let mut line: Vec<u8> = match rng.below(5) {
        // Random printable words.
        0 | 1 => {
            let n = rng.below(8);
            let words: Vec<String> = (0..n)
                .map(|_| {
                    let len = 1 + rng.below(10);
                    (0..len).map(|_| (b'!' + rng.below(94) as u8) as char).collect()
                })
                .collect();
            words.join(" ").into_bytes()
        }
        // Bytes that are not UTF-8 (no letters, so never a command), with NUL, tabs and CR.
        2 => (0..rng.below(200))
            .map(|_| *rng.pick(&[0x80u8, 0xff, 0xfe, 0xc3, 0x00, b'\t', b'\r', b' ', 0xe3, 0x81]))
            .collect(),
        // Known words in the wrong place.
        3 => format!(
            "{} {} {}",
            rng.pick(&["moves", "sfen", "startpos", "value", "name", "7g7f", "bestmove"]),
            rng.next(),
            rng.pick(&COMMANDS)
        )
        .into_bytes(),
        // Whitespace only.
        _ => b" \t  ".to_vec(),
    };
    // Never a real command by accident.
    let first = String::from_utf8_lossy(&line).split_whitespace().next().map(str::to_string);
    if first.is_some_and(|w| COMMANDS.contains(&w.as_str())) {
        line.insert(0, b'x');
    }
    line
}

const SFENS: [&str; 6] = [
    "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
    "4k4/9/4P4/9/9/9/9/9/4K4 b G 1",
    "4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1",
    "4K4/1R5B1/PPPP1PPPP/9/9/9/9/9/4k4 b RB 1",
    "2s1k3p/l2p2s1l/g1+B1p+P2n/pG2R1p1P/P6p1/Np2Ppg1L/+n2P2l2/R2K3P1/1NP1S2S1 b Pbg2p 157",
    "8k/9/9/9/9/9/9/9/K8 w 2r2b4g4s4n4l18p 1",
];

const BAD_SFENS: [&str; 6] = [
    "9/9 b - 1",
    "lnsgkgsnl/9/9/9/9/9/9/9/9 b",
    "x y z",
    "",
    "4k4/9/9/9/9/9/9/9/4K4 b 99P 1",
    "4k4/9/9/9/9/9/9/9/9 b - 1",
];

fn random_position(rng: &mut Rng) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut pos = if rng.chance(60) {
        words.push("startpos".into());
        Position::startpos()
    } else if rng.chance(80) {
        let sfen = rng.pick(&SFENS);
        words.push(format!("sfen {sfen}"));
        Position::from_sfen(sfen).unwrap()
    } else {
        let sfen = rng.pick(&BAD_SFENS);
        words.push(format!("sfen {sfen}"));
        Position::startpos()
    };
    if rng.chance(85) {
        words.push("moves".into());
        for _ in 0..rng.below(60) {
            let legal = pos.legal_moves();
            if legal.is_empty() {
                break;
            }
            let m = legal[rng.below(legal.len())];
            words.push(m.to_usi());
            pos.do_move(m);
        }
        if rng.chance(30) {
            words.push(rng.pick(&["7g7f", "5i5h", "P*5e", "9a9b+", "xx", "7g7f+", "K*5e", "0a0b", "1a1a"]).to_string());
            words.push("2g2f".into());
        }
    } else if rng.chance(30) {
        words.push("7g7f".into());
    }
    words.join(" ")
}

fn random_go(rng: &mut Rng) -> String {
    let mut parts: Vec<String> = Vec::new();
    if rng.chance(15) {
        parts.push("ponder".into());
    }
    match rng.below(9) {
        0 => parts.push(format!("nodes {}", rng.below(200))),
        1 => parts.push(format!("btime 0 wtime 0 byoyomi {}", rng.below(200))),
        2 => parts.push(format!("movetime {}", rng.below(150))),
        3 => parts.push(format!(
            "btime {} wtime {} binc {} winc {}",
            rng.below(3000),
            rng.below(3000),
            rng.below(100),
            rng.below(100)
        )),
        4 => parts.push("infinite".into()),
        5 => parts.push(format!("mate {}", rng.pick(&["100", "infinite", "x", ""]))),
        6 => parts.push(format!("nodes {} searchmoves 7g7f 2g2f 5i5h xx", rng.below(100))),
        7 => parts.push(format!("btime -5 wtime x byoyomi {} bogus depth 3 nodes", rng.below(100))),
        8 if rng.chance(50) => parts.push(format!(
            "btime 9223372036854775807 wtime -9223372036854775808 binc 99999999999999999999 byoyomi 9223372036854775807 nodes {}",
            rng.below(100)
        )),
        _ => parts.push(format!("btime {} wtime {} byoyomi 100", rng.below(1000), rng.below(1000))),
    }
    format!("go {}", parts.join(" "))
}

fn random_setoption(rng: &mut Rng) -> String {
    let name = *rng.pick(&[
        "MultiPV",
        "Playouts",
        "BatchSize",
        "SearchThreads",
        "UCT_Threads",
        "USI_Ponder",
        "ResignThreshold",
        "ByoyomiMargin",
        "EvalCoef",
        "ImpasseRule",
        "MaxMovesToDraw",
        "MateSearchPlies",
        "NNCacheSize",
        "USI_Hash",
        "Model",
        "Device",
        "Precision",
        "Nonsense",
    ]);
    let value = *rng.pick(&[
        "0",
        "1",
        "3",
        "50",
        "-7",
        "true",
        "false",
        "try",
        "none",
        "csa27",
        "cpu",
        "f16",
        "/no/model",
        "",
        "99999999999999999999",
    ]);
    if rng.chance(10) {
        format!("setoption {name} {value}")
    } else {
        format!("setoption name {name} value {value}")
    }
}

fn check_answer(pos: &Position, line: &str, impasse: ImpasseRule) {
    let word = line.split_whitespace().nth(1).unwrap_or("");
    match word {
        "resign" => {}
        "win" => {
            assert_eq!(pos.declaration(impasse), Some(Status::DeclarationWin), "false declaration in {}", pos.to_sfen())
        }
        text => {
            let m = Move::from_usi(text).unwrap_or_else(|| panic!("{line:?}"));
            assert!(pos.is_legal(m), "{line:?} illegal in {}", pos.to_sfen());
        }
    }
}

fn fuzz(seed: u64, steps: usize) {
    let mut rng = Rng(seed);
    let mut e = Harness::new();
    let mut pos = Position::startpos();
    let mut impasse = ImpasseRule::Csa27;
    let mut searches = 0;
    for _ in 0..steps {
        match rng.below(10) {
            0 | 1 => e.send_bytes(&[garbage_line(&mut rng), b"\n".to_vec()].concat()),
            2 => {
                let line = random_setoption(&mut rng);
                if let Some(rule) =
                    line.strip_prefix("setoption name ImpasseRule value ").and_then(ImpasseRule::from_name)
                {
                    impasse = rule;
                }
                e.send(&line);
            }
            3 | 4 => {
                let args = random_position(&mut rng);
                pos = expected_position(&args.split_whitespace().collect::<Vec<_>>());
                e.send(&format!("position {args}"));
            }
            5..=7 => {
                let go = random_go(&mut rng);
                let words: Vec<&str> = go.split_whitespace().skip(1).collect();
                let (params, _) = GoParams::parse(&words);
                e.send(&go);
                if params.infinite || params.ponder || params.mate == Some(koma_engine::time::MateLimit::Infinite) {
                    std::thread::sleep(Duration::from_millis(rng.below(150) as u64));
                    let mate_infinite = params.mate == Some(koma_engine::time::MateLimit::Infinite);
                    if params.ponder && !params.infinite && !mate_infinite && rng.chance(50) {
                        e.send("ponderhit");
                    } else {
                        e.send("stop");
                    }
                }
                if params.mate.is_some() {
                    let line =
                        e.until(LONG, |l| l.starts_with("checkmate") || l.starts_with("bestmove")).pop().unwrap();
                    assert!(line.starts_with("checkmate"), "{go}: {line}");
                } else {
                    let (line, _) = e.bestmove(LONG);
                    check_answer(&pos, &line, impasse);
                    searches += 1;
                }
            }
            8 => {
                let cmd = *rng.pick(&[
                    "stop",
                    "ponderhit",
                    "usinewgame",
                    "gameover win",
                    "gameover",
                    "debug on",
                    "register later",
                ]);
                e.send(cmd);
            }
            _ => {
                if rng.chance(5) {
                    // Longer than the engine reads: skipped whole, the position stays as it was.
                    let mut huge = b"position startpos moves ".to_vec();
                    huge.extend(b"7g7f 3c3d ".repeat(120_000));
                    huge.push(b'\n');
                    e.send_bytes(&huge);
                } else if rng.chance(10) {
                    // Long but within the limit: a full legal game, then thousands of illegal moves.
                    let mut args = String::from("startpos moves");
                    let mut p = Position::startpos();
                    for _ in 0..300 {
                        let legal = p.legal_moves();
                        if legal.is_empty() {
                            break;
                        }
                        let m = legal[rng.below(legal.len())];
                        args.push(' ');
                        args.push_str(&m.to_usi());
                        p.do_move(m);
                    }
                    args.push_str(&" 1a1b".repeat(50_000));
                    pos = expected_position(&args.split_whitespace().collect::<Vec<_>>());
                    e.send(&format!("position {args}"));
                } else {
                    e.send("isready");
                    e.until(LONG, |l| l == "readyok");
                }
            }
        }
    }
    // Still alive and answering.
    e.send("stop");
    e.send("usi");
    e.until(LONG, |l| l == "usiok");
    e.ready();
    e.send("position startpos moves 7g7f");
    e.send("go nodes 10");
    let (line, _) = e.bestmove(LONG);
    check_answer(&koma_shogi::usi::parse_position("startpos moves 7g7f").unwrap(), &line, ImpasseRule::Csa27);
    let bestmoves = e.log.iter().filter(|l| l.starts_with("bestmove")).count();
    assert_eq!(bestmoves, searches + 1, "one bestmove per go");
    e.send("quit");
    assert!(e.wait_exit(LONG));
}

#[test]
fn fuzz_seed_1() {
    fuzz(0x9e37_79b9_7f4a_7c15, 600);
}

#[test]
fn fuzz_seed_2() {
    fuzz(0x2545_f491_4f6c_dd1d, 600);
}
