//! A round robin of three players, one a scripted USI engine on a clock that always answers too
//! late: every pairing is played in colour-swapped pairs, every game lands in the results file,
//! the late engine loses every game on time, and all players are rated together.

use std::time::Duration;

mod common;

use common::{engine_factory, greedy, match_config, random, scripted};
use koma_arena::clock::TimeControl;
use koma_arena::matches::{MatchConfig, PlayerFactory};
use koma_arena::tournament::{run_tournament, Entrant, Format};
use koma_arena::usi_client::{GoLimit, UsiEngineConfig};
use koma_shogi::rules::GameRules;

fn entrant(name: &str, factory: PlayerFactory) -> Entrant {
    Entrant { name: name.into(), factory }
}

/// Two games per pairing, one at a time, from the normal position, capped at `max_plies`.
fn two_games(max_plies: u32, results: Option<std::path::PathBuf>) -> MatchConfig {
    MatchConfig { rules: GameRules { max_plies, ..GameRules::default() }, ..match_config(2, results) }
}

#[test]
fn a_round_robin_of_three_rates_everyone_together() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let sleepy = UsiEngineConfig {
        limit: GoLimit::Clock(TimeControl::new(Duration::from_millis(100), Duration::ZERO, Duration::ZERO).unwrap()),
        margin: Duration::from_millis(50),
        ..scripted("sleepy", r#"sleep 0.3; echo "bestmove resign""#)
    };
    let entrants =
        vec![entrant("greedy", greedy()), entrant("random", random()), entrant("sleepy", engine_factory(sleepy))];
    let match_config = two_games(60, Some(results.clone()));
    let mut seen = Vec::new();
    let t =
        run_tournament(&entrants, Format::RoundRobin, &match_config, &mut |k, _, s| seen.push((k, s.played))).unwrap();
    assert_eq!(seen, vec![(0, 1), (0, 2), (1, 1), (1, 2), (2, 1), (2, 2)]);
    assert_eq!(t.games, 6);
    assert!(t.failed.is_empty());
    let pairs: Vec<(usize, usize)> = t.pairings.iter().map(|p| (p.a, p.b)).collect();
    assert_eq!(pairs, vec![(0, 1), (0, 2), (1, 2)]);
    // The sleepy engine answers 0.3 s into a 0.1 s sudden death: it loses every game on time.
    for p in &t.pairings[1..] {
        assert_eq!(p.state.wins, 2, "{} vs {}", p.state.a_name, p.state.b_name);
    }
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&results).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 6);
    let timed_out: Vec<&serde_json::Value> = lines.iter().filter(|l| l["reason"] == "TimeLoss").collect();
    assert_eq!(timed_out.len(), 4);
    assert!(timed_out.iter().all(
        |l| l["note"].as_str().unwrap().contains("sleepy") && l["note"].as_str().unwrap().contains("lost on time")
    ));
    assert_eq!(t.ratings.len(), 3);
    let elo = |name: &str| t.ratings.iter().find(|r| r.player == name).unwrap();
    assert_eq!(elo("greedy").elo, 0.0, "the first player is the anchor");
    assert!(elo("sleepy").elo < elo("random").elo.min(0.0) && elo("sleepy").margin.is_finite());
    assert!(t.ratings.iter().all(|r| r.games == 4.0));
}

/// A player that cannot start (an engine binary gone missing) fails its pairings; the other
/// pairings are still played and rated, and the failures name both players.
#[test]
fn a_failed_pairing_is_reported_and_the_others_still_rated() {
    let missing = UsiEngineConfig { command: "/nonexistent/engine".into(), args: vec![], ..scripted("missing", "") };
    let entrants =
        vec![entrant("greedy", greedy()), entrant("missing", engine_factory(missing)), entrant("random", random())];
    let match_config = two_games(40, None);
    let t = run_tournament(&entrants, Format::RoundRobin, &match_config, &mut |_, _, _| {}).unwrap();
    let failed: Vec<(usize, usize)> = t.failed.iter().map(|f| (f.a, f.b)).collect();
    assert_eq!(failed, vec![(0, 1), (1, 2)]);
    assert!(
        t.failed
            .iter()
            .map(|f| f.describe(&t.players))
            .all(|e| e.contains("missing") && e.contains("/nonexistent/engine")),
        "{:?}",
        t.failed
    );
    let played: Vec<(usize, usize)> = t.pairings.iter().map(|p| (p.a, p.b)).collect();
    assert_eq!(played, vec![(0, 2)]);
    assert_eq!(t.games, 2);
    let rated: Vec<&str> = t.ratings.iter().map(|r| r.player.as_str()).collect();
    assert_eq!(rated.len(), 2, "{rated:?}");
    assert!(rated.contains(&"greedy") && rated.contains(&"random"));
    assert_eq!(t.anchor.as_deref(), Some("greedy"));
    assert!(t.failed.iter().all(|f| f.state.is_none()), "no game was finished in the failed pairings");

    // The first player fails to start: the anchor is a player that played, at 0 Elo.
    let reordered = vec![entrants[1].clone(), entrants[0].clone(), entrants[2].clone()];
    let t = run_tournament(&reordered, Format::RoundRobin, &match_config, &mut |_, _, _| {}).unwrap();
    assert_eq!(t.failed.len(), 2);
    let anchor = t.anchor.as_deref().expect("an anchor among those who played");
    assert_ne!(anchor, "missing");
    assert_eq!(t.ratings.iter().find(|r| r.player == anchor).unwrap().elo, 0.0);
}

/// A results file that cannot be written stops the tournament at once: every later pairing
/// would lose its games alike.
#[test]
fn a_results_file_that_cannot_be_written_stops_the_tournament() {
    let entrants = vec![entrant("greedy", greedy()), entrant("random", random()), entrant("random2", random())];
    let dir = tempfile::tempdir().unwrap();
    // A folder where the results file should be: it cannot be opened for appending.
    let results = dir.path().join("results.jsonl");
    std::fs::create_dir(&results).unwrap();
    let match_config = two_games(40, Some(results));
    let mut pairings_started = 0;
    let err =
        run_tournament(&entrants, Format::RoundRobin, &match_config, &mut |_, _, _| pairings_started += 1).unwrap_err();
    let err = err.to_string();
    assert!(err.contains("greedy vs random") && err.contains("results.jsonl"), "{err}");
    assert_eq!(pairings_started, 0);
}
