// Shared checks: a game that reads must write, read back to the same moves, start and result, and
// every move must have notation text that names it alone.
use koma_shogi::record::{self, notation, Format, GameRecord};

pub fn check_games(games: &[GameRecord], format: Format) {
    for g in games {
        let bytes = record::write_games(std::slice::from_ref(g), format).expect("a game that was read can be written");
        let back = record::read_games(&bytes, format).expect("written records read back");
        assert_eq!(back.len(), 1);
        let b = &back[0];
        assert_eq!(
            b.start.to_sfen().rsplit_once(' ').map(|x| x.0.to_string()),
            g.start.to_sfen().rsplit_once(' ').map(|x| x.0.to_string())
        );
        assert_eq!(b.moves.iter().map(|m| m.mv).collect::<Vec<_>>(), g.moves.iter().map(|m| m.mv).collect::<Vec<_>>());
        assert_eq!(b.result, g.result);
        let mut pos = g.start.clone();
        let mut prev = None;
        for m in &g.moves {
            let _ = notation::western(&pos, m.mv);
            let _ = notation::vietnamese(&pos, m.mv);
            let ja = notation::japanese(&pos, m.mv, prev);
            assert_eq!(notation::parse_japanese(&pos, &ja, prev), Ok(m.mv), "{ja} in {}", pos.to_sfen());
            prev = Some(m.mv.to());
            pos.do_move(m.mv);
        }
    }
}
