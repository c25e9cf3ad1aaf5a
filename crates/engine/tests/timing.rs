//! Time management with a real (tiny, random) network on the CPU: the engine plays both sides
//! and the test measures the wall time from sending `go` to reading `bestmove`, as a GUI does.
//! No move may take longer than the clock allows (byoyomi; main time with increment; sudden
//! death, where the clock must never run out), less the machine's measured scheduling delay
//! (`Harness::scheduling_slack`: what a loaded machine adds, not what the engine spends).
//!
//! `byoyomi_1s_100_moves` takes about 75 s and is ignored by default:
//! `cargo test --release -p koma-engine --test timing -- --ignored --nocapture`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use koma_engine::Options;
use koma_shogi::{Color, Position};

/// An engine with the tiny model loaded, and the scheduling slack measured on it.
fn engine(dir: &std::path::Path) -> (Harness, Duration) {
    let options = Options { model: Some(tiny_model(dir)), device: "cpu".into(), threads: 1, ..Options::default() };
    let mut e = Harness::with_options(options);
    e.ready();
    let slack = e.scheduling_slack();
    (e, slack)
}

/// Plays `plies` moves (new games as needed) with `go` built from the clocks by `go_line`, and
/// returns the time of each move. `clock` is updated after each move as a GUI would.
fn play(
    e: &mut Harness,
    plies: usize,
    mut go_line: impl FnMut(Color) -> String,
    mut after: impl FnMut(Color, Duration),
) -> Vec<Duration> {
    let mut times = Vec::new();
    let mut pos = Position::startpos();
    e.send("usinewgame");
    while times.len() < plies {
        e.send(&format!("position {}", position_args(&pos)));
        let go = go_line(pos.side_to_move());
        let start = Instant::now();
        e.send(&go);
        let (best, _) = e.bestmove(LONG);
        let took = start.elapsed();
        times.push(took);
        after(pos.side_to_move(), took);
        match best_of(&best) {
            Some(m) => {
                assert!(pos.is_legal(m), "{best} illegal in {}", pos.to_sfen());
                pos.do_move(m);
                if pos.legal_moves().is_empty() || pos.move_number() > 250 {
                    pos = Position::startpos();
                    e.send("usinewgame");
                }
            }
            None => {
                pos = Position::startpos();
                e.send("usinewgame");
            }
        }
    }
    assert!(!e.log.iter().any(|l| l.contains("abandoned")), "a go found the previous search running");
    times
}

fn summary(name: &str, times: &[Duration]) -> Duration {
    let max = times.iter().max().copied().unwrap_or_default();
    let mean = times.iter().sum::<Duration>() / times.len().max(1) as u32;
    eprintln!(
        "{name}: {} moves, mean {:.0} ms, max {:.0} ms",
        times.len(),
        mean.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    max
}

fn byoyomi_moves(plies: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (mut e, slack) = engine(dir.path());
    let times = play(&mut e, plies, |_| "go btime 0 wtime 0 byoyomi 1000".into(), |_, _| {});
    let max = summary("byoyomi 1 s", &times);
    assert!(max < Duration::from_millis(1000) + slack, "a move took {max:?} with byoyomi 1 s ({slack:?} slack)");
    // The byoyomi is used, not wasted: most moves think for most of it.
    let long = times.iter().filter(|t| **t > Duration::from_millis(500)).count();
    assert!(long * 2 > times.len(), "{times:?}");
}

#[test]
fn byoyomi_1s_short() {
    byoyomi_moves(8);
}

#[test]
#[ignore = "about 75 s; run with --ignored"]
fn byoyomi_1s_100_moves() {
    byoyomi_moves(100);
}

/// Main time with increment, then sudden death: the clock never runs out.
#[test]
fn increment_and_sudden_death_never_flag() {
    let dir = tempfile::tempdir().unwrap();
    let (mut e, slack) = engine(dir.path());
    for (name, initial, inc, plies) in [("fischer 2 s + 0.5 s", 2000i64, 500i64, 20), ("sudden death 5 s", 5000, 0, 40)]
    {
        let mut clock = [initial, initial];
        let snapshot = std::cell::Cell::new(clock);
        let times = play(
            &mut e,
            plies,
            |_| {
                let c = snapshot.get();
                format!("go btime {} wtime {} binc {inc} winc {inc}", c[0], c[1])
            },
            |side, took| {
                let i = side as usize;
                clock[i] -= took.saturating_sub(slack).as_millis() as i64 + 1;
                assert!(clock[i] > 0, "{name}: {side:?} ran out of time ({} ms left)", clock[i]);
                clock[i] += inc;
                snapshot.set(clock);
            },
        );
        summary(name, &times);
        eprintln!("{name}: clocks left {:?} ms", snapshot.get());
    }
}
