//! KIF records (Kifu for Windows style): header lines `key：value`, the 手合割 handicap or a board
//! diagram (BOD), numbered move lines such as `   1 ７六歩(77)   ( 0:01/00:00:01)`, end words
//! (`投了`, `詰み`, …) and the `まで…` summary, `*` comments. Only the main line is read: reading
//! stops at the first `変化：` (variation) line. The same reader reads KI2 (moves in Japanese
//! notation, `▲７六歩    △３四歩`; `ki2.rs`) and board diagrams (`bod.rs`).

use std::fmt::Write;
use std::time::Duration;

use crate::color::Color;
use crate::handicap::Handicap;
use crate::mv::Move;
use crate::piece::{Piece, PieceType};
use crate::position::Position;
use crate::rules::{EndReason, GameResult};
use crate::square::Square;

use super::bod::{board_diagram, diagram_sfen, parse_bod_row, parse_hand};
use super::error::{ParseError, ParseErrorKind as K, WriteError};
use super::notation::{japanese_piece_name, japanese_square, strip_piece_name, strip_square, RANK_KANJI};
use super::{end_marker_name, end_marker_reason, one_line, GameRecord, RecordMove, END_MARKER, HEADER_NAMES};

/// The start position a 手合割 name stands for (`その他` has none: the file gives a diagram).
pub fn handicap_position(name: &str) -> Option<Position> {
    Handicap::from_name(name).map(Handicap::position)
}

/// End words of move lines, longest first. `最大手数` (the move limit, a draw) is rsshogi's.
const END_WORDS: [&str; 12] = [
    "入玉勝ち",
    "入玉宣言",
    "反則勝ち",
    "反則負け",
    "切れ負け",
    "最大手数",
    "持将棋",
    "千日手",
    "投了",
    "詰み",
    "中断",
    "不詰",
];

fn end_word_result(word: &str, stm: Color) -> Option<GameResult> {
    let (winner, reason) = match word {
        "投了" => (Some(!stm), EndReason::Resignation),
        "詰み" => (Some(!stm), EndReason::Checkmate),
        "千日手" => (None, EndReason::Repetition),
        "持将棋" => (None, EndReason::Declaration),
        "入玉勝ち" | "入玉宣言" => (Some(stm), EndReason::Declaration),
        "切れ負け" => (Some(!stm), EndReason::TimeLoss),
        "反則負け" => (Some(!stm), EndReason::IllegalMove),
        "反則勝ち" => (Some(stm), EndReason::IllegalMove),
        "中断" => (None, EndReason::Abort),
        "最大手数" => (None, EndReason::MaxMoves),
        _ => return None,
    };
    Some(GameResult { winner, reason })
}

/// The result a `まで77手で先手の勝ち` summary line states, if it is understood.
fn summary_result(line: &str, stm: Color) -> Option<GameResult> {
    let rest = line.trim().strip_prefix("まで")?;
    let rest = rest.trim_start_matches('、');
    let digits = rest.find('手')?;
    let rest = rest[digits..].strip_prefix("手で")?;
    fn side(s: &str) -> Option<(Color, &str)> {
        for (name, c) in
            [("先手", Color::Black), ("下手", Color::Black), ("後手", Color::White), ("上手", Color::White)]
        {
            if let Some(r) = s.strip_prefix(name) {
                return Some((c, r.strip_prefix('の').unwrap_or(r)));
            }
        }
        None
    }
    let (winner, reason) = if let Some(r) = rest.strip_prefix("時間切れにより") {
        (Some(side(r)?.0), EndReason::TimeLoss)
    } else if let Some((c, r)) = side(rest) {
        match r.trim_end() {
            "勝ち" => (Some(c), EndReason::Resignation),
            "反則勝ち" => (Some(c), EndReason::IllegalMove),
            "反則負け" => (Some(!c), EndReason::IllegalMove),
            "入玉勝ち" => (Some(c), EndReason::Declaration),
            _ => return None,
        }
    } else {
        match rest.trim_end() {
            "千日手" => (None, EndReason::Repetition),
            "持将棋" => (None, EndReason::Declaration),
            "中断" => (None, EndReason::Abort),
            "最大手数" => (None, EndReason::MaxMoves),
            "詰み" => (Some(!stm), EndReason::Checkmate),
            "入玉宣言" => (Some(stm), EndReason::Declaration),
            _ => return None,
        }
    };
    Some(GameResult { winner, reason })
}

/// A parsed move line.
enum MoveLine<'a> {
    Move {
        number: u32,
        same: bool,
        to: Option<Square>,
        piece: PieceType,
        promote: bool,
        drop: bool,
        from: Option<Square>,
        time: Option<Duration>,
    },
    End {
        word: &'a str,
    },
}

fn parse_move_line(line: &str) -> Result<MoveLine<'_>, String> {
    let t = line.trim_start();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let number: u32 = t[..digits_end].parse().map_err(|_| "bad move number".to_string())?;
    let mut s = t[digits_end..].trim_start_matches([' ', '　', '\t']);
    if let Some(word) = END_WORDS.iter().find(|w| s.starts_with(*w)) {
        return Ok(MoveLine::End { word });
    }
    let (same, to) = if let Some(rest) = s.strip_prefix('同') {
        s = rest.trim_start_matches([' ', '　']);
        (true, None)
    } else {
        let (sq, rest) = strip_square(s).ok_or("expected a destination such as ７六 or 同")?;
        s = rest;
        (false, Some(sq))
    };
    let (piece, rest) = strip_piece_name(s).ok_or("expected a piece name")?;
    s = rest;
    let mut promote = false;
    let mut drop = false;
    if let Some(r) = s.strip_prefix("不成") {
        s = r;
    } else if let Some(r) = s.strip_prefix('成') {
        promote = true;
        s = r;
    } else if let Some(r) = s.strip_prefix("生") {
        s = r;
    }
    if let Some(r) = s.strip_prefix('打') {
        drop = true;
        s = r;
    }
    let mut from = None;
    if let Some(r) = s.strip_prefix('(') {
        let (inside, r) = r.split_once(')').ok_or("unclosed origin '('")?;
        let b = inside.as_bytes();
        if b.len() != 2 || !b.iter().all(|c| c.is_ascii_digit()) {
            return Err(format!("bad origin ({inside})"));
        }
        if inside == "00" {
            drop = true;
        } else {
            let (f, rk) = (b[0] - b'0', b[1] - b'0');
            if f == 0 || rk == 0 {
                return Err(format!("bad origin ({inside})"));
            }
            from = Square::new(f - 1, rk - 1);
        }
        s = r;
    }
    if !drop && from.is_none() {
        return Err("a board move needs its origin, such as (77)".to_string());
    }
    if drop && promote {
        return Err("a drop cannot promote".to_string());
    }
    // Time: `( 0:01/00:00:01)`; a trailing `+` marks a move with variations.
    let s = s.trim_matches(|c: char| c.is_whitespace() || c == '　').trim_end_matches('+').trim_end();
    let time = if s.is_empty() {
        None
    } else {
        let inner = s
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| format!("unexpected {s:?} after the move"))?;
        let per_move = inner.split('/').next().unwrap_or("").trim();
        if per_move.is_empty() {
            None
        } else {
            Some(parse_clock(per_move).ok_or_else(|| format!("bad time {inner:?}"))?)
        }
    };
    Ok(MoveLine::Move { number, same, to, piece, promote, drop, from, time })
}

/// `m:ss` or `h:mm:ss` (seconds may have decimals, which are dropped).
fn parse_clock(s: &str) -> Option<Duration> {
    let mut total: u64 = 0;
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() < 2 || parts.len() > 3 {
        return None;
    }
    for p in parts {
        let p = p.trim();
        let p = p.split('.').next().unwrap_or("");
        if p.is_empty() || p.len() > 9 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        total = total.checked_mul(60)?.checked_add(p.parse::<u64>().ok()?)?;
    }
    Some(Duration::from_secs(total))
}

pub(super) struct KifReader {
    start: Option<Position>,
    handicap_other: Option<usize>,
    bod_rows: Vec<(usize, [Option<Piece>; 9])>,
    bod_line: usize,
    hands: [Option<[u32; 15]>; 2],
    side: Option<Color>,
    names: [Option<String>; 2],
    headers: Vec<(String, String)>,
    comments: Vec<String>,
    pos: Option<Position>,
    pub(super) moves: Vec<RecordMove>,
    first_number: Option<u32>,
    result: Option<GameResult>,
    pub(super) end_word: Option<String>,
    summary: Option<GameResult>,
    marker: Option<EndReason>,
}

impl KifReader {
    pub(super) fn position(&mut self) -> Result<&mut Position, ParseError> {
        if self.pos.is_none() {
            let pos = if !self.bod_rows.is_empty() {
                if self.bod_rows.len() != 9 {
                    return Err(ParseError::new(
                        self.bod_line,
                        K::BoardLine {
                            text: String::new(),
                            reason: format!("the diagram has {} rows, expected 9", self.bod_rows.len()),
                        },
                    ));
                }
                let rows = std::array::from_fn(|rank| self.bod_rows[rank].1);
                let sfen = diagram_sfen(&rows, &self.hands, self.side);
                Position::from_sfen(&sfen).map_err(|e| ParseError::new(self.bod_line, K::Position(e)))?
            } else if let Some(p) = &self.start {
                p.clone()
            } else if let Some(l) = self.handicap_other {
                return Err(ParseError::new(l, K::UnknownHandicap("その他 (without a board diagram)".into())));
            } else {
                Position::startpos()
            };
            self.pos = Some(pos);
        }
        Ok(self.pos.as_mut().expect("set above"))
    }

    fn header(&mut self, key: &str, value: &str, line: usize) -> Result<(), ParseError> {
        let value = value.trim_matches(|c: char| c == '　' || c.is_whitespace());
        let name = |v: &str| if v.is_empty() { None } else { Some(v.to_string()) };
        match key {
            "手合割" => {
                if value == "その他" {
                    self.handicap_other = Some(line);
                } else {
                    self.start = Some(
                        handicap_position(value)
                            .ok_or_else(|| ParseError::new(line, K::UnknownHandicap(value.to_string())))?,
                    );
                }
            }
            "先手" | "下手" => self.names[0] = name(value),
            "後手" | "上手" => self.names[1] = name(value),
            "先手の持駒" | "下手の持駒" => self.hands[0] = Some(parse_hand(value, line)?),
            "後手の持駒" | "上手の持駒" => self.hands[1] = Some(parse_hand(value, line)?),
            _ => {
                let key = HEADER_NAMES.iter().find(|(_, k)| *k == key).map_or(key, |(c, _)| c);
                self.headers.push((key.to_string(), value.to_string()));
            }
        }
        Ok(())
    }

    fn comment(&mut self, text: &str) {
        if let Some(name) = text.strip_prefix(END_MARKER) {
            if let Some(reason) = end_marker_reason(name) {
                self.marker = Some(reason);
                return;
            }
        }
        match self.moves.last_mut() {
            Some(m) if self.end_word.is_none() => {
                if let Some(rest) = text.strip_prefix("*") {
                    if let Some(v) = rest.strip_prefix("評価値 ").and_then(|v| v.trim().parse::<i32>().ok()) {
                        m.eval = Some(v);
                        return;
                    }
                    if let Some(i) = rest.find("評価値 ") {
                        if let Some(v) =
                            rest[i + "評価値 ".len()..].split_whitespace().next().and_then(|v| v.parse::<i32>().ok())
                        {
                            m.eval.get_or_insert(v);
                        }
                    }
                }
                match &mut m.comment {
                    Some(c) => {
                        c.push('\n');
                        c.push_str(text);
                    }
                    None => m.comment = Some(text.to_string()),
                }
            }
            _ => self.comments.push(text.to_string()),
        }
    }

    fn move_line(&mut self, raw: &str, line: usize) -> Result<(), ParseError> {
        let n = self.moves.len() as u32 + 1;
        let err = |kind| ParseError::at_move(line, n, kind);
        // The move as written, without its number, for messages.
        let text = raw.trim().trim_start_matches(|c: char| c.is_ascii_digit()).trim().to_string();
        let parsed = parse_move_line(raw).map_err(|reason| err(K::BadMove { text: text.clone(), reason }))?;
        if let Some(end) = &self.end_word {
            return Err(err(K::MoveAfterEnd(end.clone())));
        }
        let pos = self.position()?;
        match parsed {
            MoveLine::End { word } => {
                let stm = pos.side_to_move();
                let result = end_word_result(word, stm).ok_or_else(|| err(K::UnsupportedSpecial(word.to_string())))?;
                self.result = Some(result);
                self.end_word = Some(word.to_string());
            }
            MoveLine::Move { number, same, to, piece, promote, drop, from, time } => {
                let expected = self.first_number.unwrap_or(number).saturating_add(self.moves.len() as u32);
                if number != expected {
                    return Err(err(K::MoveNumber { found: number, expected }));
                }
                self.first_number.get_or_insert(number);
                let pos = self.pos.as_mut().expect("built above");
                let to = match (same, to) {
                    (true, _) => pos.last_move().map(|m| m.to()).ok_or_else(|| err(K::NoPreviousMove))?,
                    (false, Some(t)) => t,
                    (false, None) => return Err(err(K::BadMove { text, reason: "no destination".into() })),
                };
                let bad = |reason: String| err(K::BadMove { text: text.clone(), reason });
                let mv = if drop {
                    if !PieceType::HAND.contains(&piece) {
                        return Err(bad(format!("{} cannot be dropped", japanese_piece_name(piece))));
                    }
                    Move::drop(piece, to)
                } else {
                    let from = from.ok_or_else(|| bad("no origin".into()))?;
                    if from == to {
                        return Err(bad("origin and destination are the same square".into()));
                    }
                    match pos.piece_at(from) {
                        Some(p) if p.color() == pos.side_to_move() && p.piece_type() == piece => {}
                        Some(p) if p.color() == pos.side_to_move() => {
                            return Err(bad(format!(
                                "the piece on the origin is {}, not {}",
                                japanese_piece_name(p.piece_type()),
                                japanese_piece_name(piece)
                            )))
                        }
                        _ => return Err(bad("no piece of the side to move on the origin".into())),
                    }
                    Move::board(from, to, promote)
                };
                if !pos.is_legal(mv) {
                    return Err(err(K::IllegalMove { text, sfen: pos.to_sfen() }));
                }
                pos.do_move(mv);
                let mut rm = RecordMove::new(mv);
                rm.time = time;
                self.moves.push(rm);
            }
        }
        Ok(())
    }
}

/// Reads a KIF or KI2 game (text already decoded; see [`super::decode`]). Reading stops at the first
/// `変化：` line: variations are not read.
pub fn parse_kif(text: &str) -> Result<GameRecord, ParseError> {
    let mut r = KifReader {
        start: None,
        handicap_other: None,
        bod_rows: Vec::new(),
        bod_line: 0,
        hands: [None, None],
        side: None,
        names: [None, None],
        headers: Vec::new(),
        comments: Vec::new(),
        pos: None,
        moves: Vec::new(),
        first_number: None,
        result: None,
        end_word: None,
        summary: None,
        marker: None,
    };
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let raw = raw.trim_end_matches(['\r', '\n']);
        let t = raw.trim_matches(|c: char| c.is_whitespace() || c == '　');
        if t.is_empty() || raw.starts_with('#') || raw.starts_with('&') {
            continue;
        }
        if let Some(c) = raw.strip_prefix('*') {
            r.comment(c);
            continue;
        }
        if t.starts_with("変化：") || t.starts_with("変化:") {
            break;
        }
        if t.starts_with("まで") {
            if r.summary.is_none() {
                let stm = r.position()?.side_to_move();
                r.summary = summary_result(t, stm);
            }
            continue;
        }
        if raw.starts_with('|') {
            if r.pos.is_some() {
                return Err(ParseError::new(line, K::PositionAfterMoves));
            }
            let (rank, row) = parse_bod_row(raw, line)?;
            if let Some(rank) = rank {
                if rank != r.bod_rows.len() {
                    return Err(ParseError::new(
                        line,
                        K::BoardLine {
                            text: raw.to_string(),
                            reason: format!("rank {} out of order", RANK_KANJI[rank]),
                        },
                    ));
                }
            }
            if r.bod_rows.len() >= 9 {
                return Err(ParseError::new(
                    line,
                    K::BoardLine { text: raw.to_string(), reason: "more than 9 rows".into() },
                ));
            }
            r.bod_rows.push((line, row));
            r.bod_line = line;
            continue;
        }
        if t.starts_with("+--")
            || t.starts_with('９')
            || t.starts_with("手数----")
            || t.starts_with("手数＝")
            || t.starts_with("手数=")
        {
            continue;
        }
        match t {
            "先手番" | "下手番" => {
                r.side = Some(Color::Black);
                continue;
            }
            "後手番" | "上手番" => {
                r.side = Some(Color::White);
                continue;
            }
            _ => {}
        }
        if t.starts_with(|c: char| c.is_ascii_digit()) {
            r.move_line(raw, line)?;
            continue;
        }
        if t.starts_with(super::ki2::KI2_MARKS) {
            r.ki2_line(t, line)?;
            continue;
        }
        if let Some((k, v)) = t.split_once('：') {
            r.header(k.trim(), v, line)?;
            continue;
        }
        return Err(ParseError::new(line, K::UnknownLine(t.to_string())));
    }
    r.position()?;
    let pos = r.pos.take().expect("built above");
    let mut record = GameRecord::from_position(&pos);
    for (slot, m) in record.moves.iter_mut().zip(r.moves) {
        *slot = m;
    }
    record.result = r.result.or(r.summary).map(|res| super::refine_result(res, &pos, r.marker));
    let [black, white] = r.names;
    record.black = black;
    record.white = white;
    record.headers = r.headers;
    record.comments = r.comments;
    Ok(record)
}

pub(super) fn display_width(s: &str) -> usize {
    s.chars().map(|c| if c.is_ascii() { 1 } else { 2 }).sum()
}

fn clock(t: Duration) -> (u64, u64) {
    (t.as_secs() / 60, t.as_secs() % 60)
}

/// The KIF text of a move (without number and time): `７六歩(77)`, `同　角成(88)`, `５五角打`.
pub fn kif_move_text(pos: &Position, m: Move, previous_to: Option<Square>) -> String {
    let mut s = String::new();
    if previous_to == Some(m.to()) {
        s.push_str("同　");
    } else {
        s.push_str(&japanese_square(m.to()));
    }
    match m.drop_piece_type() {
        Some(pt) => {
            s.push_str(japanese_piece_name(pt));
            s.push('打');
        }
        None => {
            let pt = pos.piece_at(m.from()).map_or(PieceType::Pawn, |p| p.piece_type());
            s.push_str(japanese_piece_name(pt));
            if m.is_promotion() {
                s.push('成');
            }
            let _ = write!(s, "({}{})", m.from().file_index() + 1, m.from().rank_index() + 1);
        }
    }
    s
}

/// The end word and `まで…` summary of a result; the marker restores a reason KIF cannot say.
fn natural_ending(
    result: GameResult,
    stm: Color,
    plies: usize,
    handicap: bool,
    ki2: bool,
    mated: bool,
) -> (&'static str, String) {
    let name = |c: Color| match (c, handicap) {
        (Color::Black, false) => "先手",
        (Color::White, false) => "後手",
        (Color::Black, true) => "下手",
        (Color::White, true) => "上手",
    };
    let GameResult { winner, reason } = result;
    let won = |w: Color| format!("まで{plies}手で{}の勝ち", name(w));
    let illegal = |w: Option<Color>| match w {
        Some(w) if w == stm => ("反則勝ち", format!("まで{plies}手で{}の反則勝ち", name(w))),
        Some(w) => ("反則負け", format!("まで{plies}手で{}の反則負け", name(!w))),
        None => ("中断", format!("まで{plies}手で中断")),
    };
    let (word, summary) = match reason {
        // A KI2 summary `…の勝ち` reads back as checkmate only when the position is mate.
        EndReason::Checkmate if ki2 && !mated => ("詰み", format!("まで{plies}手で詰み")),
        EndReason::Checkmate => ("詰み", won(winner.unwrap_or(!stm))),
        EndReason::Resignation => ("投了", won(winner.unwrap_or(!stm))),
        EndReason::Repetition => ("千日手", format!("まで{plies}手で千日手")),
        EndReason::PerpetualCheck => match winner {
            Some(_) => illegal(winner),
            None => ("千日手", format!("まで{plies}手で千日手")),
        },
        EndReason::Declaration => match winner {
            Some(w) => ("入玉勝ち", format!("まで{plies}手で{}の入玉勝ち", name(w))),
            None => ("持将棋", format!("まで{plies}手で持将棋")),
        },
        EndReason::Try => match winner {
            Some(w) if w == stm => ("入玉勝ち", format!("まで{plies}手で{}の入玉勝ち", name(w))),
            Some(w) => ("投了", won(w)),
            None => ("中断", format!("まで{plies}手で中断")),
        },
        EndReason::MaxMoves => ("持将棋", format!("まで{plies}手で持将棋")),
        // KI2 has only the summary, which must say 時間切れ; KIF says it in the end word (and
        // cshogi reads only the plain form of the summary).
        EndReason::TimeLoss if ki2 => {
            ("切れ負け", format!("まで{plies}手で時間切れにより{}の勝ち", name(winner.unwrap_or(!stm))))
        }
        EndReason::TimeLoss => ("切れ負け", won(winner.unwrap_or(!stm))),
        EndReason::IllegalMove | EndReason::Forfeit => illegal(winner),
        EndReason::Abort => ("中断", format!("まで{plies}手で中断")),
    };
    (word, summary)
}

/// The end word, the `まで…` summary and the marker reason (`*koma-end:…`) that make a result read
/// back exactly: KIF reads the end word, KI2 the summary.
pub(super) fn ending(
    result: GameResult,
    final_pos: &Position,
    plies: usize,
    handicap: bool,
    ki2: bool,
) -> (&'static str, String, Option<EndReason>) {
    let stm = final_pos.side_to_move();
    let natural = natural_ending(result, stm, plies, handicap, ki2, !final_pos.has_legal_move());
    let read = |(word, summary): &(&'static str, String)| {
        let r = if ki2 { summary_result(summary, stm) } else { end_word_result(word, stm) };
        r.map(|r| super::refine_result(r, final_pos, None))
    };
    let name = |c: Color| match (c, handicap) {
        (Color::Black, false) => "先手",
        (Color::White, false) => "後手",
        (Color::Black, true) => "下手",
        (Color::White, true) => "上手",
    };
    let by_winner = |w: Option<Color>| match w {
        Some(w) if w == stm => ("反則勝ち", format!("まで{plies}手で{}の反則勝ち", name(w))),
        Some(w) => ("投了", format!("まで{plies}手で{}の勝ち", name(w))),
        None => ("中断", format!("まで{plies}手で中断")),
    };
    let ((word, summary), marker) = super::choose_ending(result, natural, read, by_winner);
    (word, summary, marker)
}

/// Writes a game as KIF text (UTF-8; encode it with [`super::encode_shift_jis`] for `.kif`).
/// Whether `key：…` reads back as a header with this key: not one the reader interprets itself,
/// and not starting like another kind of line (a move, a comment, a diagram row, `変化`, `まで`, …).
fn header_key_writable(key: &str) -> bool {
    const SPECIAL: [&str; 9] =
        ["手合割", "先手", "後手", "下手", "上手", "先手の持駒", "後手の持駒", "下手の持駒", "上手の持駒"];
    const STARTS: [&str; 6] = ["変化", "まで", "+--", "手数", "#", "&"];
    let first = key.chars().next();
    !key.is_empty()
        && !SPECIAL.contains(&key)
        && !STARTS.iter().any(|p| key.starts_with(p))
        && !first
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '*' | '|' | '９') || super::ki2::KI2_MARKS.contains(&c))
}

/// The header lines shared by KIF and KI2: title, fields, handicap or diagram, names, game comments.
pub(super) fn write_header(game: &GameRecord, out: &mut String, kif: bool) -> bool {
    out.push_str(if kif {
        "# ---- koma 棋譜ファイル ----\n"
    } else {
        "# ---- koma 棋譜ファイル (KI2) ----\n"
    });
    for (k, v) in &game.headers {
        let key = HEADER_NAMES.iter().find(|(c, _)| c == k).map_or(k.as_str(), |(_, j)| j);
        let key = one_line(key).replace('：', ":");
        let key = key.trim_matches(|c: char| c.is_whitespace() || c == '　');
        if !header_key_writable(key) {
            continue;
        }
        let _ = writeln!(out, "{key}：{}", one_line(v));
    }
    let handicap = game.handicap();
    let is_handicap = matches!(handicap, Some(h) if h != Handicap::Even);
    match handicap {
        Some(h) if !matches!(h, Handicap::ThreePawns | Handicap::NakedKing) => {
            let _ = writeln!(out, "手合割：{}", h.japanese_name());
        }
        _ => out.push_str(&board_diagram(&game.start)),
    }
    let (bn, wn) = if is_handicap { ("下手", "上手") } else { ("先手", "後手") };
    let _ = writeln!(out, "{bn}：{}", game.black.as_deref().map(one_line).unwrap_or_default());
    let _ = writeln!(out, "{wn}：{}", game.white.as_deref().map(one_line).unwrap_or_default());
    if kif {
        out.push_str("手数----指手---------消費時間--\n");
    }
    for c in &game.comments {
        for l in c.split('\n') {
            let _ = writeln!(out, "*{}", one_line(l));
        }
    }
    is_handicap
}

/// Writes a game as KIF text (UTF-8; encode it with [`super::encode_shift_jis`] for `.kif`).
pub fn write_kif(game: &GameRecord) -> Result<String, WriteError> {
    let mut out = String::new();
    let is_handicap = write_header(game, &mut out, true);
    let mut pos = game.start.clone();
    let mut totals = [Duration::ZERO; 2];
    let mut previous_to = None;
    for (i, m) in game.moves.iter().enumerate() {
        if !pos.is_legal(m.mv) {
            return Err(WriteError::IllegalMove { move_number: i as u32 + 1, usi: m.mv.to_usi(), sfen: pos.to_sfen() });
        }
        let text = kif_move_text(&pos, m.mv, previous_to);
        let _ = write!(out, "{:>4} {text}", i + 1);
        if let Some(t) = m.time {
            let side = pos.side_to_move().index();
            totals[side] = totals[side].saturating_add(t);
            let pad = 14usize.saturating_sub(display_width(&text));
            let (mm, ss) = clock(t);
            let total = totals[side].as_secs();
            let _ = write!(
                out,
                "{}({:>2}:{:02}/{:02}:{:02}:{:02})",
                " ".repeat(pad),
                mm,
                ss,
                total / 3600,
                total / 60 % 60,
                total % 60
            );
        }
        out.push('\n');
        write_move_notes(&mut out, m);
        previous_to = Some(m.mv.to());
        pos.do_move(m.mv);
    }
    if let Some(result) = game.result {
        let (word, summary, marker) = ending(result, &pos, game.moves.len(), is_handicap, false);
        let _ = writeln!(out, "{:>4} {word}", game.moves.len() + 1);
        let _ = writeln!(out, "{summary}");
        write_end_marker(&mut out, marker);
    }
    Ok(out)
}

/// A move's comment lines (`*…`) and evaluation (`**評価値 N`), as KIF and KI2 both write them.
pub(super) fn write_move_notes(out: &mut String, m: &RecordMove) {
    if let Some(c) = &m.comment {
        for l in c.split('\n') {
            let _ = writeln!(out, "*{}", one_line(l));
        }
    }
    if let Some(e) = m.eval {
        let _ = writeln!(out, "**評価値 {e}");
    }
}

/// The `koma-end:` comment that keeps an ending the end words cannot express.
pub(super) fn write_end_marker(out: &mut String, marker: Option<EndReason>) {
    if let Some(reason) = marker {
        let _ = writeln!(out, "*{END_MARKER}{}", end_marker_name(reason));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_moves_same_drops_and_times() {
        let text = "開始日時：2024/01/02 10:00:00\n手合割：平手\n先手：A\n後手：B\n手数----指手---------消費時間--\n\
                    *opening comment\n   1 ７六歩(77)   ( 0:01/00:00:01)\n   2 ３四歩(33)   ( 0:02/00:00:02)\n\
                    *a comment\n**評価値 -35\n   3 ２二角成(88)   ( 0:03/00:00:04)\n   4 同　銀(31)   ( 0:04/00:00:06)\n\
                    &bookmark\n   5 ５五角打   ( 1:05/00:01:09)+\n   6 投了\nまで5手で先手の勝ち\n\n変化：5手\n   5 ５八金右(49)\n";
        let g = parse_kif(text).unwrap();
        assert_eq!(g.to_usi_position(), "position startpos moves 7g7f 3c3d 8h2b+ 3a2b B*5e");
        assert_eq!(g.black.as_deref(), Some("A"));
        assert_eq!(g.headers, vec![("START_TIME".to_string(), "2024/01/02 10:00:00".to_string())]);
        assert_eq!(g.comments, vec!["opening comment".to_string()]);
        assert_eq!(g.moves[1].comment.as_deref(), Some("a comment"));
        assert_eq!(g.moves[1].eval, Some(-35));
        assert_eq!(g.moves[4].time, Some(Duration::from_secs(65)));
        assert_eq!(g.result, Some(GameResult { winner: Some(Color::Black), reason: EndReason::Resignation }));
        let again = parse_kif(&write_kif(&g).unwrap()).unwrap();
        assert_eq!(again, g);
    }

    #[test]
    fn move_limit_end_word() {
        // rsshogi ends a game drawn at the move limit with `最大手数` (KIF) and `まで…手で最大手数`.
        let max_moves = Some(GameResult { winner: None, reason: EndReason::MaxMoves });
        let g = parse_kif("手合割：平手\n   1 ７六歩(77)\n   2 最大手数\nまで1手で最大手数\n").unwrap();
        assert_eq!((g.moves.len(), g.result), (1, max_moves));
        let g = parse_kif("手合割：平手\n▲７六歩\nまで1手で最大手数\n").unwrap();
        assert_eq!((g.moves.len(), g.result), (1, max_moves));
    }

    #[test]
    fn diagram_start_round_trip() {
        let pos = Handicap::ThreePawns.position();
        let g = GameRecord::new(pos.clone());
        let text = write_kif(&g).unwrap();
        assert!(text.contains("後手の持駒：歩三　"), "{text}");
        assert!(text.contains("後手番"), "{text}");
        assert_eq!(parse_kif(&text).unwrap().start, pos);
    }

    #[test]
    fn odd_header_keys_do_not_change_the_game() {
        // Keys that would read back as moves, comments or a variation mark are not written.
        let mut g = parse_kif("手合割：平手\n   1 ７六歩(77)\n").unwrap();
        for key in ["\u{0}05/01", "  1 ７六歩", "変化", "*x", "まで1手", "|", "▲", "ok"] {
            g.headers.push((key.to_string(), "v".to_string()));
        }
        let text = write_kif(&g).unwrap();
        let back = parse_kif(&text).unwrap();
        assert_eq!(back.moves, g.moves, "{text}");
        assert_eq!(back.headers, vec![("ok".to_string(), "v".to_string())]);
    }

    #[test]
    fn errors() {
        let e = parse_kif("手合割：平手\n   1 ７六歩(77)\n   2 ７六歩(77)\n").unwrap_err();
        assert_eq!((e.line, e.move_number), (3, Some(2)));
        let e = parse_kif("   1 ７六歩(77)\n   3 ３四歩(33)\n").unwrap_err();
        assert!(matches!(e.kind, K::MoveNumber { found: 3, expected: 2 }), "{e}");
        let e = parse_kif("手合割：謎落ち\n").unwrap_err();
        assert!(matches!(e.kind, K::UnknownHandicap(_)), "{e}");
        let e = parse_kif("   1 ７六銀(77)\n").unwrap_err();
        assert!(e.to_string().contains("not 銀"), "{e}");
    }
}
