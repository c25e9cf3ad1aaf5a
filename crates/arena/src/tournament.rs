//! More than two players in one command: a round robin (every pair) or a gauntlet (the first
//! player against each of the others), each pairing a match of colour-swapped pairs, and all
//! games rated together (the Bradley–Terry fit of [`crate::ratings`], the first player at 0).

use koma_shogi::Color;

use crate::error::{MatchError, TournamentError};
use crate::matches::{run_match, MatchConfig, MatchGame, MatchState, PlayerFactory};
use crate::ratings::{fit, GameOutcome, Rating};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Every pair of players once.
    RoundRobin,
    /// The first player against each of the others.
    Gauntlet,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::RoundRobin => "round-robin",
            Format::Gauntlet => "gauntlet",
        }
    }
}

/// The pairings of `players` players, as (first, second) indices in the order given: for a
/// round robin (0,1), (0,2), …, (1,2), …; for a gauntlet (0,1), (0,2), ….
pub fn pairings(players: usize, format: Format) -> Vec<(usize, usize)> {
    match format {
        Format::RoundRobin => (0..players).flat_map(|i| (i + 1..players).map(move |j| (i, j))).collect(),
        Format::Gauntlet => (1..players).map(|j| (0, j)).collect(),
    }
}

/// A player of the tournament: its name (what its players report; distinct from the others') and
/// its factory.
#[derive(Clone)]
pub struct Entrant {
    pub name: String,
    pub factory: PlayerFactory,
}

/// One pairing's match, from `a`'s side.
#[derive(Clone, Debug)]
pub struct Pairing {
    pub a: usize,
    pub b: usize,
    pub state: MatchState,
}

/// A pairing that could not be played to its end (an engine that crashed, hung or would not
/// start): its games finished before the failure are rated all the same.
#[derive(Debug)]
pub struct FailedPairing {
    pub a: usize,
    pub b: usize,
    /// What went wrong (`a` and `b` say between whom).
    pub error: MatchError,
    /// The games it finished before the failure, from `a`'s side (None when it finished none).
    pub state: Option<MatchState>,
}

impl FailedPairing {
    /// `A vs B: what went wrong`, with the players' names and every cause.
    pub fn describe(&self, players: &[String]) -> String {
        format!("{} vs {}: {}", players[self.a], players[self.b], koma_base::error::Report(&self.error))
    }
}

#[derive(Debug)]
pub struct Tournament {
    pub format: Format,
    pub players: Vec<String>,
    /// The pairings played to their end (all of them unless one failed or the tournament was
    /// cancelled).
    pub pairings: Vec<Pairing>,
    /// The pairings that failed; the others were played all the same.
    pub failed: Vec<FailedPairing>,
    /// Every player that played, strongest first, the anchor at 0 Elo.
    pub ratings: Vec<Rating>,
    /// The player at 0 Elo: the first player, or when it finished no game (its engine would not
    /// start) the first one that did; None when no game was finished.
    pub anchor: Option<String>,
    /// Games finished in all pairings, failed ones included.
    pub games: usize,
}

/// The game as a rating outcome: Black's points against White.
fn outcome(g: &MatchGame, state: &MatchState) -> GameOutcome {
    let (black, white) = if g.a_black { (&state.a_name, &state.b_name) } else { (&state.b_name, &state.a_name) };
    let score = match g.game.result.winner {
        None => 0.5,
        Some(Color::Black) => 1.0,
        Some(Color::White) => 0.0,
    };
    GameOutcome { first: black.clone(), second: white.clone(), score }
}

/// Plays the pairings one after another, each with `config` (games per pairing, concurrency,
/// openings, results file, records, cancel). `on_game` sees the pairing's index, each finished
/// game and the pairing's running state. A pairing that fails (an engine that cannot play on) is
/// recorded in [`Tournament::failed`] and the others are still played: its games so far stay in
/// the results file and in the ratings. An error when there are too few players, or when the
/// results file cannot be written (every later pairing would lose its games alike).
pub fn run_tournament(
    entrants: &[Entrant],
    format: Format,
    config: &MatchConfig,
    on_game: &mut dyn FnMut(usize, &MatchGame, &MatchState),
) -> Result<Tournament, TournamentError> {
    if entrants.len() < 2 {
        return Err(TournamentError::TooFewPlayers { format: format.name(), found: entrants.len() });
    }
    let cancelled = || config.cancel.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst));
    let mut outcomes = Vec::new();
    let (mut played, mut failed) = (Vec::new(), Vec::new());
    for (k, (a, b)) in pairings(entrants.len(), format).into_iter().enumerate() {
        if cancelled() {
            break;
        }
        let (ea, eb) = (&entrants[a], &entrants[b]);
        let mut last = None;
        let result = run_match(ea.factory.clone(), eb.factory.clone(), config, &mut |g, s| {
            outcomes.push(outcome(g, s));
            last = Some(s.clone());
            on_game(k, g, s);
        });
        match result {
            Ok(state) => played.push(Pairing { a, b, state }),
            Err(e) if e.results_lost() => {
                return Err(TournamentError::ResultsLost { a: ea.name.clone(), b: eb.name.clone(), source: e })
            }
            Err(e) => failed.push(FailedPairing { a, b, error: e, state: last }),
        }
    }
    let ratings = fit(&outcomes, &entrants[0].name);
    // `fit` anchors on the first player when it played, else on the first player it met.
    let anchor = ratings
        .iter()
        .find(|r| r.player == entrants[0].name)
        .or_else(|| ratings.iter().find(|r| r.elo == 0.0))
        .map(|r| r.player.clone());
    Ok(Tournament {
        format,
        players: entrants.iter().map(|e| e.name.clone()).collect(),
        pairings: played,
        failed,
        ratings,
        anchor,
        games: outcomes.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robins_pair_everyone_once_and_gauntlets_the_first_with_each() {
        assert_eq!(pairings(3, Format::RoundRobin), vec![(0, 1), (0, 2), (1, 2)]);
        assert_eq!(pairings(4, Format::RoundRobin).len(), 6);
        assert_eq!(pairings(4, Format::Gauntlet), vec![(0, 1), (0, 2), (0, 3)]);
        assert!(pairings(1, Format::RoundRobin).is_empty());
    }
}
