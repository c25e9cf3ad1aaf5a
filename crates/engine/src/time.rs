//! `go` arguments and time management.
//!
//! Every timed search gets two deadlines, measured from the moment the `go` line was read (or
//! the `ponderhit` line, after pondering):
//!
//! - `soft`: where a search normally stops. It may stop earlier when the best move can no longer
//!   be overtaken before `soft`, and it goes on past `soft` (up to `hard`) while the two most
//!   visited moves are close or the runner-up has the better value.
//! - `hard`: never exceeded. It always stays `margin` (the `ByoyomiMargin` option: process, pipe
//!   and network latency) inside what the clock allows, and the search also stops when the next
//!   network batch would cross it.
//!
//! Byoyomi that is all that is left is spent in full (unused byoyomi is lost anyway). With main
//! time, a move gets `time / moves_to_go + increment + byoyomi`, where `moves_to_go` is an
//! estimate of our remaining moves (80 at the start, 20 from ply 120 on), and may extend to four
//! times that, but never to more than a quarter of the main time (plus increment and byoyomi).
//! The increment is added by the GUI after the move, so it is never counted as available now.

use std::time::Duration;

use koma_shogi::Color;

/// What `go mate` was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MateLimit {
    Infinite,
    Millis(u64),
}

/// The arguments of a `go` command. Times are in milliseconds; negative times (some GUIs send
/// them once the main time is spent) read as 0.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoParams {
    pub btime: Option<u64>,
    pub wtime: Option<u64>,
    pub byoyomi: Option<u64>,
    pub binc: Option<u64>,
    pub winc: Option<u64>,
    pub movetime: Option<u64>,
    pub nodes: Option<u64>,
    /// Accepted and reported, not used (MCTS has no nominal depth).
    pub depth: Option<u64>,
    pub infinite: bool,
    pub ponder: bool,
    pub mate: Option<MateLimit>,
    /// Moves the answer must come from (USI text; checked against the position later).
    pub searchmoves: Vec<String>,
}

/// Numbers in `go` are clamped to this (about 31 years in milliseconds), so that no sum of
/// times overflows.
pub const MAX_NUMBER: u64 = 1_000_000_000_000;

const KEYWORDS: [&str; 13] = [
    "btime",
    "wtime",
    "byoyomi",
    "binc",
    "winc",
    "movetime",
    "nodes",
    "depth",
    "infinite",
    "ponder",
    "mate",
    "searchmoves",
    "movestogo",
];

impl GoParams {
    /// Parses the words after `go`. Malformed parts are skipped and described in the returned
    /// warnings; parsing never fails.
    pub fn parse(words: &[&str]) -> (GoParams, Vec<String>) {
        let mut go = GoParams::default();
        let mut warnings = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let word = words[i];
            i += 1;
            let mut number = |name: &str, i: &mut usize| -> Option<u64> {
                match words.get(*i) {
                    Some(text) if !KEYWORDS.contains(text) => {
                        *i += 1;
                        match text.parse::<i64>() {
                            Ok(v) => Some((v.max(0) as u64).min(MAX_NUMBER)),
                            Err(_) => {
                                warnings.push(format!("go: {name} needs a number, got {:?}", truncate(text, 40)));
                                None
                            }
                        }
                    }
                    _ => {
                        warnings.push(format!("go: {name} needs a number"));
                        None
                    }
                }
            };
            match word {
                "btime" => go.btime = number("btime", &mut i).or(go.btime),
                "wtime" => go.wtime = number("wtime", &mut i).or(go.wtime),
                "byoyomi" => go.byoyomi = number("byoyomi", &mut i).or(go.byoyomi),
                "binc" => go.binc = number("binc", &mut i).or(go.binc),
                "winc" => go.winc = number("winc", &mut i).or(go.winc),
                "movetime" => go.movetime = number("movetime", &mut i).or(go.movetime),
                "nodes" => go.nodes = number("nodes", &mut i).or(go.nodes),
                "depth" => go.depth = number("depth", &mut i).or(go.depth),
                "movestogo" => {
                    number("movestogo", &mut i);
                }
                "infinite" => go.infinite = true,
                "ponder" => go.ponder = true,
                "mate" => {
                    go.mate = Some(match words.get(i) {
                        Some(&"infinite") => {
                            i += 1;
                            MateLimit::Infinite
                        }
                        Some(text) => match text.parse::<i64>() {
                            Ok(v) => {
                                i += 1;
                                MateLimit::Millis((v.max(0) as u64).min(MAX_NUMBER))
                            }
                            Err(_) => MateLimit::Infinite,
                        },
                        None => MateLimit::Infinite,
                    })
                }
                "searchmoves" => {
                    while i < words.len() && !KEYWORDS.contains(&words[i]) {
                        go.searchmoves.push(words[i].to_string());
                        i += 1;
                    }
                }
                other => warnings.push(format!("go: unknown argument {:?} ignored", truncate(other, 40))),
            }
        }
        (go, warnings)
    }

    /// Whether any clock or limit was given (`go` alone has none).
    pub fn has_limits(&self) -> bool {
        self.btime.is_some()
            || self.wtime.is_some()
            || self.byoyomi.is_some()
            || self.binc.is_some()
            || self.winc.is_some()
            || self.movetime.is_some()
            || self.nodes.is_some()
            || self.infinite
            || self.depth.is_some()
    }
}

/// Thinking time for `go` with no limit at all, when no playout limit applies either.
pub const DEFAULT_MOVETIME_MS: u64 = 1000;

/// When a timed search must stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub soft: Duration,
    pub hard: Duration,
    /// Whether stopping before `soft` saves anything (false when only byoyomi is left, or for a
    /// fixed `movetime`).
    pub may_stop_early: bool,
}

/// `ms` less the latency margin, but never less than half of `ms`: a GUI that gives 200 ms a
/// move runs locally, where latency is a few milliseconds.
fn less_margin(ms: u64, margin_ms: u64) -> u64 {
    ms - margin_ms.min(ms / 2)
}

impl Budget {
    fn fixed(ms: u64) -> Budget {
        Budget { soft: Duration::from_millis(ms), hard: Duration::from_millis(ms), may_stop_early: false }
    }
}

/// Our remaining moves, estimated from the ply: 80 at the start, 20 from ply 120 on.
pub fn moves_to_go(ply: u32) -> u64 {
    let ply = ply.min(120) as u64;
    ((160 - ply) / 2).max(20)
}

/// The time budget for `go` (the side to move is `us`, at game ply `ply`), or `None` when the
/// search has no time limit (`infinite`, or only `nodes`). `node_limited` says whether a
/// playout limit applies (then a bare `go` is limited by it alone).
pub fn budget(go: &GoParams, us: Color, ply: u32, margin_ms: u64, node_limited: bool) -> Option<Budget> {
    if go.infinite {
        return None;
    }
    if let Some(ms) = go.movetime {
        return Some(Budget::fixed(less_margin(ms, margin_ms)));
    }
    let (time, inc) = match us {
        Color::Black => (go.btime, go.binc),
        Color::White => (go.wtime, go.winc),
    };
    if time.is_none() && inc.is_none() && go.byoyomi.is_none() {
        if go.nodes.is_some() || node_limited {
            return None;
        }
        return Some(Budget::fixed(less_margin(DEFAULT_MOVETIME_MS, margin_ms)));
    }
    let time = time.unwrap_or(0);
    let inc = inc.unwrap_or(0);
    let byoyomi = go.byoyomi.unwrap_or(0);
    if time == 0 && inc == 0 {
        return Some(Budget::fixed(less_margin(byoyomi, margin_ms)));
    }
    let share = time / moves_to_go(ply) + inc;
    // Never more than the clock allows now (main time + byoyomi; the increment comes later), less
    // the latency margin. The margin is taken from the clock once, here, not from the share: the
    // share of a 1 s + 100 ms game is 112 ms, which a 300 ms margin would wipe out, and the
    // increment would go unspent while the clock piles up.
    let cap = less_margin(time + byoyomi, margin_ms);
    let hard = (byoyomi + (time / 4 + inc).min(4 * share)).min(cap);
    let soft = (byoyomi + share).min(hard);
    Some(Budget { soft: Duration::from_millis(soft), hard: Duration::from_millis(hard), may_stop_early: true })
}

pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(text: &str) -> GoParams {
        let words: Vec<&str> = text.split_whitespace().collect();
        GoParams::parse(&words).0
    }

    #[test]
    fn parses_all_arguments() {
        let g = go("ponder btime 1000 wtime -5 byoyomi 3000 binc 10 winc 20 nodes 7");
        assert!(g.ponder);
        assert_eq!(
            (g.btime, g.wtime, g.byoyomi, g.binc, g.winc, g.nodes),
            (Some(1000), Some(0), Some(3000), Some(10), Some(20), Some(7))
        );
        assert_eq!(go("mate 500").mate, Some(MateLimit::Millis(500)));
        assert_eq!(go("mate infinite").mate, Some(MateLimit::Infinite));
        assert_eq!(go("mate").mate, Some(MateLimit::Infinite));
        assert!(go("infinite").infinite);
        assert_eq!(go("searchmoves 7g7f 2g2f btime 5").searchmoves, vec!["7g7f", "2g2f"]);
        assert_eq!(go("searchmoves 7g7f 2g2f btime 5").btime, Some(5));
        // Absurd numbers are clamped, and no budget overflows.
        assert_eq!(go("btime 99999999999999999 winc 9223372036854775807").winc, Some(MAX_NUMBER));
        let huge = "btime 9223372036854775807 binc 9223372036854775807 byoyomi 9223372036854775807";
        assert!(budget(&go(huge), Color::Black, 0, 0, false).unwrap().hard.as_millis() > 0);
        let (g, warnings) = GoParams::parse(&["btime", "x", "wtime", "byoyomi", "100", "bogus"]);
        assert_eq!(g.btime, None);
        assert_eq!(g.byoyomi, Some(100));
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(!go("").has_limits());
    }

    #[test]
    fn byoyomi_only_spends_the_byoyomi_less_the_margin() {
        let b = budget(&go("btime 0 wtime 0 byoyomi 1000"), Color::Black, 10, 300, false).unwrap();
        assert_eq!(b, Budget::fixed(700));
        let b = budget(&go("byoyomi 1000"), Color::White, 10, 300, false).unwrap();
        assert_eq!(b, Budget::fixed(700));
        // Short byoyomi: at most half of it goes to the margin.
        let b = budget(&go("byoyomi 100"), Color::White, 10, 300, false).unwrap();
        assert_eq!(b, Budget::fixed(50));
    }

    #[test]
    fn movetime_and_bare_go() {
        assert_eq!(budget(&go("movetime 2000"), Color::Black, 0, 100, false), Some(Budget::fixed(1900)));
        assert_eq!(budget(&go(""), Color::Black, 0, 100, false), Some(Budget::fixed(900)));
        assert_eq!(budget(&go(""), Color::Black, 0, 100, true), None);
        assert_eq!(budget(&go("nodes 100"), Color::Black, 0, 100, false), None);
        assert_eq!(budget(&go("infinite byoyomi 100"), Color::Black, 0, 100, false), None);
    }

    #[test]
    fn sudden_death_never_uses_more_than_the_clock() {
        for ply in [0u32, 40, 80, 120, 300] {
            for time in [0u64, 50, 400, 1000, 10_000, 600_000] {
                for inc in [0u64, 1000, 10_000] {
                    for byoyomi in [0u64, 1000] {
                        let text = format!("btime {time} wtime 99 binc {inc} winc 0 byoyomi {byoyomi}");
                        let b = budget(&go(&text), Color::Black, ply, 300, false).unwrap();
                        assert!(b.soft <= b.hard, "{text}: {b:?}");
                        let allowed = time + byoyomi - 300.min((time + byoyomi) / 2);
                        assert!(b.hard.as_millis() as u64 <= allowed, "{text} ply {ply}: {b:?}");
                    }
                }
            }
        }
        // Ten minutes at the start: about 7.5 s a move, extendable to 30 s.
        let b = budget(&go("btime 600000 wtime 600000"), Color::Black, 0, 300, false).unwrap();
        assert_eq!((b.soft.as_millis(), b.hard.as_millis()), (7500, 30000));
        // White uses its own clock.
        let b = budget(&go("btime 600000 wtime 1000"), Color::White, 0, 300, false).unwrap();
        assert!(b.hard.as_millis() <= 700);
    }

    #[test]
    fn an_increment_is_spent_not_eaten_by_the_margin() {
        // 1 s + 100 ms (ShogiArena's fast games), the default 300 ms margin: each move gets its
        // increment and a share of the clock, up to 350 ms, never past the clock less the margin.
        let b = budget(&go("btime 1000 wtime 1000 binc 100 winc 100"), Color::Black, 0, 300, false).unwrap();
        assert_eq!((b.soft.as_millis(), b.hard.as_millis()), (112, 350));
        // A clock grown to 2.4 s spends more per move: the bank does not pile up for ever.
        let b = budget(&go("btime 2400 wtime 2400 binc 100 winc 100"), Color::White, 0, 300, false).unwrap();
        assert_eq!((b.soft.as_millis(), b.hard.as_millis()), (130, 520));
        // Almost no clock left: the margin still holds (at most half the clock goes to it).
        let b = budget(&go("btime 150 wtime 150 binc 100 winc 100"), Color::Black, 0, 300, false).unwrap();
        assert!(b.hard.as_millis() <= 75, "{b:?}");
    }

    #[test]
    fn truncation_respects_characters() {
        assert_eq!(truncate("abc", 5), "abc");
        assert!(truncate(&"あ".repeat(100), 10).starts_with("あああ"));
    }
}
