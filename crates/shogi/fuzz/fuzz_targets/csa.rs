#![no_main]
use koma_shogi::record::{self, Format};
use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    if let Ok(games) = record::read_games(data, Format::Csa) {
        common::check_games(&games, Format::Csa);
    }
});
