//! Game records: the hand-written samples in data/records/, round trips of random games from every
//! handicap start with every kind of ending through every format, notation uniqueness, and
//! convert_path on a directory with bad files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use koma_shogi::record::{self, csa, ki2, kif, notation, Format, GameRecord, ParseErrorKind, RecordError, RecordMove};
use koma_shogi::{Color, EndReason, GameResult, Handicap, Move, Position};

mod common;
use common::Rng;

fn data_dir() -> PathBuf {
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
        .join("../../data/records");
    dir.canonicalize().unwrap_or(dir)
}

fn read(name: &str, format: Format) -> Vec<GameRecord> {
    record::read_file(&data_dir().join(name), format).unwrap_or_else(|e| panic!("{e}"))
}

fn usi_moves(g: &GameRecord) -> String {
    g.moves.iter().map(|m| m.mv.to_usi()).collect::<Vec<_>>().join(" ")
}

fn result(winner: Option<Color>, reason: EndReason) -> Option<GameResult> {
    Some(GameResult { winner, reason })
}

// ---- hand-written samples -------------------------------------------------------------------

#[test]
fn sample_kif_shift_jis_with_same_promotion_choice_comments_times_and_variation() {
    let bytes = std::fs::read(data_dir().join("even_tricky.kif")).unwrap();
    assert!(std::str::from_utf8(&bytes).is_err(), "the sample must be Shift_JIS");
    let g = &read("even_tricky.kif", Format::Kif)[0];
    assert_eq!(usi_moves(g), "7g7f 3c3d 8h2b+ 3a2b B*4e 8b7b 4e6c 7a6b 6c5b+ 6a5b 2g2f 6b6c");
    assert_eq!(g.black.as_deref(), Some("先手太郎"));
    assert_eq!(g.white.as_deref(), Some("後手花子"));
    assert_eq!(g.handicap(), Some(Handicap::Even));
    assert!(g.headers.contains(&("EVENT".to_string(), "koma sample".to_string())));
    assert!(g.headers.contains(&("START_TIME".to_string(), "2024/05/01(水) 10:00:00".to_string())));
    assert_eq!(g.comments, vec!["対局前のコメント".to_string()]);
    assert_eq!(g.moves[2].comment.as_deref(), Some("角交換"));
    assert_eq!(g.moves[4].time, Some(Duration::from_secs(90)));
    assert_eq!(g.moves[6].eval, Some(250));
    assert!(!g.moves[6].mv.is_promotion(), "６三角不成 declines promotion");
    assert!(g.moves[8].mv.is_promotion());
    // 13 投了: Black (to move) resigned; the variation after 変化 is not read.
    assert_eq!(g.result, result(Some(Color::White), EndReason::Resignation));
}

#[test]
fn sample_kifu_handicap_time_loss() {
    let g = &read("handicap_two_piece.kifu", Format::Kif)[0];
    assert_eq!(g.handicap(), Some(Handicap::TwoPiece));
    assert_eq!(g.start.side_to_move(), Color::White);
    assert_eq!(usi_moves(g), "6c6d 7g7f 6d6e 2g2f 6e6f 6g6f");
    assert_eq!((g.black.as_deref(), g.white.as_deref()), (Some("Shitate"), Some("Uwate")));
    assert_eq!(g.moves[5].comment.as_deref(), Some("上手の時間切れ"));
    assert_eq!(g.result, result(Some(Color::Black), EndReason::TimeLoss));
}

#[test]
fn sample_kifu_board_diagram_start_with_bom() {
    let g = &read("bod_mate.kifu", Format::Kif)[0];
    assert_eq!(g.start.to_sfen(), "4k4/9/4P4/9/9/9/9/9/4K4 b G2r2b3g4s4n4l17p 1");
    assert_eq!(usi_moves(g), "G*5b");
    assert_eq!(g.result, result(Some(Color::Black), EndReason::Checkmate));
    assert!(!g.final_position().unwrap().has_legal_move());
}

#[test]
fn sample_csa_three_games() {
    let games = read("multi.csa", Format::Csa);
    assert_eq!(games.len(), 3);
    let g = &games[0];
    assert_eq!(usi_moves(g), "7g7f 3c3d 8h2b+ 3a2b B*4e 8b7b 4e6c 7a6b 6c5b+ 6a5b");
    assert_eq!((g.black.as_deref(), g.white.as_deref()), (Some("Sente Taro"), Some("Gote Hanako")));
    assert_eq!(g.headers[0], ("EVENT".to_string(), "koma sample".to_string()));
    assert_eq!(
        g.comments,
        vec!["CSA multi-game sample: three games separated by '/'".to_string(), "game comment".to_string()]
    );
    let times: Vec<Option<u64>> = g.moves.iter().map(|m| m.time.map(|t| t.as_secs())).collect();
    assert_eq!(&times[..6], &[Some(12), Some(5), Some(3), Some(4), Some(90), None]);
    assert_eq!(g.moves[2].comment.as_deref(), Some(" bishop exchange"));
    assert_eq!(g.moves[6].eval, Some(250));
    assert_eq!(g.result, result(Some(Color::White), EndReason::Resignation));

    let g = &games[1];
    assert_eq!(g.handicap(), Some(Handicap::TwoPiece));
    assert_eq!(usi_moves(g), "5a4b 7g7f 4b3b 2g2f");
    assert_eq!(g.result, result(None, EndReason::Abort));

    let g = &games[2];
    assert_eq!(g.start.to_sfen(), "4k4/9/4P4/9/9/9/9/9/4K4 w G2r2b3g4s4n4l17p 1");
    assert_eq!(usi_moves(g), "5a4a 5c5b+ 4a5b");
    assert_eq!(g.result, result(Some(Color::White), EndReason::TimeLoss));
}

#[test]
fn sample_ki2_disambiguation_and_drop_without_uchi() {
    let g = &read("sample.ki2", Format::Ki2)[0];
    assert_eq!(usi_moves(g), "7g7f 3c3d 8h2b+ 3a2b B*4e 8b7b 4e6c 7a6b 6c5b+ 6a5b 4i5h 6b6c");
    assert_eq!(g.moves[6].comment.as_deref(), Some("不成で迫る"));
    assert_eq!(g.result, result(Some(Color::White), EndReason::Resignation));
    // And KI2 written by koma reads back.
    let text = ki2::write_ki2(g).unwrap();
    assert!(text.contains("▲５八金右"), "{text}");
    assert_eq!(usi_moves(&kif::parse_kif(&text).unwrap()), usi_moves(g));
    // 打 only where a board gold could also reach the square.
    let g = &read("drop_uchi.ki2", Format::Ki2)[0];
    assert_eq!(usi_moves(g), "G*5h 5a5b 6i6h 5b4b 5h5g 4b5a");
    assert_eq!(g.moves[5].comment.as_deref(), Some("先手の金が上がる"));
    assert_eq!(g.result, result(None, EndReason::Abort));
    let text = ki2::write_ki2(g).unwrap();
    assert!(text.contains("▲５八金打") && text.contains("▲６八金上") && text.contains("▲５七金直"), "{text}");
    // An ambiguous move is an error on its line.
    let e = kif::parse_kif("手合割：平手\n▲７六歩    △３四歩\n▲５八金\n").unwrap_err();
    assert_eq!((e.line, e.move_number), (3, Some(3)), "{e}");
    assert!(e.to_string().contains("ambiguous"), "{e}");
}

#[test]
fn sample_usi_lines() {
    let games = read("games.usi", Format::Usi);
    assert_eq!(games.len(), 4);
    assert_eq!(games[0].to_usi_position(), "position startpos moves 7g7f 3c3d 8h2b+ 3a2b B*4e");
    assert_eq!(games[2].handicap(), Some(Handicap::TwoPiece));
    assert_eq!(usi_moves(&games[3]), "G*5b");
}

#[test]
fn bad_samples_name_line_and_move() {
    let e = record::read_file(&data_dir().join("bad/illegal_move.csa"), Format::Csa).unwrap_err();
    let RecordError::Parse { error, .. } = &e else { panic!("{e}") };
    assert_eq!((error.line, error.move_number), (5, Some(3)), "{e}");
    assert!(matches!(error.kind, ParseErrorKind::BadMove { .. }), "{e}");
    assert!(
        e.to_string().ends_with("illegal_move.csa: line 5, move 3: invalid move \"+7776FU\": no Black piece on 77"),
        "{e}"
    );
    let e = record::read_file(&data_dir().join("bad/wrong_origin.kifu"), Format::Kif).unwrap_err();
    let RecordError::Parse { error, .. } = &e else { panic!("{e}") };
    assert_eq!((error.line, error.move_number), (4, Some(3)), "{e}");
}

#[test]
fn convert_directory_keeps_going_after_bad_files() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let summary = record::convert_path(&data_dir(), Format::Kif, Format::Csa, Some(&out)).unwrap();
    assert_eq!(summary.converted.len(), 3, "{summary:?}"); // .kif and .kifu files; .ki2 is not KIF
    assert_eq!(summary.errors.len(), 1, "{summary:?}");
    assert!(summary.errors[0].to_string().contains("wrong_origin.kifu: line 4, move 3"), "{}", summary.errors[0]);
    let back = record::read_file(&out.join("even_tricky.csa"), Format::Csa).unwrap();
    assert_eq!(usi_moves(&back[0]), usi_moves(&read("even_tricky.kif", Format::Kif)[0]));

    // CSA with three games to KIF: one file per game.
    let summary = record::convert_path(&data_dir().join("multi.csa"), Format::Csa, Format::Kifu, Some(&out)).unwrap();
    assert!(summary.is_ok(), "{:?}", summary.errors);
    assert_eq!(summary.converted[0].outputs.len(), 3);
    let second = record::read_file(&out.join("multi-2.kifu"), Format::Kif).unwrap();
    assert_eq!(second[0].handicap(), Some(Handicap::TwoPiece));

    // Converting a directory in place refuses to overwrite its inputs.
    let inplace = out.join("inplace");
    std::fs::create_dir_all(&inplace).unwrap();
    std::fs::copy(data_dir().join("multi.csa"), inplace.join("multi.csa")).unwrap();
    let summary = record::convert_path(&inplace, Format::Csa, Format::Csa, None).unwrap();
    assert_eq!(summary.errors.len(), 1);
    let summary = record::convert_path(&inplace, Format::Csa, Format::Usi, None).unwrap();
    assert!(summary.is_ok());
    assert_eq!(std::fs::read_to_string(inplace.join("multi.usi")).unwrap().lines().count(), 3);
    assert!(record::convert_path(&out.join("missing"), Format::Csa, Format::Usi, None).is_err());
}

#[test]
fn a_symlink_loop_is_reported_and_not_followed() {
    let scratch = tempfile::tempdir().unwrap();
    let games = scratch.path().join("games");
    std::fs::create_dir_all(games.join("a")).unwrap();
    std::fs::copy(data_dir().join("multi.csa"), games.join("a/multi.csa")).unwrap();
    // games/a/up -> games: entering it again would loop until the path is too long.
    std::os::unix::fs::symlink(&games, games.join("a/up")).unwrap();
    // A link to a directory elsewhere is followed once, as any directory.
    let other = scratch.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(data_dir().join("multi.csa"), other.join("more.csa")).unwrap();
    std::os::unix::fs::symlink(&other, games.join("linked")).unwrap();
    let out = scratch.path().join("out");
    let summary = record::convert_path(&games, Format::Csa, Format::Usi, Some(&out)).unwrap();
    let inputs: Vec<String> = summary.converted.iter().map(|f| f.input.display().to_string()).collect();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert_eq!(summary.errors.len(), 1, "{:?}", summary.errors);
    let loop_error = summary.errors[0].to_string();
    assert!(loop_error.contains("a/up") && loop_error.contains("loop"), "{loop_error}");
}

#[test]
fn fuzz_findings_stay_fixed() {
    // A checkmate claimed where the position is not mate (found by the kif fuzz target): every
    // writer must keep it, although `%TORYO` and `…の勝ち` would read back as a resignation.
    let g = kif::parse_kif("13詰み ").unwrap();
    assert_eq!(g.result, result(Some(Color::White), EndReason::Checkmate));
    for f in [Format::Csa, Format::Kif, Format::Kifu, Format::Ki2] {
        let bytes = record::write_games(std::slice::from_ref(&g), f).unwrap();
        assert_eq!(record::read_games(&bytes, f).unwrap()[0].result, g.result, "{f}");
    }
    // A header whose key starts with NULs and digits must not come back as a move line.
    let bytes = b"\x00\x0005/01 10:00\xef\xbc\x9av\n   1 \xef\xbc\x97\xe5\x85\xad\xe6\xad\xa9(77)\n";
    let g = &record::read_games(bytes, Format::Kif).unwrap()[0];
    assert_eq!(usi_moves(g), "7g7f");
    let back = &record::read_games(&record::write_games(std::slice::from_ref(g), Format::Kif).unwrap(), Format::Kif)
        .unwrap()[0];
    assert_eq!(usi_moves(back), "7g7f");
}

// ---- random games ------------------------------------------------------------------------------

const TEXTS: [&str; 6] = ["good move", "悪手", "角交換 ok", " leading space", "x, y; z", "評価 +3"];

fn random_playout(rng: &mut Rng, start: &Position, max_plies: usize) -> Position {
    let mut pos = start.clone();
    let plies = rng.below(max_plies + 1);
    for _ in 0..plies {
        let moves = pos.legal_moves();
        if moves.as_slice().is_empty() {
            break;
        }
        if rng.chance(30) {
            if let Some(m) = pos.mate_in_one() {
                pos.do_move(m);
                continue;
            }
        }
        // Prefer captures and promotions now and then, so games get pieces in hand and drops.
        let list = moves.as_slice();
        let interesting: Vec<Move> = list
            .iter()
            .copied()
            .filter(|m| m.is_promotion() || (!m.is_drop() && pos.piece_at(m.to()).is_some()) || m.is_drop())
            .collect();
        let m = if !interesting.is_empty() && rng.chance(50) {
            interesting[rng.below(interesting.len())]
        } else {
            list[rng.below(list.len())]
        };
        pos.do_move(m);
    }
    pos
}

/// Any result whose winner fits its reason: the usual ones (a resignation by the side to move,
/// a checkmate where the position is mate) and the odd ones a file can still state (a resignation
/// by the side that just moved, a declaration won by the other side); every format keeps them all.
fn random_result(rng: &mut Rng, final_pos: &Position) -> Option<GameResult> {
    let stm = final_pos.side_to_move();
    if rng.chance(8) {
        return None;
    }
    if !final_pos.has_legal_move() && rng.chance(70) {
        return result(Some(!stm), EndReason::Checkmate);
    }
    const REASONS: [EndReason; 11] = [
        EndReason::Checkmate,
        EndReason::Resignation,
        EndReason::Repetition,
        EndReason::PerpetualCheck,
        EndReason::Declaration,
        EndReason::Try,
        EndReason::MaxMoves,
        EndReason::TimeLoss,
        EndReason::IllegalMove,
        EndReason::Forfeit,
        EndReason::Abort,
    ];
    let reason = REASONS[rng.below(REASONS.len())];
    // Mostly the usual winner (the side that did not move last wins a resignation), sometimes not.
    let usual = if matches!(reason, EndReason::Declaration) { stm } else { !stm };
    let side = if rng.chance(75) { usual } else { !usual };
    let winner = match reason {
        EndReason::Repetition | EndReason::MaxMoves | EndReason::Abort => None,
        EndReason::Declaration if rng.chance(30) => None,
        _ => Some(side),
    };
    result(winner, reason)
}

fn random_game(rng: &mut Rng, index: usize) -> GameRecord {
    // Every handicap start in turn, and now and then a random mid-game start (hands, promoted
    // pieces, either side to move).
    let cycle = Handicap::ALL.len() + 1;
    let start = if index % cycle == cycle - 1 {
        let p = random_playout(rng, &Position::startpos(), 80);
        Position::from_sfen(&p.to_sfen()).unwrap()
    } else {
        Handicap::ALL[index % cycle].position()
    };
    let end = random_playout(rng, &start, 160);
    let mut g = GameRecord::from_position(&end);
    g.start = start;
    for m in &mut g.moves {
        if rng.chance(60) {
            m.time = Some(Duration::from_secs(rng.below(400) as u64));
        }
        if rng.chance(10) {
            m.comment = Some(if rng.chance(30) {
                format!("{}\n{}", TEXTS[rng.below(6)], TEXTS[rng.below(6)])
            } else {
                TEXTS[rng.below(6)].to_string()
            });
        }
        if rng.chance(15) {
            m.eval = Some(rng.below(4001) as i32 - 2000);
        }
    }
    g.result = random_result(rng, &end);
    if rng.chance(70) {
        g.black = Some(["Sente", "先手 名人", "a b"][rng.below(3)].to_string());
        g.white = Some(["Gote", "後手", "koma-0.1"][rng.below(3)].to_string());
    }
    if rng.chance(30) {
        g.headers.push(("EVENT".into(), "random 対局".into()));
        g.headers.push(("START_TIME".into(), "2025/01/01 10:00:00".into()));
    }
    if rng.chance(20) {
        g.comments.push(TEXTS[rng.below(6)].to_string());
    }
    g
}

fn board_key(p: &Position) -> String {
    let s = p.to_sfen();
    s.rsplit_once(' ').map(|(head, _)| head.to_string()).unwrap_or(s)
}

fn assert_same_game(a: &GameRecord, b: &GameRecord, what: &str, whole_seconds: bool) {
    assert_eq!(board_key(&a.start), board_key(&b.start), "{what}: start");
    let moves = |g: &GameRecord| g.moves.iter().map(|m| m.mv).collect::<Vec<_>>();
    assert_eq!(moves(a), moves(b), "{what}: moves");
    assert_eq!(a.result, b.result, "{what}: result");
    assert_eq!((&a.black, &a.white), (&b.black, &b.white), "{what}: names");
    assert_eq!(a.headers, b.headers, "{what}: headers");
    assert_eq!(a.comments, b.comments, "{what}: game comments");
    for (i, (x, y)) in a.moves.iter().zip(&b.moves).enumerate() {
        let t = |m: &RecordMove| if whole_seconds { m.time.map(|t| Duration::from_secs(t.as_secs())) } else { m.time };
        assert_eq!(t(x), t(y), "{what}: time of move {}", i + 1);
        assert_eq!(x.comment, y.comment, "{what}: comment of move {}", i + 1);
        assert_eq!(x.eval, y.eval, "{what}: eval of move {}", i + 1);
    }
}

#[test]
fn random_games_round_trip_through_every_format() {
    let started = std::time::Instant::now();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let games: Vec<GameRecord> = (0..1300).map(|i| random_game(&mut rng, i)).collect();
    let mut reasons = std::collections::HashSet::new();
    for (i, g) in games.iter().enumerate() {
        if let Some(r) = g.result {
            reasons.insert(format!("{:?}", r.reason));
        }
        let what = |f: &str| format!("game {i} ({f}) {}", g.to_usi_position());
        let text = csa::write_csa(g).unwrap();
        let back = csa::parse_csa(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", what("csa")));
        assert_eq!(back.len(), 1);
        assert_same_game(g, &back[0], &what("csa"), false);

        let text = kif::write_kif(g).unwrap();
        let back = kif::parse_kif(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", what("kif")));
        assert_same_game(g, &back, &what("kif"), true);
        let sjis = record::write_games(std::slice::from_ref(g), Format::Kif).unwrap();
        let back = &record::read_games(&sjis, Format::Kif).unwrap()[0];
        assert_same_game(g, back, &what("kif shift_jis"), true);

        let text = ki2::write_ki2(g).unwrap();
        let back = kif::parse_kif(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", what("ki2")));
        let mut timeless = g.clone();
        timeless.moves.iter_mut().for_each(|m| m.time = None);
        assert_same_game(&timeless, &back, &what("ki2"), false);

        for f in [Format::Usi, Format::Sfen] {
            let bytes = record::write_games(std::slice::from_ref(g), f).unwrap();
            let back = &record::read_games(&bytes, f).unwrap()[0];
            assert_eq!(back.start.to_sfen(), g.start.to_sfen());
            assert_eq!(
                back.moves.iter().map(|m| m.mv).collect::<Vec<_>>(),
                g.moves.iter().map(|m| m.mv).collect::<Vec<_>>()
            );
        }
    }
    // Every ending appears, every handicap too.
    assert_eq!(reasons.len(), 11, "{reasons:?}");
    // All games in one CSA file.
    let text = csa::write_csa_games(&games).unwrap();
    let back = csa::parse_csa(&text).unwrap();
    assert_eq!(back.len(), games.len());
    for (i, (a, b)) in games.iter().zip(&back).enumerate() {
        assert_same_game(a, b, &format!("multi-game csa, game {i}"), false);
    }
    eprintln!("{} random games round-tripped in {:?}", games.len(), started.elapsed());
}

#[test]
fn notation_names_each_legal_move_alone() {
    let mut rng = Rng(12345);
    let mut positions = 0;
    let mut checked = 0usize;
    for i in 0..150 {
        let start = Handicap::ALL[i % Handicap::ALL.len()].position();
        let mut pos = start.clone();
        let mut prev: Option<Move> = None;
        for _ in 0..rng.below(200) {
            let list = pos.legal_moves();
            let moves = list.as_slice();
            if moves.is_empty() {
                break;
            }
            positions += 1;
            let prev_to = prev.map(|m| m.to());
            let mut seen =
                [std::collections::HashSet::new(), std::collections::HashSet::new(), std::collections::HashSet::new()];
            for &m in moves {
                let texts =
                    [notation::western(&pos, m), notation::vietnamese(&pos, m), notation::japanese(&pos, m, prev_to)];
                for (set, t) in seen.iter_mut().zip(&texts) {
                    assert!(set.insert(t.clone()), "{t} names two moves in {}", pos.to_sfen());
                }
                assert_eq!(
                    notation::parse_japanese(&pos, &texts[2], prev_to),
                    Ok(m),
                    "{} in {}",
                    texts[2],
                    pos.to_sfen()
                );
                checked += 1;
            }
            let m = if rng.chance(40) {
                let caps: Vec<Move> = moves
                    .iter()
                    .copied()
                    .filter(|m| !m.is_drop() && pos.piece_at(m.to()).is_some() || m.is_drop())
                    .collect();
                if caps.is_empty() {
                    moves[rng.below(moves.len())]
                } else {
                    caps[rng.below(caps.len())]
                }
            } else {
                moves[rng.below(moves.len())]
            };
            pos.do_move(m);
            prev = Some(m);
        }
    }
    eprintln!("notation: {checked} moves in {positions} positions");
}

#[test]
fn readers_never_panic_on_mutated_records() {
    // A quick, deterministic cousin of the fuzz targets: cut, duplicate and flip bytes of the
    // samples and of written random games; every outcome must be Ok or a located error.
    let mut rng = Rng(777);
    let mut inputs: Vec<(Vec<u8>, Format)> = Vec::new();
    for name in ["even_tricky.kif", "handicap_two_piece.kifu", "bod_mate.kifu", "sample.ki2", "drop_uchi.ki2"] {
        inputs.push((std::fs::read(data_dir().join(name)).unwrap(), Format::Kif));
    }
    inputs.push((std::fs::read(data_dir().join("multi.csa")).unwrap(), Format::Csa));
    inputs.push((std::fs::read(data_dir().join("games.usi")).unwrap(), Format::Usi));
    for i in 0..20 {
        let g = random_game(&mut rng, i);
        inputs.push((record::write_games(std::slice::from_ref(&g), Format::Csa).unwrap(), Format::Csa));
        inputs.push((record::write_games(std::slice::from_ref(&g), Format::Kifu).unwrap(), Format::Kif));
    }
    let mut errors = 0;
    for round in 0..3000 {
        let (base, format) = &inputs[round % inputs.len()];
        let mut data = base.clone();
        for _ in 0..1 + rng.below(4) {
            if data.is_empty() {
                break;
            }
            let at = rng.below(data.len());
            match rng.below(4) {
                0 => data[at] = rng.next() as u8,
                1 => {
                    data.remove(at);
                }
                2 => {
                    let end = (at + rng.below(40)).min(data.len());
                    let chunk = data[at..end].to_vec();
                    let to = rng.below(data.len());
                    data.splice(to..to, chunk);
                }
                _ => data.truncate(at),
            }
        }
        match record::read_games(&data, *format) {
            Ok(games) => {
                for g in &games {
                    for f in Format::ALL {
                        let _ = record::write_games(std::slice::from_ref(g), f).unwrap();
                    }
                }
            }
            Err(e) => {
                errors += 1;
                assert!(e.line >= 1);
                assert!(!e.to_string().is_empty());
            }
        }
    }
    assert!(errors > 100);
}

#[test]
fn every_handicap_is_written_and_read_as_its_kif_name() {
    for h in Handicap::ALL {
        let start = h.position();
        let end = {
            let mut p = start.clone();
            for _ in 0..4 {
                let m = p.legal_moves()[0];
                p.do_move(m);
            }
            p
        };
        let mut g = GameRecord::from_position(&end);
        g.start = start.clone();
        let text = record::kif::write_kif(&g).unwrap();
        if !matches!(h, Handicap::ThreePawns | Handicap::NakedKing) {
            assert!(text.contains(&format!("手合割：{}\n", h.japanese_name())), "{h:?}:\n{text}");
        }
        let back = record::kif::parse_kif(&text).unwrap();
        assert_eq!(back.handicap(), Some(h), "{h:?}");
        assert_eq!(back.start.to_sfen(), start.to_sfen());
        assert_eq!(back.moves.len(), 4);
        // The ASCII and the KIF name, and the names other spellings take.
        assert_eq!(Handicap::from_name(h.name()), Some(h));
        assert_eq!(Handicap::from_name(&h.name().to_ascii_uppercase().replace('-', "_")), Some(h));
        let header = format!("手合割：{}\n手数----指手---------消費時間--\n", h.japanese_name());
        assert_eq!(record::kif::parse_kif(&header).unwrap().start.to_sfen(), start.to_sfen(), "{h:?}");
    }
    // The seeds' handicaps: the pieces White gives (its left is the 1 file).
    let sfen = |name: &str| Handicap::from_name(name).unwrap().sfen();
    assert_eq!(sfen("右香落ち"), "1nsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1");
    assert_eq!(sfen("三枚落ち"), "lnsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1");
    assert_eq!(sfen("五枚落ち"), "2sgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1");
    assert_eq!(sfen("左五枚落ち"), "1nsgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1");
    assert_eq!(Handicap::from_name("five-pieces"), None);
}

#[test]
fn diagrams_read_every_printed_promoted_piece() {
    // 全 promoted silver, 今/圭 promoted knight, 仝/杏 promoted lance, 个/と tokin.
    let text = "\
後手の持駒：なし
  ９ ８ ７ ６ ５ ４ ３ ２ １
+---------------------------+
| ・ ・ ・ ・v玉 ・ ・ ・ ・|一
| ・ ・ ・ ・ ・ ・ ・ ・ ・|二
| 全 今 圭 仝 杏 个 と ・ ・|三
| ・ ・ ・ ・ ・ ・ ・ ・ ・|四
| ・ ・ ・ ・ ・ ・ ・ ・ ・|五
| ・ ・ ・ ・ ・ ・ ・ ・ ・|六
|v全v今v圭v仝v杏v个vと ・ ・|七
| ・ ・ ・ ・ ・ ・ ・ ・ ・|八
| ・ ・ ・ ・ 玉 ・ ・ ・ ・|九
+---------------------------+
先手の持駒：なし
手数----指手---------消費時間--
   1 ８二今(83)
   2 ３八个(47)
   3 ６四仝(63)
";
    let g = record::kif::parse_kif(text).unwrap();
    assert_eq!(g.start.to_sfen(), "4k4/9/+S+N+N+L+L+P+P2/9/9/9/+s+n+n+l+l+p+p2/9/4K4 b - 1");
    assert_eq!(usi_moves(&g), "8c8b 4g3h 6c6d");
    // Written back with the usual characters (全 圭 杏 と), and read again to the same start.
    let diagram = record::bod::board_diagram(&g.start);
    assert!(diagram.contains("| 全 圭 圭 杏 杏 と と ・ ・|三"), "{diagram}");
    assert_eq!(
        record::kif::parse_kif(&record::kif::write_kif(&g).unwrap()).unwrap().start.to_sfen(),
        g.start.to_sfen()
    );
}
