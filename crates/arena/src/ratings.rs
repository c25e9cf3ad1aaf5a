//! Ratings over all games among all players: a Bradley–Terry fit by the MM algorithm (Hunter,
//! 2004), draws counted as half a win each way, with a BayesElo-style prior of one virtual draw
//! against every opponent so that perfect scores stay finite. Anchored at one player = 0 Elo.

use std::collections::BTreeMap;

use crate::error::ResultsError;

/// One game between two named players: `score` is the first player's points (1, ½ or 0).
#[derive(Clone, Debug, PartialEq)]
pub struct GameOutcome {
    pub first: String,
    pub second: String,
    pub score: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rating {
    pub player: String,
    pub elo: f64,
    /// Approximate 95% interval half-width from the fit's curvature.
    pub margin: f64,
    pub games: f64,
    /// Points scored (draws ½).
    pub points: f64,
}

/// Reads the games of an arena results file (one JSON object per line, as `koma arena` and the
/// pipeline append them). A line that does not parse (torn by a kill or a full disk, or edited
/// by hand) is skipped with a warning naming the file and line; only an unreadable file is an
/// error.
pub fn read_results(path: &std::path::Path) -> Result<Vec<GameOutcome>, ResultsError> {
    let bytes = std::fs::read(path).map_err(|source| ResultsError { path: path.into(), source })?;
    // Lossy: a line torn inside a multi-byte name must not make the whole file unreadable.
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_outcome(line) {
            Ok(game) => out.push(game),
            Err(e) => tracing::warn!("{}: line {}: skipped, not a game result ({e})", path.display(), i + 1),
        }
    }
    Ok(out)
}

fn parse_outcome(line: &str) -> Result<GameOutcome, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let (Some(black), Some(white)) = (v["black"].as_str(), v["white"].as_str()) else {
        return Err("missing black/white".into());
    };
    let score = match v["winner"].as_str() {
        Some("black") => 1.0,
        Some("white") => 0.0,
        _ => 0.5,
    };
    Ok(GameOutcome { first: black.to_string(), second: white.to_string(), score })
}

/// The training step in a checkpoint player's name such as `model-00001000@200`.
pub fn step_of_player(player: &str) -> Option<u64> {
    player.strip_prefix("model-")?.split('@').next()?.parse().ok()
}

const ELO_PER_NAT: f64 = 400.0 / std::f64::consts::LN_10;
const PRIOR_DRAWS: f64 = 1.0;

/// Fits ratings; `anchor` gets 0 Elo (or, when it did not play, the first player seen).
pub fn fit(games: &[GameOutcome], anchor: &str) -> Vec<Rating> {
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for g in games {
        for p in [g.first.as_str(), g.second.as_str()] {
            let next = index.len();
            index.entry(p).or_insert(next);
        }
    }
    let names: Vec<&str> = {
        let mut v = vec![""; index.len()];
        for (name, &i) in &index {
            v[i] = name;
        }
        v
    };
    let n = names.len();
    if n == 0 {
        return Vec::new();
    }
    // Pairwise games and points, plus the prior's virtual draws between opponents.
    let mut played = vec![vec![0.0; n]; n];
    let mut won = vec![vec![0.0; n]; n];
    for g in games {
        let (a, b) = (index[g.first.as_str()], index[g.second.as_str()]);
        if a == b {
            continue;
        }
        played[a][b] += 1.0;
        played[b][a] += 1.0;
        won[a][b] += g.score;
        won[b][a] += 1.0 - g.score;
    }
    let real_played = played.clone();
    let real_won = won.clone();
    for a in 0..n {
        for b in 0..n {
            if a != b && real_played[a][b] > 0.0 {
                played[a][b] += PRIOR_DRAWS;
                won[a][b] += PRIOR_DRAWS / 2.0;
            }
        }
    }
    let mut gamma = vec![1.0f64; n];
    for _ in 0..10_000 {
        let mut change: f64 = 0.0;
        for i in 0..n {
            let wins: f64 = won[i].iter().sum();
            let denom: f64 =
                (0..n).filter(|&j| j != i && played[i][j] > 0.0).map(|j| played[i][j] / (gamma[i] + gamma[j])).sum();
            if denom > 0.0 && wins > 0.0 {
                let updated = wins / denom;
                change = change.max((updated.ln() - gamma[i].ln()).abs());
                gamma[i] = updated;
            }
        }
        // Keep the scale fixed (the fit only determines ratios).
        let mean_log = gamma.iter().map(|g| g.ln()).sum::<f64>() / n as f64;
        gamma.iter_mut().for_each(|g| *g = (g.ln() - mean_log).exp());
        if change < 1e-10 {
            break;
        }
    }
    let anchor_index = index.get(anchor).copied().unwrap_or(0);
    let anchor_log = gamma[anchor_index].ln();
    let mut out: Vec<Rating> = (0..n)
        .map(|i| {
            let info: f64 = (0..n)
                .filter(|&j| j != i)
                .map(|j| {
                    let p = gamma[i] / (gamma[i] + gamma[j]);
                    played[i][j] * p * (1.0 - p)
                })
                .sum();
            Rating {
                player: names[i].to_string(),
                elo: (gamma[i].ln() - anchor_log) * ELO_PER_NAT,
                margin: if info > 0.0 { 1.96 * ELO_PER_NAT / info.sqrt() } else { f64::INFINITY },
                games: real_played[i].iter().sum(),
                points: real_won[i].iter().sum(),
            }
        })
        .collect();
    out.sort_by(|a, b| b.elo.total_cmp(&a.elo));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn games(a: &str, b: &str, wins: usize, draws: usize, losses: usize) -> Vec<GameOutcome> {
        let mut v = Vec::new();
        for (count, score) in [(wins, 1.0), (draws, 0.5), (losses, 0.0)] {
            v.extend((0..count).map(|_| GameOutcome { first: a.into(), second: b.into(), score }));
        }
        v
    }

    #[test]
    fn two_players_match_the_score_formula() {
        // 750 of 1000 points: +190.8 Elo, minus a little shrinkage from the prior.
        let r = fit(&games("a", "random", 700, 100, 200), "random");
        let a = r.iter().find(|x| x.player == "a").unwrap();
        assert!((a.elo - 190.8).abs() < 2.0, "{}", a.elo);
        assert!(r.iter().find(|x| x.player == "random").unwrap().elo.abs() < 1e-9);
        assert!(a.margin > 10.0 && a.margin < 60.0);
    }

    #[test]
    fn transitive_chain_and_perfect_scores_stay_finite() {
        let mut all = games("b", "a", 75, 0, 25);
        all.extend(games("c", "b", 75, 0, 25));
        all.extend(games("d", "c", 10, 0, 0));
        let r = fit(&all, "a");
        let elo = |p: &str| r.iter().find(|x| x.player == p).unwrap().elo;
        assert!(elo("b") > 150.0 && elo("c") > elo("b") + 150.0);
        assert!(elo("d").is_finite() && elo("d") > elo("c"));
        assert_eq!(r[0].player, "d");
    }
}
