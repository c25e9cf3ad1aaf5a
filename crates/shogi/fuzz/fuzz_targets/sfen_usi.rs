#![no_main]
use koma_shogi::{usi, Position};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(pos) = Position::from_sfen(text) {
        let sfen = pos.to_sfen();
        let again = Position::from_sfen(&sfen).expect("to_sfen output parses");
        assert_eq!(again, pos);
        assert_eq!(again.to_sfen(), sfen);
    }
    if let Ok(pos) = usi::parse_position(text) {
        let cmd = usi::position_command(&pos);
        let again = usi::parse_position(&cmd).expect("position_command output parses");
        assert_eq!(again.to_sfen(), pos.to_sfen());
    }
    let _ = koma_shogi::record::parse_usi_lines(text);
});
