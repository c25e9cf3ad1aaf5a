//! koma-base: what every koma crate shares and no stage owns. Today the durable write
//! ([`durable`]): every file koma publishes goes through it.

pub mod durable;
