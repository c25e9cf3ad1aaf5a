//! The USI client against scripted engines: a well-behaved one plays, misbehaving ones (crash,
//! silence, illegal move, garbage) forfeit and the match goes on with a fresh process; one that
//! keeps forfeiting stops the match; a cancel cuts a long think short.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{engine_factory, match_config, random, scripted};
use koma_arena::clock::TimeControl;
use koma_arena::error::EngineStartError;
use koma_arena::game::play_game;
use koma_arena::matches::{run_match, MatchConfig};
use koma_arena::player::{Player, RandomPlayer};
use koma_arena::usi_client::{GoLimit, UsiEngine, UsiEngineConfig, MAX_FORFEITS_IN_A_ROW};
use koma_shogi::rules::GameRules;
use koma_shogi::{Color, EndReason, Position};

fn play_against_random(config: UsiEngineConfig) -> koma_arena::game::PlayedGame {
    let mut engine = UsiEngine::start(config).unwrap();
    assert_eq!(engine.name(), "scripted");
    play_game(
        &mut engine,
        &mut RandomPlayer::new(1),
        &Position::startpos(),
        &GameRules::default(),
        &AtomicBool::new(false),
    )
    .unwrap()
}

#[test]
fn a_scripted_engine_plays_and_resigns() {
    // Plays 7g7f, then resigns.
    let g = play_against_random(scripted(
        "scripted",
        r#"if [ -z "$moved" ]; then echo "info depth 1"; echo "bestmove 7g7f"; moved=1; else echo "bestmove resign"; fi"#,
    ));
    assert_eq!(g.moves.len(), 2);
    assert_eq!(g.result.reason, EndReason::Resignation);
    assert_eq!(g.result.winner, Some(Color::White));
}

/// Japanese engines print `info string`s in Shift_JIS, and nothing bounds a line's length: the
/// engine still plays (before, the first non-UTF-8 line ended the reading and the engine
/// forfeited as if dead).
#[test]
fn an_engine_printing_shift_jis_and_endless_lines_still_plays() {
    let g = play_against_random(scripted(
        "scripted",
        r#"printf 'info string \x8f\xab\x8a\xfb \x8e\x76\x8d\x6c\x92\x86\r\n'; head -c 300000 /dev/zero | tr '\0' x; echo; if [ -z "$moved" ]; then echo "bestmove 7g7f"; moved=1; else echo "bestmove resign"; fi"#,
    ));
    assert_eq!(g.moves.len(), 2, "{:?}", g.note);
    assert_eq!((g.result.reason, g.result.winner), (EndReason::Resignation, Some(Color::White)), "{:?}", g.note);
}

#[test]
fn misbehaving_engines_forfeit() {
    for (on_go, reason, words) in [
        ("exit 3", EndReason::Forfeit, "crashed"),
        ("sleep 5", EndReason::TimeLoss, "in time"),
        ("echo 'bestmove 7g7e'", EndReason::IllegalMove, "illegal move"),
        ("echo 'bestmove banana'", EndReason::Forfeit, "not a USI move"),
        ("echo 'bestmove win'", EndReason::IllegalMove, "declared"),
    ] {
        let g = play_against_random(scripted("scripted", on_go));
        assert_eq!(g.result.winner, Some(Color::White), "{on_go}");
        assert_eq!(g.result.reason, reason, "{on_go}");
        assert!(g.note.as_deref().unwrap_or("").contains(words), "{on_go}: {:?}", g.note);
    }
}

#[test]
fn an_engine_that_never_starts_is_reported() {
    let mut config = scripted("scripted", "true");
    config.args = vec!["-c".into(), "sleep 10".into()];
    config.startup_timeout = Duration::from_millis(300);
    let err = UsiEngine::start(config).err().unwrap().to_string();
    assert!(err.contains("no answer in time"), "{err}");
    let mut missing = scripted("scripted", "true");
    missing.command = "/nonexistent/engine".into();
    let err = UsiEngine::start(missing).err().unwrap();
    assert!(err.to_string().contains("cannot start"), "{err}");
    // The OS's reason stays the cause: a caller can tell a missing program from others.
    assert!(matches!(&err, EngineStartError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound));
}

#[test]
fn an_engine_that_answered_late_is_restarted_before_the_next_game() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("timed-out-once");
    // The very first `go` is answered after the time limit (0.5 s) but before the next game's
    // would be, with a legal move of the wrong game; after that, every process plays 7g7f and
    // 2g2f, then resigns.
    let on_go = format!(
        r#"if [ ! -e '{mark}' ]; then touch '{mark}'; sleep 0.7; echo "bestmove 1g1f"; else n=$((n+1)); if [ $n = 1 ]; then echo "bestmove 7g7f"; elif [ $n = 2 ]; then echo "bestmove 2g2f"; else echo "bestmove resign"; fi; fi"#,
        mark = mark.display()
    );
    let mut engine = UsiEngine::start(scripted("scripted", &on_go)).unwrap();
    let (rules, never) = (GameRules::default(), AtomicBool::new(false));
    let first = play_game(&mut engine, &mut RandomPlayer::new(1), &Position::startpos(), &rules, &never).unwrap();
    assert_eq!(first.result.reason, EndReason::TimeLoss);
    // The late `bestmove 1g1f` must not answer this game's first `go`.
    let second = play_game(&mut engine, &mut RandomPlayer::new(2), &Position::startpos(), &rules, &never).unwrap();
    let moves: Vec<String> = second.moves.iter().map(|m| m.to_usi()).collect();
    assert_eq!(moves.len(), 4, "{moves:?}");
    assert_eq!((moves[0].as_str(), moves[2].as_str()), ("7g7f", "2g2f"), "{moves:?}");
    assert_eq!((second.result.reason, second.result.winner), (EndReason::Resignation, Some(Color::White)));
}

#[test]
fn an_engine_that_keeps_crashing_stops_the_match() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let error = run_match(
        engine_factory(scripted("scripted", "exit 3")),
        random(),
        &match_config(20, Some(results.clone())),
        &mut |_, _| {},
    )
    .expect_err("an engine that cannot play was scored as losing every game");
    let forfeits = MAX_FORFEITS_IN_A_ROW as usize;
    let message = error.to_string();
    assert!(
        message.contains("scripted")
            && message.contains(&format!("{forfeits} games in a row"))
            && message.contains("crashed")
            && !error.results_lost(),
        "{message}"
    );
    // The forfeits before stay in the results.
    let text = std::fs::read_to_string(&results).unwrap();
    assert_eq!(text.lines().count(), forfeits, "{text}");
    assert!(text.lines().all(|l| l.contains(r#""reason":"Forfeit""#)), "{text}");
}

#[test]
fn an_engine_that_cannot_be_restarted_stops_the_match() {
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started-once");
    // It starts once, crashes at its first `go`, and never answers `usi` again.
    let mut config = scripted("scripted", "exit 3");
    let script = config.args[1].clone();
    config.args[1] = format!("if [ -e '{0}' ]; then sleep 10; fi; touch '{0}'; {script}", started.display());
    config.startup_timeout = Duration::from_millis(500);
    let mut engine = UsiEngine::start(config).unwrap();
    let never = AtomicBool::new(false);
    let first = play_game(&mut engine, &mut RandomPlayer::new(1), &Position::startpos(), &GameRules::default(), &never)
        .unwrap();
    assert_eq!(first.result.reason, EndReason::Forfeit);
    let unfinished =
        play_game(&mut engine, &mut RandomPlayer::new(2), &Position::startpos(), &GameRules::default(), &never)
            .unwrap_err();
    let koma_arena::game::Unfinished::Failed(error) = unfinished else { panic!("{unfinished:?}") };
    assert!(
        error.fatal && error.message.contains("could not be restarted") && error.message.contains("no answer in time"),
        "{error:?}"
    );
}

#[test]
fn a_cancel_cuts_an_engine_s_long_think_short() {
    let mut config = scripted("scripted", "sleep 30");
    config.limit = GoLimit::MoveTime(60_000);
    let cancel = Arc::new(AtomicBool::new(false));
    let match_config = MatchConfig { cancel: Some(cancel.clone()), ..match_config(2, None) };
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(run_match(engine_factory(config), random(), &match_config, &mut |_, _| {}));
    });
    std::thread::sleep(Duration::from_millis(500));
    cancel.store(true, Ordering::SeqCst);
    let state = finished.recv_timeout(Duration::from_secs(3)).expect("the match went on 3 s after the cancel").unwrap();
    assert_eq!(state.played, 0);
}

#[test]
fn an_engine_on_a_clock_gets_both_clocks_and_loses_on_time_when_late() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("go lines");
    // Plays 7g7f and 2g2f at once, then sleeps 1.5 s on its third move: 1 s of main time and 300 ms
    // of byoyomi do not cover it.
    let on_go = format!(
        r#"echo "$rest" >> '{log}'; n=$((n+1)); if [ $n = 1 ]; then echo "bestmove 7g7f"; elif [ $n = 2 ]; then echo "bestmove 2g2f"; else sleep 1.5; echo "bestmove 1g1f"; fi"#,
        log = log.display()
    );
    let mut config = scripted("scripted", &on_go);
    config.limit =
        GoLimit::Clock(TimeControl::new(Duration::from_secs(1), Duration::from_millis(300), Duration::ZERO).unwrap());
    config.margin = Duration::from_millis(50);
    let mut engine = UsiEngine::start(config).unwrap();
    let game = play_game(
        &mut engine,
        &mut RandomPlayer::new(1),
        &Position::startpos(),
        &GameRules::default(),
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(game.moves.len(), 4);
    assert_eq!((game.result.reason, game.result.winner), (EndReason::TimeLoss, Some(Color::White)));
    let note = game.note.unwrap();
    assert!(note.contains("scripted (Black) lost on time (1s + 300ms byoyomi)"), "{note}");
    // The first `go` has both clocks full (the untimed random player is shown Black's clock);
    // the next ones have Black's main time going down, White's unchanged.
    let lines: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    assert_eq!(lines[0], "btime 1000 wtime 1000 byoyomi 300");
    let btime = |line: &str| line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap();
    assert!(btime(&lines[1]) < 1000 && btime(&lines[2]) <= btime(&lines[1]), "{lines:?}");
}

#[test]
fn an_engine_in_sudden_death_loses_when_its_main_time_runs_out() {
    // Two moves at once, then one of 1.5 s: a main time of 0.5 s covers the first two, however
    // loaded the machine, and never the third.
    let mut config = scripted(
        "scripted",
        r#"n=$((n+1)); if [ $n = 1 ]; then echo "bestmove 7g7f"; elif [ $n = 2 ]; then echo "bestmove 2g2f"; else sleep 1.5; echo "bestmove 1g1f"; fi"#,
    );
    config.limit =
        GoLimit::Clock(TimeControl::new(Duration::from_millis(500), Duration::ZERO, Duration::ZERO).unwrap());
    config.margin = Duration::from_millis(50);
    let game = play_against_random(config);
    assert_eq!((game.result.reason, game.result.winner), (EndReason::TimeLoss, Some(Color::White)));
    assert_eq!(game.moves.len(), 4, "two moves in time, the third late");
    assert!(game.note.unwrap().contains("500ms sudden death"));
}

/// An engine with a folder of its own starts there (engines read their evaluation files relative
/// to it), a relative program path still names the same program, and a missing folder is a clear
/// error.
#[test]
fn an_engine_starts_in_its_folder() {
    let folder = tempfile::tempdir().unwrap();
    let mut config = scripted("scripted", "echo bestmove resign");
    // The engine names itself after its working folder.
    config.args[1] = config.args[1].replace("id name scripted", "id name $(pwd -P)");
    config.working_dir = Some(folder.path().to_path_buf());
    let engine = UsiEngine::start(config.clone()).unwrap();
    assert_eq!(engine.name(), folder.path().canonicalize().unwrap().display().to_string());
    config.working_dir = Some(folder.path().join("missing"));
    let err = UsiEngine::start(config).err().expect("a missing folder is an error").to_string();
    assert!(err.contains("missing") && err.contains("is not a folder"), "{err}");
}

/// Whether process `pid` runs (a zombie, killed and not yet reaped, does not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|rest| rest.trim_start().chars().next()) != Some('Z'),
        Err(_) => false,
    }
}

/// An engine started through a wrapper that starts a process of its own: ending it kills the
/// wrapper and everything it started (its process group), whether it obeys `quit` or not.
#[test]
fn a_wrapped_engine_is_killed_with_everything_it_started() {
    for obeys_quit in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("helper.pid");
        let mut config = scripted("wrapped", r#"echo "bestmove resign""#);
        let body =
            if obeys_quit { config.args[1].clone() } else { config.args[1].replace("quit) exit 0 ;;", "quit) ;;") };
        config.args[1] = format!("sleep 300 & echo $! > '{}'\n{body}", pid_file.display());
        let engine = UsiEngine::start(config).unwrap();
        let helper: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        assert!(alive(helper));
        drop(engine);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while alive(helper) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(helper), "obeys quit: {obeys_quit}: the wrapper's helper {helper} survived the engine");
    }
}
