//! koma-arena: matches between players (koma checkpoints, reference players, USI engines),
//! match statistics and ratings.

pub mod alphabeta;
pub mod clock;
pub mod engine_output;
pub mod error;
pub mod game;
pub mod matches;
pub mod openings;
pub mod player;
pub mod ratings;
pub mod spec;
pub mod stats;
pub mod tournament;
pub mod usi_client;
