//! Move text for people: Western notation (Hosking's numeric squares and Hodges' lettered ranks),
//! its Vietnamese variant (letters or full piece names), and Japanese notation as KI2 records write
//! it, with a reader for the Japanese form.
//!
//! All functions take the position *before* the move and a legal move; for an illegal move they
//! still return some text and never panic.

use crate::color::Color;
use crate::mv::Move;
use crate::piece::PieceType;
use crate::position::Position;
use crate::square::Square;

/// Full-width file digits １–９.
pub const FILE_DIGITS: [char; 9] = ['１', '２', '３', '４', '５', '６', '７', '８', '９'];
/// Kanji rank numerals 一–九.
pub const RANK_KANJI: [char; 9] = ['一', '二', '三', '四', '五', '六', '七', '八', '九'];

/// The Japanese name of a piece type as records write it (`歩`, `成銀`, `龍`, …).
pub fn japanese_piece_name(pt: PieceType) -> &'static str {
    match pt {
        PieceType::Pawn => "歩",
        PieceType::Lance => "香",
        PieceType::Knight => "桂",
        PieceType::Silver => "銀",
        PieceType::Gold => "金",
        PieceType::Bishop => "角",
        PieceType::Rook => "飛",
        PieceType::King => "玉",
        PieceType::ProPawn => "と",
        PieceType::ProLance => "成香",
        PieceType::ProKnight => "成桂",
        PieceType::ProSilver => "成銀",
        PieceType::Horse => "馬",
        PieceType::Dragon => "龍",
    }
}

/// The one-character name of a piece type used in board diagrams (`杏`, `圭`, `全` for the
/// promoted lance, knight and silver).
pub fn japanese_piece_char(pt: PieceType) -> char {
    match pt {
        PieceType::ProLance => '杏',
        PieceType::ProKnight => '圭',
        PieceType::ProSilver => '全',
        other => japanese_piece_name(other).chars().next().unwrap_or('歩'),
    }
}

/// Every spelling of a piece name that readers accept, longest first. Besides the usual names,
/// the one-character forms printed in diagrams and move text: 全 promoted silver, 今 or 圭
/// promoted knight, 仝 or 杏 promoted lance, 个 or と tokin.
pub(crate) const PIECE_SPELLINGS: [(&str, PieceType); 22] = [
    ("成銀", PieceType::ProSilver),
    ("成桂", PieceType::ProKnight),
    ("成香", PieceType::ProLance),
    ("歩", PieceType::Pawn),
    ("香", PieceType::Lance),
    ("桂", PieceType::Knight),
    ("銀", PieceType::Silver),
    ("金", PieceType::Gold),
    ("角", PieceType::Bishop),
    ("飛", PieceType::Rook),
    ("玉", PieceType::King),
    ("王", PieceType::King),
    ("と", PieceType::ProPawn),
    ("杏", PieceType::ProLance),
    ("圭", PieceType::ProKnight),
    ("全", PieceType::ProSilver),
    ("馬", PieceType::Horse),
    ("龍", PieceType::Dragon),
    ("竜", PieceType::Dragon),
    ("今", PieceType::ProKnight),
    ("仝", PieceType::ProLance),
    ("个", PieceType::ProPawn),
];

/// Reads a piece name at the start of `s`; returns the type and the rest.
pub(crate) fn strip_piece_name(s: &str) -> Option<(PieceType, &str)> {
    PIECE_SPELLINGS.iter().find_map(|(name, pt)| s.strip_prefix(name).map(|rest| (*pt, rest)))
}

/// `７六` for 7f.
pub fn japanese_square(sq: Square) -> String {
    let mut s = String::new();
    s.push(FILE_DIGITS[sq.file_index() as usize]);
    s.push(RANK_KANJI[sq.rank_index() as usize]);
    s
}

/// Kanji numeral for 1–18 (`一` … `十八`), as hand counts are written.
pub fn kanji_number(n: u32) -> String {
    let digit = |d: u32| RANK_KANJI.get(d as usize - 1).copied().unwrap_or('一');
    match n {
        0 => "〇".to_string(),
        1..=9 => digit(n).to_string(),
        10 => "十".to_string(),
        11..=19 => format!("十{}", digit(n - 10)),
        _ => n.to_string(),
    }
}

/// Reads a kanji numeral 1–19 (`一`…`十九`) or ASCII digits.
pub fn parse_kanji_number(s: &str) -> Option<u32> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok().filter(|&n| n < 100);
    }
    let digit = |c: char| RANK_KANJI.iter().position(|&k| k == c).map(|i| i as u32 + 1);
    let chars: Vec<char> = s.chars().collect();
    match chars.as_slice() {
        [c] if *c == '十' => Some(10),
        [c] => digit(*c),
        ['十', c] => digit(*c).map(|d| 10 + d),
        _ => None,
    }
}

/// Whether `m` could have been played as a promotion (the piece can promote and starts or ends in
/// the promotion zone).
pub fn promotion_possible(pos: &Position, m: Move) -> bool {
    if m.is_drop() {
        return false;
    }
    let us = pos.side_to_move();
    match pos.piece_at(m.from()) {
        Some(p) => p.piece_type().can_promote() && (m.from().in_promotion_zone(us) || m.to().in_promotion_zone(us)),
        None => false,
    }
}

fn moving_type(pos: &Position, m: Move) -> PieceType {
    match m.drop_piece_type() {
        Some(pt) => pt,
        None => pos.piece_at(m.from()).map_or(PieceType::Pawn, |p| p.piece_type()),
    }
}

/// Origins of other pieces of the moving kind that could legally move to the destination too.
fn other_sources(pos: &Position, m: Move, pt: PieceType) -> Vec<Square> {
    let mut out: Vec<Square> = Vec::new();
    for o in pos.legal_moves().as_slice() {
        if o.is_drop() || o.to() != m.to() || (!m.is_drop() && o.from() == m.from()) {
            continue;
        }
        if pos.piece_at(o.from()).map(|p| p.piece_type()) == Some(pt) && !out.contains(&o.from()) {
            out.push(o.from());
        }
    }
    out
}

fn digits(sq: Square) -> String {
    format!("{}{}", sq.file_index() + 1, sq.rank_index() + 1)
}

/// `7f` for 7f: the file digit and the rank letter (Hodges).
fn file_and_letter(sq: Square) -> String {
    format!("{}{}", sq.file_index() + 1, (b'a' + sq.rank_index()) as char)
}

fn western_like(
    pos: &Position,
    m: Move,
    letter: fn(PieceType) -> String,
    paren_origin: bool,
    square: fn(Square) -> String,
) -> String {
    let pt = moving_type(pos, m);
    let mut s = letter(pt);
    if m.is_drop() {
        s.push('*');
        s.push_str(&square(m.to()));
        return s;
    }
    if !other_sources(pos, m, pt).is_empty() {
        if paren_origin {
            s.push('(');
            s.push_str(&square(m.from()));
            s.push(')');
        } else {
            s.push_str(&square(m.from()));
        }
    }
    s.push(if pos.piece_at(m.to()).is_some() { 'x' } else { '-' });
    s.push_str(&square(m.to()));
    if m.is_promotion() {
        s.push('+');
    } else if promotion_possible(pos, m) {
        s.push('=');
    }
    s
}

fn western_letter(pt: PieceType) -> String {
    let base = pt.sfen_letter().to_string();
    if pt.is_promoted() {
        format!("+{base}")
    } else {
        base
    }
}

fn vietnamese_letter(pt: PieceType) -> String {
    let base = match pt.unpromote() {
        PieceType::King => "V",
        PieceType::Rook => "X",
        PieceType::Bishop => "Tg",
        PieceType::Gold => "Vg",
        PieceType::Silver => "B",
        PieceType::Knight => "M",
        PieceType::Lance => "Th",
        _ => "T",
    };
    if pt.is_promoted() {
        format!("+{base}")
    } else {
        base.to_string()
    }
}

/// Western (Hosking) notation: `P-76`, `Bx22+`, `S-21=` (promotion declined), `N65-53+` (origin
/// only when another piece of the kind could also move there), `P*55`, `+Rx24`.
pub fn western(pos: &Position, m: Move) -> String {
    western_like(pos, m, western_letter, false, digits)
}

/// Hodges-style Western notation: as [`western`], with the rank as a letter a–i: `P-7f`, `Bx2b+`,
/// `S-2a=`, `N6e-5c+` (origin only when ambiguous), `P*5e`, `+Rx2d`.
pub fn hodges(pos: &Position, m: Move) -> String {
    western_like(pos, m, western_letter, false, file_and_letter)
}

/// Vietnamese notation: the Western form with the Vietnamese Shogi Club's letters (V king, X rook,
/// Tg bishop, Vg gold, B silver, M knight, Th lance, T pawn, `+` for promoted) and an ambiguous
/// origin in parentheses: `T-76`, `Xx24`, `+Xx24`, `B-21+`, `M(65)-53+`, `T*55`.
pub fn vietnamese(pos: &Position, m: Move) -> String {
    western_like(pos, m, vietnamese_letter, true, digits)
}

/// Vietnamese notation with full piece names ([`vietnamese_piece_name`]) instead of letters:
/// `Tốt-76`, `Xex24`, `+Xex24`, `Bạc-21+`, `Mã(65)-53+`, `Tốt*55`.
pub fn vietnamese_names(pos: &Position, m: Move) -> String {
    western_like(pos, m, |pt| vietnamese_piece_name(pt).to_string(), true, digits)
}

/// The Vietnamese name of a piece type: Vua (king), Xe (rook), Tượng (bishop), Vàng (gold), Bạc
/// (silver), Mã (knight), Thương (lance), Tốt (pawn); a promoted piece is its unpromoted name
/// marked `+`, as the Vietnamese letter notation marks it: `+Xe`, `+Tượng`, `+Bạc`, `+Mã`,
/// `+Thương`, `+Tốt`.
pub fn vietnamese_piece_name(pt: PieceType) -> &'static str {
    match pt {
        PieceType::King => "Vua",
        PieceType::Rook => "Xe",
        PieceType::Bishop => "Tượng",
        PieceType::Gold => "Vàng",
        PieceType::Silver => "Bạc",
        PieceType::Knight => "Mã",
        PieceType::Lance => "Thương",
        PieceType::Pawn => "Tốt",
        PieceType::Dragon => "+Xe",
        PieceType::Horse => "+Tượng",
        PieceType::ProSilver => "+Bạc",
        PieceType::ProKnight => "+Mã",
        PieceType::ProLance => "+Thương",
        PieceType::ProPawn => "+Tốt",
    }
}

/// A whole game as numbered move pairs, one pair a line, in the given style: `1. P-7f P-3d`. When
/// White moves first (a handicap game) the missing first move is `...`: `1. ... P-3d`.
pub fn numbered_moves(start: &Position, moves: &[Move], text: fn(&Position, Move) -> String) -> String {
    let mut pos = start.clone();
    let mut out = String::new();
    let mut number = 1;
    if pos.side_to_move() == Color::White && !moves.is_empty() {
        out.push_str("1. ...");
    }
    for &m in moves {
        if pos.side_to_move() == Color::Black {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!("{number}."));
        }
        out.push(' ');
        out.push_str(&text(&pos, m));
        if pos.side_to_move() == Color::White {
            number += 1;
        }
        if !pos.is_legal(m) {
            break;
        }
        pos.do_move(m);
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// A square's horizontal coordinate, growing towards the mover's left (file 9 side for Black).
fn left(c: Color, sq: Square) -> i32 {
    match c {
        Color::Black => sq.file_index() as i32,
        Color::White => 8 - sq.file_index() as i32,
    }
}

/// A square's vertical coordinate, growing towards the mover's front.
fn forward(c: Color, sq: Square) -> i32 {
    match c {
        Color::Black => 8 - sq.rank_index() as i32,
        Color::White => sq.rank_index() as i32,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Motion {
    Up,
    Sideways,
    Back,
}

impl Motion {
    fn word(self) -> &'static str {
        match self {
            Motion::Up => "上",
            Motion::Sideways => "寄",
            Motion::Back => "引",
        }
    }
}

fn motion(c: Color, from: Square, to: Square) -> Motion {
    match forward(c, to) - forward(c, from) {
        d if d > 0 => Motion::Up,
        0 => Motion::Sideways,
        _ => Motion::Back,
    }
}

/// 左/右/直 of an origin relative to the destination (golds, silvers, knights, bishops, rooks).
fn side_word(c: Color, from: Square, to: Square) -> Option<&'static str> {
    match left(c, from) - left(c, to) {
        d if d > 0 => Some("左"),
        d if d < 0 => Some("右"),
        _ if forward(c, to) > forward(c, from) => Some("直"),
        _ => None,
    }
}

/// 左/右 of an origin relative to the other origins (dragons and horses).
fn relative_side_word(c: Color, from: Square, others: &[Square]) -> Option<&'static str> {
    if others.is_empty() {
        return None;
    }
    if others.iter().all(|&o| left(c, from) > left(c, o)) {
        Some("左")
    } else if others.iter().all(|&o| left(c, from) < left(c, o)) {
        Some("右")
    } else {
        None
    }
}

/// The KI2 words that tell the moving piece from the others of its kind that could move to the
/// same square: motion (上/寄/引) when that alone tells them apart, else position (左/右/直),
/// else both (`左上`). Dragons and horses use 左/右 relative to each other and never 直.
fn disambiguation(c: Color, pt: PieceType, from: Square, to: Square, others: &[Square]) -> String {
    if others.is_empty() {
        return String::new();
    }
    let mot = motion(c, from, to);
    if others.iter().all(|&o| motion(c, o, to) != mot) {
        return mot.word().to_string();
    }
    if matches!(pt, PieceType::Dragon | PieceType::Horse) {
        if let Some(w) = relative_side_word(c, from, others) {
            return w.to_string();
        }
        let same: Vec<Square> = others.iter().copied().filter(|&o| motion(c, o, to) == mot).collect();
        return match relative_side_word(c, from, &same) {
            Some(w) => format!("{w}{}", mot.word()),
            None => mot.word().to_string(),
        };
    }
    match side_word(c, from, to) {
        Some(w) if others.iter().all(|&o| side_word(c, o, to) != Some(w)) => w.to_string(),
        Some(w) => format!("{w}{}", mot.word()),
        None => mot.word().to_string(),
    }
}

/// Japanese notation as KI2 writes it, without the ▲/△ mark: `７六歩`, `同　歩` (but `同歩成`,
/// `同金右`, `同成銀`: the space only pads a three-character text), `５八金右`,
/// `５二金直`, `２四龍引`, `５五角打` (打 only when a board piece of the kind could also move
/// there), `２二角成`, `２一銀不成`. `previous_to` is the destination of the previous move, for 同.
pub fn japanese(pos: &Position, m: Move, previous_to: Option<Square>) -> String {
    let pt = moving_type(pos, m);
    let c = pos.side_to_move();
    let name = japanese_piece_name(pt);
    let mut suffix = String::new();
    if m.is_drop() {
        if !other_sources(pos, m, pt).is_empty() {
            suffix.push('打');
        }
    } else {
        suffix.push_str(&disambiguation(c, pt, m.from(), m.to(), &other_sources(pos, m, pt)));
        if m.is_promotion() {
            suffix.push('成');
        } else if promotion_possible(pos, m) {
            suffix.push_str("不成");
        }
    }
    let mut s = String::new();
    if previous_to == Some(m.to()) {
        s.push('同');
        // A full-width space keeps `同　歩` three characters wide; longer texts need none.
        if name.chars().count() == 1 && suffix.is_empty() {
            s.push('　');
        }
    } else {
        s.push_str(&japanese_square(m.to()));
    }
    s.push_str(name);
    s.push_str(&suffix);
    s
}

/// [`japanese`] with the mover's mark: `▲７六歩` for Black, `△３四歩` for White.
pub fn japanese_with_mark(pos: &Position, m: Move, previous_to: Option<Square>) -> String {
    let mark = if pos.side_to_move() == Color::Black { '▲' } else { '△' };
    format!("{mark}{}", japanese(pos, m, previous_to))
}

/// Reads a destination written `７六`, `76` or `7六`.
pub(crate) fn strip_square(s: &str) -> Option<(Square, &str)> {
    let mut it = s.char_indices();
    let (_, f) = it.next()?;
    let (ri, r) = it.next()?;
    let file = FILE_DIGITS
        .iter()
        .position(|&d| d == f)
        .or_else(|| f.to_digit(10).filter(|d| (1..=9).contains(d)).map(|d| d as usize - 1))?;
    let rank = RANK_KANJI
        .iter()
        .position(|&d| d == r)
        .or_else(|| r.to_digit(10).filter(|d| (1..=9).contains(d)).map(|d| d as usize - 1))?;
    let sq = Square::new(file as u8, rank as u8)?;
    Some((sq, &s[ri + r.len_utf8()..]))
}

/// Reads one move in Japanese (KI2) notation, with or without ▲△☗☖, such as `７六歩`, `同　歩`,
/// `５二金直`, `２二角成`, `５五角打`, and returns the legal move it names. `previous_to` is the
/// previous move's destination (for 同). Each word narrows the pieces that can legally move
/// there; extra words are accepted (`５二金左上` where `５二金左` is enough), and so is a side
/// word alone for the piece on that side that does not move up, when the other one does
/// (`４八金左` for `４八金左寄`, as cshogi and rsshogi write it).
pub fn parse_japanese(pos: &Position, text: &str, previous_to: Option<Square>) -> Result<Move, String> {
    let s = text.trim();
    let s = s.trim_start_matches(['▲', '△', '☗', '☖', '▽', '▼']);
    let (to, rest) = if let Some(rest) = s.strip_prefix('同') {
        let to = previous_to.ok_or("同 but there is no previous move")?;
        (to, rest.trim_start_matches(['　', ' ']))
    } else {
        strip_square(s).ok_or("expected a destination such as ７六 or 同")?
    };
    let (pt, mut rest) = strip_piece_name(rest).ok_or("expected a piece name")?;
    let mut words: Vec<&str> = Vec::new();
    while !rest.is_empty() {
        let w = ["不成", "左", "右", "直", "上", "寄", "引", "行", "入", "打", "成", "生"]
            .into_iter()
            .find(|w| rest.starts_with(w));
        match w {
            Some(w) => {
                words.push(w);
                rest = &rest[w.len()..];
            }
            None => return Err(format!("unexpected {rest:?}")),
        }
    }
    let has = |w: &str| words.contains(&w);
    let c = pos.side_to_move();
    let legal = pos.legal_moves();
    let drop = legal.as_slice().iter().copied().find(|m| m.to() == to && m.drop_piece_type() == Some(pt));
    let board: Vec<Move> = legal
        .as_slice()
        .iter()
        .copied()
        .filter(|m| !m.is_drop() && m.to() == to && pos.piece_at(m.from()).map(|p| p.piece_type()) == Some(pt))
        .collect();
    if has("打") || (board.is_empty() && drop.is_some()) {
        return drop.ok_or_else(|| "no legal drop of that piece there".to_string());
    }
    let promote = has("成");
    let mut cands: Vec<Move> = board
        .iter()
        .copied()
        .filter(|m| {
            if promote {
                m.is_promotion()
            } else if has("不成") || has("生") {
                !m.is_promotion()
            } else {
                // No word: not a promotion, unless promotion is forced.
                !m.is_promotion() || !board.iter().any(|o| o.from() == m.from() && !o.is_promotion())
            }
        })
        .collect();
    let sources: Vec<Square> = {
        let mut v: Vec<Square> = board.iter().map(|m| m.from()).collect();
        v.dedup();
        v
    };
    let mot = |from: Square| motion(c, from, to);
    cands.retain(|m| {
        let f = m.from();
        let others: Vec<Square> = sources.iter().copied().filter(|&o| o != f).collect();
        words.iter().all(|&w| match w {
            "上" | "行" | "入" => mot(f) == Motion::Up,
            "寄" => mot(f) == Motion::Sideways,
            "引" => mot(f) == Motion::Back,
            "直" => side_word(c, f, to) == Some("直"),
            "左" | "右" => {
                if matches!(pt, PieceType::Dragon | PieceType::Horse) {
                    let motion_words = words.iter().any(|w| ["上", "寄", "引"].contains(w));
                    let pool: Vec<Square> = if motion_words {
                        others.iter().copied().filter(|&o| mot(o) == mot(f)).collect()
                    } else {
                        others.clone()
                    };
                    relative_side_word(c, f, &pool) == Some(w) || pool.is_empty()
                } else {
                    side_word(c, f, to) == Some(w)
                }
            }
            _ => true,
        })
    });
    // A side word (左/右) without a motion word that fits two pieces: cshogi and rsshogi write
    // the side word alone for the piece that does not move up when the other one on that side
    // does (golds on 5h, 3h and 5i, 5h to 4h: `４八金左`, where the JSA rules give `４八金左寄` as
    // 5i is on the left too). Neither writes a piece moving up (上) without 上 when another
    // piece on its side can move there, nor a piece whose motion alone tells it apart without
    // that motion, so those are not the one meant.
    let motion_word = words.iter().any(|w| ["上", "寄", "引", "行", "入"].contains(w));
    if cands.len() > 1 && !motion_word && (has("左") || has("右")) {
        let own_motion = |f: Square| sources.iter().all(|&o| o == f || mot(o) != mot(f));
        let rest: Vec<Move> =
            cands.iter().copied().filter(|m| mot(m.from()) != Motion::Up && !own_motion(m.from())).collect();
        if rest.len() == 1 {
            cands = rest;
        }
    }
    match cands.as_slice() {
        [m] => Ok(*m),
        [] => Err(format!("no legal move matches {text:?}")),
        _ => Err(format!("{text:?} is ambiguous")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(pos: &Position, usi: &str) -> Move {
        let m = Move::from_usi(usi).unwrap();
        assert!(pos.is_legal(m), "{usi} illegal in {}", pos.to_sfen());
        m
    }

    #[test]
    fn startpos_moves() {
        let pos = Position::startpos();
        let m = mv(&pos, "7g7f");
        assert_eq!(western(&pos, m), "P-76");
        assert_eq!(vietnamese(&pos, m), "T-76");
        assert_eq!(japanese(&pos, m, None), "７六歩");
        assert_eq!(japanese_with_mark(&pos, m, None), "▲７六歩");
        // Two golds can reach 5h: 6i (left) and 4i (right).
        assert_eq!(japanese(&pos, mv(&pos, "6i5h"), None), "５八金左");
        assert_eq!(japanese(&pos, mv(&pos, "4i5h"), None), "５八金右");
        assert_eq!(western(&pos, mv(&pos, "6i5h")), "G69-58");
        assert_eq!(vietnamese(&pos, mv(&pos, "4i5h")), "Vg(49)-58");
        assert_eq!(japanese(&pos, mv(&pos, "7i7h"), None), "７八銀");
    }

    #[test]
    fn hodges_and_vietnamese_names() {
        let pos = Position::startpos();
        assert_eq!(hodges(&pos, mv(&pos, "7g7f")), "P-7f");
        assert_eq!(hodges(&pos, mv(&pos, "6i5h")), "G6i-5h");
        assert_eq!(vietnamese_names(&pos, mv(&pos, "7g7f")), "Tốt-76");
        assert_eq!(vietnamese_names(&pos, mv(&pos, "4i5h")), "Vàng(49)-58");
        // Capture with promotion, declined promotion, drop, promoted piece.
        let pos = Position::from_sfen("4k4/6S2/9/9/9/9/9/1B5+R1/4K4 b P 1").unwrap();
        assert_eq!(hodges(&pos, mv(&pos, "8h3c+")), "B-3c+");
        assert_eq!(hodges(&pos, mv(&pos, "3b2a")), "S-2a=");
        assert_eq!(hodges(&pos, mv(&pos, "P*5e")), "P*5e");
        assert_eq!(hodges(&pos, mv(&pos, "2h2a")), "+R-2a");
        assert_eq!(vietnamese_names(&pos, mv(&pos, "2h2a")), "+Xe-21");
        assert_eq!(vietnamese_names(&pos, mv(&pos, "P*5e")), "Tốt*55");
        let names: Vec<&str> = PieceType::ALL.iter().map(|&pt| vietnamese_piece_name(pt)).collect();
        for want in [
            "Vua",
            "Xe",
            "Tượng",
            "Vàng",
            "Bạc",
            "Mã",
            "Thương",
            "Tốt",
            "+Xe",
            "+Tượng",
            "+Bạc",
            "+Mã",
            "+Thương",
            "+Tốt",
        ] {
            assert!(names.contains(&want), "{want}");
        }
    }

    #[test]
    fn numbered_move_pairs() {
        let start = Position::startpos();
        let moves: Vec<Move> = ["7g7f", "3c3d", "8h2b+"].iter().map(|u| Move::from_usi(u).unwrap()).collect();
        assert_eq!(numbered_moves(&start, &moves, hodges), "1. P-7f P-3d\n2. Bx2b+\n");
        // White moves first in a handicap game: the first move is skipped with `...`.
        let start = Position::from_sfen(crate::Handicap::TwoPiece.sfen()).unwrap();
        let moves: Vec<Move> = ["3c3d", "7g7f", "4a3b"].iter().map(|u| Move::from_usi(u).unwrap()).collect();
        assert_eq!(numbered_moves(&start, &moves, hodges), "1. ... P-3d\n2. P-7f G-3b\n");
        assert_eq!(numbered_moves(&start, &[], hodges), "");
    }

    #[test]
    fn golds_straight_and_sides() {
        // Black golds on 6c, 5c, 4c all reach 5b.
        let pos = Position::from_sfen("4k4/9/3GGG3/9/9/9/9/9/4K4 b - 1").unwrap();
        assert_eq!(japanese(&pos, mv(&pos, "6c5b"), None), "５二金左");
        assert_eq!(japanese(&pos, mv(&pos, "5c5b"), None), "５二金直");
        assert_eq!(japanese(&pos, mv(&pos, "4c5b"), None), "５二金右");
        // White sees left and right mirrored: golds on 6g, 5g, 4g reaching 5h.
        let pos = Position::from_sfen("4k4/9/9/9/9/9/3ggg3/9/K8 w - 1").unwrap();
        assert_eq!(japanese(&pos, mv(&pos, "6g5h"), None), "５八金右");
        assert_eq!(japanese(&pos, mv(&pos, "5g5h"), None), "５八金直");
        assert_eq!(japanese(&pos, mv(&pos, "4g5h"), None), "５八金左");
    }

    #[test]
    fn motion_then_position_then_both() {
        // Golds on 6b (寄 to 5b), 6c (上, left), 4c (上, right).
        let pos = Position::from_sfen("8k/3G5/3G1G3/9/9/9/9/9/K8 b - 1").unwrap();
        assert_eq!(japanese(&pos, mv(&pos, "6b5b"), None), "５二金寄");
        assert_eq!(japanese(&pos, mv(&pos, "6c5b"), None), "５二金左上");
        assert_eq!(japanese(&pos, mv(&pos, "4c5b"), None), "５二金右");
        for u in ["6b5b", "6c5b", "4c5b"] {
            let m = mv(&pos, u);
            assert_eq!(parse_japanese(&pos, &japanese(&pos, m, None), None), Ok(m));
        }
    }

    #[test]
    fn side_and_motion_when_each_alone_names_two() {
        // Golds on 5h (寄, left), 3h (寄, right) and 5i (上, left) all reach 4h. 5h shares its
        // motion with 3h and its side with 5i: the JSA rules give both words, 左寄. cshogi and
        // rsshogi write `４八金左`, which koma reads too (5i would be written `４八金上`).
        let pos = Position::from_sfen("4k4/9/9/9/9/9/9/4G1G2/K3G4 b - 1").unwrap();
        let (g5h, g3h, g5i) = (mv(&pos, "5h4h"), mv(&pos, "3h4h"), mv(&pos, "5i4h"));
        assert_eq!(japanese(&pos, g5h, None), "４八金左寄");
        assert_eq!(japanese(&pos, g3h, None), "４八金右");
        assert_eq!(japanese(&pos, g5i, None), "４八金上");
        for (text, m) in [
            ("▲４八金左寄", g5h),
            ("▲４八金左", g5h),
            ("▲４八金右", g3h),
            ("▲４八金右寄", g3h),
            ("▲４八金上", g5i),
            ("▲４八金左上", g5i),
        ] {
            assert_eq!(parse_japanese(&pos, text, None), Ok(m), "{text}");
        }
        // Words that fit no piece, or several, stay errors.
        for text in ["▲４八金寄", "▲４八金", "▲４八金右上", "▲４八金直", "▲４八金引"] {
            assert!(parse_japanese(&pos, text, None).is_err(), "{text}");
        }
        // White, the same golds turned round (5b, 7b, 5a reaching 6b): left is towards file 1.
        let pos = Position::from_sfen("k3g4/2g1g4/9/9/9/9/9/9/4K4 w - 1").unwrap();
        let (g5b, g7b, g5a) = (mv(&pos, "5b6b"), mv(&pos, "7b6b"), mv(&pos, "5a6b"));
        assert_eq!(japanese(&pos, g5b, None), "６二金左寄");
        assert_eq!(japanese(&pos, g7b, None), "６二金右");
        assert_eq!(japanese(&pos, g5a, None), "６二金上");
        assert_eq!(parse_japanese(&pos, "△６二金左", None), Ok(g5b));
        assert_eq!(parse_japanese(&pos, "△６二金左寄", None), Ok(g5b));
        // The same with the motions swapped: golds on 6e (寄), 6f (上, left) and 5f (直) reaching
        // 5e; 6f is `５五金左上` for every writer, and `５五金左`, which none writes, stays
        // ambiguous (6e is `５五金寄`).
        let pos = Position::from_sfen("4k4/9/9/9/3G5/3GG4/9/9/K8 b - 1").unwrap();
        let (g6e, g6f, g5f) = (mv(&pos, "6e5e"), mv(&pos, "6f5e"), mv(&pos, "5f5e"));
        assert_eq!(japanese(&pos, g6e, None), "５五金寄");
        assert_eq!(japanese(&pos, g6f, None), "５五金左上");
        assert_eq!(japanese(&pos, g5f, None), "５五金直");
        assert!(parse_japanese(&pos, "▲５五金左", None).is_err());
        assert_eq!(parse_japanese(&pos, "▲５五金左上", None), Ok(g6f));
        assert_eq!(parse_japanese(&pos, "▲５五金左寄", None), Ok(g6e));
        // White tokins on 5c (直), 4c (上, left), 6d (寄, right) and 4d (寄, left) reaching 5d:
        // 4d is `５四と左寄`; rsshogi writes `５四と左` (cshogi `５四と左寄`), read as 4d too.
        let pos = Position::from_sfen("9/2+p1+p3k/4+p+p3/3+p1+p3/9/9/3K5/9/9 w - 1").unwrap();
        let (t4d, t4c) = (mv(&pos, "4d5d"), mv(&pos, "4c5d"));
        assert_eq!(japanese(&pos, t4d, None), "５四と左寄");
        assert_eq!(japanese(&pos, t4c, None), "５四と左上");
        assert_eq!(parse_japanese(&pos, "△５四と左", None), Ok(t4d));
        assert_eq!(parse_japanese(&pos, "△５四と左上", None), Ok(t4c));
        // Silvers on 6d (引, left), 4d (引, right) and 6f (上, left) reaching 5e: 6d is `５五銀左引`,
        // and `５五銀左` (cshogi's) reads as 6d.
        let pos = Position::from_sfen("4k4/9/9/3S1S3/9/3S5/9/9/K8 b - 1").unwrap();
        let s6d = mv(&pos, "6d5e");
        assert_eq!(japanese(&pos, s6d, None), "５五銀左引");
        assert_eq!(japanese(&pos, mv(&pos, "6f5e"), None), "５五銀上");
        assert_eq!(parse_japanese(&pos, "▲５五銀左", None), Ok(s6d));
        // Tokins on 9f, 7f and 9g reaching 8f: the same shape with promoted pawns, to the right.
        let pos = Position::from_sfen("4k4/9/9/9/9/+P1+P6/+P8/9/4K4 b - 1").unwrap();
        let (t9f, t7f, t9g) = (mv(&pos, "9f8f"), mv(&pos, "7f8f"), mv(&pos, "9g8f"));
        assert_eq!(japanese(&pos, t9f, None), "８六と左寄");
        assert_eq!(japanese(&pos, t7f, None), "８六と右");
        assert_eq!(japanese(&pos, t9g, None), "８六と上");
        assert_eq!(parse_japanese(&pos, "▲８六と左", None), Ok(t9f));
        // Four golds (5h, 3h 寄; 5i, 3i 上): every move needs both words. rsshogi writes 5h-4h
        // `４八金左` and 3h-4h `４八金右` (cshogi `左寄`, `右寄`); those read as the golds moving
        // sideways, while `寄` or `上` alone fit two golds.
        let pos = Position::from_sfen("4k4/9/9/9/9/9/9/4G1G2/K3G1G2 b - 1").unwrap();
        assert_eq!(japanese(&pos, mv(&pos, "5h4h"), None), "４八金左寄");
        assert_eq!(japanese(&pos, mv(&pos, "3i4h"), None), "４八金右上");
        assert_eq!(parse_japanese(&pos, "▲４八金左", None), Ok(mv(&pos, "5h4h")));
        assert_eq!(parse_japanese(&pos, "▲４八金右", None), Ok(mv(&pos, "3h4h")));
        assert!(parse_japanese(&pos, "▲４八金寄", None).is_err());
        assert!(parse_japanese(&pos, "▲４八金上", None).is_err());
    }

    #[test]
    fn dragons_relative_to_each_other() {
        // Dragons on 1c and 2b both reach 2d by moving back (引): 1c is the right one.
        let pos = Position::from_sfen("k8/7+R1/8+R/9/9/9/9/9/K8 b - 1").unwrap();
        assert_eq!(japanese(&pos, mv(&pos, "1c2d"), None), "２四龍右");
        assert_eq!(japanese(&pos, mv(&pos, "2b2d"), None), "２四龍左");
    }

    #[test]
    fn drops_promotions_and_same() {
        // A silver in hand and a silver on 4i that can reach 5h: the drop needs 打.
        let pos = Position::from_sfen("4k4/9/9/9/9/9/9/9/4KS3 b S 1").unwrap();
        assert_eq!(japanese(&pos, mv(&pos, "S*5h"), None), "５八銀打");
        assert_eq!(japanese(&pos, mv(&pos, "S*5e"), None), "５五銀");
        assert_eq!(western(&pos, mv(&pos, "S*5h")), "S*58");
        let pos = Position::from_sfen("4k4/9/3S5/9/9/9/9/9/4K4 b - 1").unwrap();
        assert_eq!(japanese(&pos, mv(&pos, "6c6b+"), None), "６二銀成");
        assert_eq!(japanese(&pos, mv(&pos, "6c6b"), None), "６二銀不成");
        assert_eq!(western(&pos, mv(&pos, "6c6b")), "S-62=");
        assert_eq!(western(&pos, mv(&pos, "6c6b+")), "S-62+");
        let pos = Position::from_sfen("lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL b - 3").unwrap();
        let m = mv(&pos, "8h2b+");
        assert_eq!(western(&pos, m), "Bx22+");
        assert_eq!(vietnamese(&pos, m), "Tgx22+");
        let mut after = pos.clone();
        after.do_move(m);
        let r = mv(&after, "3a2b");
        assert_eq!(japanese(&after, r, Some(m.to())), "同　銀");
        assert_eq!(parse_japanese(&after, "△同　銀", Some(m.to())), Ok(r));
        assert_eq!(parse_japanese(&after, "△同銀", Some(m.to())), Ok(r));
        // With a suffix there is no padding space: 同角成, 同角不成.
        let pos = Position::from_sfen("4k4/6s2/9/9/4B4/9/9/9/4K4 w - 1").unwrap();
        let mut after = pos.clone();
        let p = mv(&pos, "3b3c");
        after.do_move(p);
        assert_eq!(japanese(&after, mv(&after, "5e3c+"), Some(p.to())), "同角成");
        assert_eq!(japanese(&after, mv(&after, "5e3c"), Some(p.to())), "同角不成");
        assert_eq!(parse_japanese(&after, "▲同　角成", Some(p.to())), Ok(mv(&after, "5e3c+")));
    }

    #[test]
    fn knights_and_promoted_names() {
        let pos = Position::from_sfen("4k4/9/9/9/3N1N3/9/9/9/4K4 b - 1").unwrap();
        assert_eq!(western(&pos, mv(&pos, "6e5c+")), "N65-53+");
        assert_eq!(vietnamese(&pos, mv(&pos, "6e5c+")), "M(65)-53+");
        assert_eq!(japanese(&pos, mv(&pos, "6e5c+"), None), "５三桂左成");
        assert_eq!(japanese(&pos, mv(&pos, "4e5c"), None), "５三桂右不成");
        let pos = Position::from_sfen("4k4/9/9/9/9/9/9/9/4K+S3 b - 1").unwrap();
        assert_eq!(japanese(&pos, mv(&pos, "4i4h"), None), "４八成銀");
        assert_eq!(western(&pos, mv(&pos, "4i4h")), "+S-48");
        assert_eq!(vietnamese(&pos, mv(&pos, "4i4h")), "+B-48");
    }
}
