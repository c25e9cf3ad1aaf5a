//! koma-arena: matches between players (koma checkpoints, reference players, USI engines),
//! match statistics and ratings.

pub mod game;
pub mod matches;
pub mod openings;
pub mod player;
pub mod ratings;
pub mod stats;
pub mod usi_client;
