//! koma-mate: checkmate solvers over the rules core, for the USI engine's `go mate`, its quick
//! mates before each move, and `koma mate`.
//!
//! - [`DfPn`]: depth-first proof-number search (Nagai 2002) with a transposition table whose
//!   entries are shared between positions that differ only in the attacker's hand (hand
//!   dominance over proof and disproof pieces), the 1 + ε threshold trick (Pawlewicz & Lew 2006),
//!   mate-in-one checks at new OR nodes and behind new evasions, and repetition handled
//!   path-dependently (a cycle is no mate for the attacker; such a result is never stored as
//!   final). It proves long mates and proves that none exists.
//! - [`exact::MateSearch`]: iterative deepening over checks and evasions; exact (shortest mate,
//!   longest defence) for short mates, too slow past about 9 plies. The test oracle for df-pn.
//! - [`verify_mate_line`]: replays a line and checks that it is a legal sequence of checks and
//!   evasions ending in checkmate.
//! - [`problems`]: a reproducible problem set (positions from random games) for tests and benches.
//!
//! Attacker moves are the legal checks (non-promotions included); defender moves are all legal
//! evasions (interpositions included, however futile). Pawn-drop mate is illegal and never
//! generated. docs/mate.md describes the algorithm and its limits.

mod dfpn;
pub mod exact;
mod line;
pub mod problems;
mod shortest;
mod table;

pub use dfpn::{DfPn, Limits, Outcome};
pub use line::{verify_mate_line, NotMate};
pub use shortest::Shortest;
pub use table::DEFAULT_TABLE_MIB;
