//! Game records (CSA, KIF/KIFU, KI2, as read by `koma_shogi::record`) to training samples.
//!
//! Every move of a finished game becomes a sample: the position before the move, the move played
//! as a one-hot policy target, and the game result from the side to move. The final position
//! (nothing was played from it) is not a sample. Games without a result, or aborted (CSA
//! `%CHUDAN`, which koma's reader also uses for `%HIKIWAKE`), have no value target and are skipped.

use koma_shogi::{EndReason, GameRecord, GameResult, Position};

use crate::hcp::eval_to_wdl;
use crate::packed::PackedPosition;
use crate::sample::{flags, result_for, GameSamples, Sample};

/// What to keep and how to build the targets.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordOptions {
    /// Games with fewer moves (plies) are skipped.
    pub min_moves: usize,
    /// Keep only games whose both players' Floodgate ratings (`'black_rate:` / `'white_rate:`
    /// comments) are at least this; games without ratings are skipped when set.
    pub min_rating: Option<f64>,
    /// Use the record's evaluations (CSA `'**`, KIF 評価値; Black's view, centipawns) as root
    /// values: `root_wdl = [σ(v/scale), 0, σ(−v/scale)]` with v from the side to move.
    pub use_evals: bool,
    pub eval_scale: f64,
}

impl Default for RecordOptions {
    fn default() -> RecordOptions {
        RecordOptions { min_moves: 0, min_rating: None, use_evals: false, eval_scale: crate::hcp::DLSHOGI_EVAL_SCALE }
    }
}

/// Why a game was not imported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// No result, or aborted.
    Unfinished,
    /// Fewer moves than `min_moves`.
    TooShort,
    /// `min_rating` is set and the record has no rating for a player.
    NoRating,
    /// A player's rating is below `min_rating`.
    LowRating,
    /// More than 65535 moves.
    TooLong,
    /// A position could not be stored (more pieces than a packed position holds) or a move is
    /// illegal.
    Invalid(String),
}

impl Skip {
    pub fn name(&self) -> &'static str {
        match self {
            Skip::Unfinished => "unfinished",
            Skip::TooShort => "too_short",
            Skip::NoRating => "no_rating",
            Skip::LowRating => "low_rating",
            Skip::TooLong => "too_long",
            Skip::Invalid(_) => "invalid",
        }
    }
}

/// The Floodgate ratings of a record: (Black's, White's), from `'black_rate:NAME:RATING` and
/// `'white_rate:NAME:RATING` comments.
pub fn floodgate_ratings(record: &GameRecord) -> (Option<f64>, Option<f64>) {
    let mut rates = (None, None);
    for c in &record.comments {
        let c = c.trim();
        let (slot, rest) = if let Some(r) = c.strip_prefix("black_rate:") {
            (&mut rates.0, r)
        } else if let Some(r) = c.strip_prefix("white_rate:") {
            (&mut rates.1, r)
        } else {
            continue;
        };
        if let Some(v) = rest.rsplit_once(':').and_then(|(_, v)| v.trim().parse::<f64>().ok()).filter(|v| v.is_finite())
        {
            *slot = Some(v);
        }
    }
    rates
}

/// The result a record's game is imported with (`None`: unfinished or aborted).
pub fn usable_result(record: &GameRecord) -> Option<GameResult> {
    record.result.filter(|r| r.reason != EndReason::Abort)
}

/// One game's samples. `source` becomes the game's `model` field (where it came from).
pub fn record_to_game(record: &GameRecord, source: &str, options: &RecordOptions) -> Result<GameSamples, Skip> {
    let result = usable_result(record).ok_or(Skip::Unfinished)?;
    if record.moves.len() < options.min_moves {
        return Err(Skip::TooShort);
    }
    if let Some(min) = options.min_rating {
        match floodgate_ratings(record) {
            (Some(b), Some(w)) if b >= min && w >= min => {}
            (Some(_), Some(_)) => return Err(Skip::LowRating),
            _ => return Err(Skip::NoRating),
        }
    }
    if record.moves.len() > u16::MAX as usize {
        return Err(Skip::TooLong);
    }
    let start_sfen = record.start.to_sfen();
    let mut pos = Position::from_sfen(&start_sfen).map_err(|e| Skip::Invalid(format!("start position: {e}")))?;
    let mut samples = Vec::with_capacity(record.moves.len());
    for (ply, m) in record.moves.iter().enumerate() {
        if !pos.is_legal(m.mv) {
            return Err(Skip::Invalid(format!("move {} ({}) is illegal in {}", ply + 1, m.mv.to_usi(), pos.to_sfen())));
        }
        let position = PackedPosition::pack(&pos).map_err(|e| Skip::Invalid(e.to_string()))?;
        let us = pos.side_to_move();
        let root_wdl = match m.eval {
            Some(eval) if options.use_evals => {
                let v = if us == koma_shogi::Color::Black { eval as f64 } else { -(eval as f64) };
                eval_to_wdl(v, options.eval_scale)
            }
            _ => [0.0; 3],
        };
        samples.push(Sample {
            position,
            played: Some(m.mv),
            policy: vec![(m.mv, 1.0)],
            root_wdl,
            result: result_for(us, result.winner),
            ply: ply as u16,
            flags: flags::FULL_SEARCH | flags::IMPORTED,
        });
        pos.do_move(m.mv);
    }
    Ok(GameSamples {
        start_sfen,
        result,
        length: record.moves.len() as u16,
        model: source.to_string(),
        moves: record.moves.iter().map(|m| m.mv).collect(),
        samples,
        root_values: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use koma_shogi::record::{read_games, Format};
    use koma_shogi::Color;

    const FLOODGATE: &str = "V2\nN+alpha\nN-beta\n$EVENT:wdoor+floodgate-300-10F+alpha+beta+20240101000000\n\
'black_rate:alpha+0123abcd:3012.5\n'white_rate:beta+4567ef:2890\nPI\n+\n+7776FU\nT1\n'** 40 -3334FU\n-3334FU\nT2\n'** 35\n\
+8822UM\n-3122GI\n+0045KA\n%TORYO\n'summary:toryo:alpha win:beta lose\n";

    #[test]
    fn floodgate_game_to_samples() {
        let [record] = read_games(FLOODGATE.as_bytes(), Format::Csa).unwrap().try_into().unwrap();
        assert_eq!(floodgate_ratings(&record), (Some(3012.5), Some(2890.0)));
        let game = record_to_game(&record, "fg.csa", &RecordOptions::default()).unwrap();
        assert_eq!(game.samples.len(), 5);
        assert_eq!(game.length, 5);
        assert_eq!(game.result.winner, Some(Color::Black), "White is to move after 5 plies and resigns");
        let results: Vec<i8> = game.samples.iter().map(|s| s.result).collect();
        assert_eq!(results, [1, -1, 1, -1, 1]);
        for (ply, s) in game.samples.iter().enumerate() {
            assert_eq!(s.ply as usize, ply);
            assert_eq!(s.policy, vec![(s.played.unwrap(), 1.0)]);
            assert_eq!(s.root_wdl, [0.0; 3]);
            assert_eq!(s.flags, flags::FULL_SEARCH | flags::IMPORTED);
        }
        assert_eq!(game.samples[1].position.unpack().unwrap().side_to_move(), Color::White);

        // Evaluations (Black's view) become root values from the side to move.
        let with_evals = RecordOptions { use_evals: true, ..RecordOptions::default() };
        let game = record_to_game(&record, "fg.csa", &with_evals).unwrap();
        let w = game.samples[0].root_wdl;
        assert!(w[0] > 0.5 && (w[0] + w[2] - 1.0).abs() < 1e-6, "{w:?}");
        let w = game.samples[1].root_wdl;
        assert!(w[0] < 0.5, "White to move, Black's +35: {w:?}");
        assert_eq!(game.samples[2].root_wdl, [0.0; 3]);

        // Filters.
        let opts = |min_moves, min_rating| RecordOptions { min_moves, min_rating, ..RecordOptions::default() };
        assert_eq!(record_to_game(&record, "", &opts(6, None)), Err(Skip::TooShort));
        assert!(record_to_game(&record, "", &opts(5, Some(2890.0))).is_ok());
        assert_eq!(record_to_game(&record, "", &opts(0, Some(2900.0))), Err(Skip::LowRating));
        let [plain] = read_games(b"PI\n+\n+7776FU\n%TORYO\n", Format::Csa).unwrap().try_into().unwrap();
        assert_eq!(record_to_game(&plain, "", &opts(0, Some(1.0))), Err(Skip::NoRating));
    }

    #[test]
    fn unfinished_and_aborted_games_are_skipped() {
        for text in ["PI\n+\n+7776FU\n-3334FU\n", "PI\n+\n+7776FU\n%CHUDAN\n"] {
            let [record] = read_games(text.as_bytes(), Format::Csa).unwrap().try_into().unwrap();
            assert_eq!(record_to_game(&record, "", &RecordOptions::default()), Err(Skip::Unfinished), "{text}");
        }
        let [draw] = read_games(b"PI\n+\n+7776FU\n%SENNICHITE\n", Format::Csa).unwrap().try_into().unwrap();
        let game = record_to_game(&draw, "", &RecordOptions::default()).unwrap();
        assert_eq!(game.samples[0].result, 0);
        assert_eq!(game.result.reason, EndReason::Repetition);
    }
}
