//! What a search says while it thinks: typed `info` lines ([`ThinkingInfo`], printed in the USI
//! field order), the principal variations shown for MultiPV, and mate distances read off them.

use std::fmt;
use std::time::Duration;

use koma_mcts::{RootChild, Search};
use koma_shogi::{Move, Position};

use super::walk::Stats;
use super::Job;
use crate::score::{value_to_winrate, winrate_to_cp};

/// Seconds between periodic `info` lines.
pub(super) const INFO_INTERVAL: Duration = Duration::from_secs(1);

/// The score of an `info` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Score {
    /// Centipawns for the side to move.
    Cp(i32),
    /// Mate in this many plies (negative: the side to move is mated).
    Mate(i32),
    /// The side to move is checkmated already (`mate -0`).
    MatedNow,
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Score::Cp(cp) => write!(f, "cp {cp}"),
            Score::Mate(plies) => write!(f, "mate {plies}"),
            Score::MatedNow => write!(f, "mate -0"),
        }
    }
}

/// One `info` line; the optional fields are left out when None (or, for the PV, empty).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ThinkingInfo {
    pub depth: usize,
    pub seldepth: Option<usize>,
    pub multipv: Option<usize>,
    pub score: Score,
    pub nodes: u64,
    pub nps: Option<u64>,
    pub time_ms: u128,
    pub hashfull: Option<u64>,
    pub pv: Vec<Move>,
}

impl ThinkingInfo {
    /// A line with the required fields (and no nodes searched).
    pub fn new(depth: usize, score: Score, time_ms: u128) -> ThinkingInfo {
        ThinkingInfo {
            depth,
            seldepth: None,
            multipv: None,
            score,
            nodes: 0,
            nps: None,
            time_ms,
            hashfull: None,
            pv: Vec::new(),
        }
    }
}

impl fmt::Display for ThinkingInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "info depth {}", self.depth)?;
        if let Some(seldepth) = self.seldepth {
            write!(f, " seldepth {seldepth}")?;
        }
        if let Some(k) = self.multipv {
            write!(f, " multipv {k}")?;
        }
        write!(f, " score {} nodes {}", self.score, self.nodes)?;
        if let Some(nps) = self.nps {
            write!(f, " nps {nps}")?;
        }
        write!(f, " time {}", self.time_ms)?;
        if let Some(hashfull) = self.hashfull {
            write!(f, " hashfull {hashfull}")?;
        }
        if !self.pv.is_empty() {
            write!(f, " pv")?;
            for mv in &self.pv {
                write!(f, " {}", mv.to_usi())?;
            }
        }
        Ok(())
    }
}

/// A principal variation as reported, best first.
pub(super) struct PvLine {
    pub pv: Vec<Move>,
    pub winrate: f64,
    /// Mate in this many plies (negative: we are mated), when the line is a forced mate.
    pub mate: Option<i32>,
}

impl Job {
    pub(super) fn info(&self, info: &ThinkingInfo) {
        self.out.line(&info.to_string());
    }

    /// The `info` line of a proven mate (no MCTS nodes behind it).
    pub(super) fn report_mate(&self, line: &[Move]) {
        let n = line.len();
        self.info(&ThinkingInfo {
            seldepth: Some(n),
            pv: line.to_vec(),
            ..ThinkingInfo::new(n, Score::Mate(n as i32), self.elapsed_ms())
        });
    }

    /// Prints one `info` line per PV (MultiPV) and returns them, best first.
    pub(super) fn report(&self, search: &Search, stats: &Stats, restrict: &[Move]) -> Vec<PvLine> {
        let children = ordered_children(search, restrict);
        let mut visited: Vec<&RootChild> = children.iter().filter(|c| c.visits > 0).collect();
        if visited.is_empty() {
            // Nothing visited yet (the root was just evaluated, or not even that): the best prior.
            visited.extend(children.first());
        }
        let count = (self.options.multipv as usize).clamp(1, visited.len().max(1)).min(visited.len());
        let elapsed = self.started.elapsed();
        let nodes = (search.root_visits() - stats.base_visits) as u64;
        let nps = (nodes as f64 / elapsed.as_secs_f64().max(1e-3)) as u64;
        let hashfull = ((search.memory_bytes() as u64).saturating_mul(1000) / stats.memory_budget).min(1000);
        let mut lines = Vec::new();
        for (k, child) in visited.iter().take(count).enumerate() {
            let mut pv = vec![child.mv];
            pv.extend(line_after(search, child.mv));
            let q = child.q.unwrap_or_else(|| search.root_value());
            let mate = mate_in_pv(&self.pos, &mut pv, q);
            let winrate = value_to_winrate(q);
            let score = match mate {
                Some(n) => Score::Mate(n),
                None => Score::Cp(winrate_to_cp(winrate, self.options.eval_coef as f64)),
            };
            self.info(&ThinkingInfo {
                depth: pv.len(),
                seldepth: Some(stats.seldepth.max(pv.len())),
                multipv: (self.options.multipv > 1).then_some(k + 1),
                score,
                nodes,
                nps: Some(nps),
                time_ms: elapsed.as_millis(),
                hashfull: Some(hashfull),
                pv: pv.clone(),
            });
            lines.push(PvLine { pv, winrate, mate });
        }
        lines
    }
}

/// Root children (restricted to `restrict` when non-empty), most visited first, then best value,
/// then best prior.
pub(super) fn ordered_children(search: &Search, restrict: &[Move]) -> Vec<RootChild> {
    let mut children: Vec<RootChild> =
        search.root_children().into_iter().filter(|c| restrict.is_empty() || restrict.contains(&c.mv)).collect();
    children.sort_by(|a, b| {
        b.visits
            .cmp(&a.visits)
            .then(b.q.unwrap_or(-2.0).total_cmp(&a.q.unwrap_or(-2.0)))
            .then(b.prior.total_cmp(&a.prior))
    });
    children
}

/// The most visited line after `first`.
fn line_after(search: &Search, first: Move) -> Vec<Move> {
    let mut path = vec![first];
    while path.len() < 64 {
        let Some(children) = search.children_at(&path) else { break };
        match children.iter().filter(|c| c.visits > 0).max_by_key(|c| c.visits) {
            Some(c) => path.push(c.mv),
            None => break,
        }
    }
    path.remove(0);
    path
}

/// When the search values a line as a certain result (|q| = 1) and the line ends in checkmate or
/// in a position with a mate in one (which search scores without expanding), the mate distance
/// in plies, signed for the side to move at the root; the mating move is appended to `pv`.
fn mate_in_pv(root: &Position, pv: &mut Vec<Move>, q: f32) -> Option<i32> {
    if q.abs() < 0.9999 {
        return None;
    }
    let mut pos = root.clone();
    for &m in pv.iter() {
        if !pos.is_legal(m) {
            return None;
        }
        pos.do_move(m);
    }
    let n = if pos.legal_moves().is_empty() {
        pv.len()
    } else if let Some(m) = pos.mate_in_one() {
        pv.push(m);
        pv.len()
    } else {
        return None;
    };
    // Odd length: the root side delivered mate.
    let ours = n % 2 == 1;
    if ours != (q > 0.0) {
        return None;
    }
    Some(if ours { n as i32 } else { -(n as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_lines_keep_the_usi_field_order() {
        let mv = |usi: &str| Move::from_usi(usi).unwrap();
        assert_eq!(ThinkingInfo::new(0, Score::MatedNow, 3).to_string(), "info depth 0 score mate -0 nodes 0 time 3");
        let mate = ThinkingInfo {
            seldepth: Some(3),
            pv: vec![mv("G*5b"), mv("5a4a"), mv("S*3b")],
            ..ThinkingInfo::new(3, Score::Mate(3), 12)
        };
        assert_eq!(mate.to_string(), "info depth 3 seldepth 3 score mate 3 nodes 0 time 12 pv G*5b 5a4a S*3b");
        let full = ThinkingInfo {
            depth: 2,
            seldepth: Some(7),
            multipv: Some(2),
            score: Score::Cp(-45),
            nodes: 1200,
            nps: Some(600),
            time_ms: 2000,
            hashfull: Some(13),
            pv: vec![mv("7g7f"), mv("3c3d")],
        };
        assert_eq!(
            full.to_string(),
            "info depth 2 seldepth 7 multipv 2 score cp -45 nodes 1200 nps 600 time 2000 hashfull 13 pv 7g7f 3c3d"
        );
        assert_eq!(
            ThinkingInfo { multipv: None, ..full }.to_string(),
            "info depth 2 seldepth 7 score cp -45 nodes 1200 nps 600 time 2000 hashfull 13 pv 7g7f 3c3d"
        );
    }
}
