//! dlshogi's training records: `HuffmanCodedPos` (32 bytes, the position format of Apery and
//! dlshogi) and the 38-byte `hcpe` record built on it, with the 16-bit move code they use.
//!
//! Written from the format description and checked bit for bit against cshogi's `to_hcp` /
//! `set_hcp` (python/tests/test_data_import.py); no code of those GPL programs is used.
//!
//! ## HuffmanCodedPos
//! A 256-bit stream, least significant bit of byte 0 first:
//! 1. side to move: 1 bit (0 Black, 1 White);
//! 2. Black's king square, White's king square: 7 bits each (square `(file − 1)·9 + rank − 1`);
//! 3. every other square in index order: `0` when empty, else a code (below), colour `c`
//!    (0 Black, 1 White) and, for kinds that promote, the promotion bit `p`;
//! 4. the 38 non-king pieces not on the board: Black's hand, White's hand, then the pieces in
//!    neither (the "box", e.g. those a handicap removes), each kind in the order pawn, lance,
//!    knight, silver, gold, bishop, rook.
//!
//! The codes, bits in stream order:
//!
//! | kind | on the board | in hand | in the box |
//! | --- | --- | --- | --- |
//! | pawn | `1 0 c p` | `0 0 c` | `0 1 0` |
//! | lance | `1 100 c p` | `100 0 c` | `100 1 0` |
//! | knight | `1 110 c p` | `110 0 c` | `110 1 0` |
//! | silver | `1 101 c p` | `101 0 c` | `101 1 0` |
//! | gold | `1 1110 c` | `1110 c` | `101 1 1` |
//! | bishop | `1 11110 c p` | `11111 0 c` | `1111 0 0 0` |
//! | rook | `1 11111 c p` | `11111 1 c` | `1111 0 1 0` |
//!
//! Every piece of a full set costs the same number of bits wherever it is, so a position with all
//! 40 pieces (kings included) fills exactly 256 bits. Positions with more pieces than a set cannot
//! be encoded.
//!
//! ## hcpe record (38 bytes, little-endian)
//! `hcp` (32 bytes), `eval` (i16, centipawns from the side to move), `bestMove16` (u16),
//! `gameResult` (u8: 0 draw, 1 Black won, 2 White won), one padding byte.
//!
//! ## move16
//! Bits 0–6 destination square, bits 7–13 origin square, or `80 + kind` for drops (pawn 81, lance
//! 82, knight 83, silver 84, bishop 85, rook 86, gold 87), bit 14 promotion; 0 is no move.

use koma_shogi::{Color, Hand, Move, Piece, PieceType, Position, Square};
use thiserror::Error;

pub const HCP_BYTES: usize = 32;
pub const HCPE_BYTES: usize = 38;
/// dlshogi's scale between centipawns and win probability: `value = 1 / (1 + exp(−eval / a))`.
pub const DLSHOGI_EVAL_SCALE: f64 = 756.0864962951762;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HcpError {
    #[error("not a valid HuffmanCodedPos: {0}")]
    Corrupt(String),
    #[error("cannot encode as HuffmanCodedPos: {0}")]
    Unencodable(String),
}

/// Pieces of each kind (indexed by `PieceType as usize`, pawn 1 … gold 7) in a full set.
const FULL_SET: [u32; 8] = [0, 18, 4, 4, 4, 2, 2, 4];
/// The order hand and box pieces are written in.
const HAND_ORDER: [PieceType; 7] = [
    PieceType::Pawn,
    PieceType::Lance,
    PieceType::Knight,
    PieceType::Silver,
    PieceType::Gold,
    PieceType::Bishop,
    PieceType::Rook,
];

struct Bits<'a> {
    bytes: &'a [u8; HCP_BYTES],
    pos: usize,
}

impl Bits<'_> {
    fn bit(&mut self) -> Result<u32, HcpError> {
        if self.pos >= HCP_BYTES * 8 {
            return Err(HcpError::Corrupt("the bit stream ends inside a piece".into()));
        }
        let b = (self.bytes[self.pos / 8] >> (self.pos % 8)) & 1;
        self.pos += 1;
        Ok(b as u32)
    }

    fn bits(&mut self, n: usize) -> Result<u32, HcpError> {
        let mut v = 0;
        for i in 0..n {
            v |= self.bit()? << i;
        }
        Ok(v)
    }
}

/// The kind code shared by board and hand codes for pawn … gold: pawn `0`, lance `100`, knight
/// `110`, silver `101`, gold `1110`; `None` after `1111` (bishop or rook, which differ).
fn read_kind(r: &mut Bits) -> Result<Option<PieceType>, HcpError> {
    if r.bit()? == 0 {
        return Ok(Some(PieceType::Pawn));
    }
    Ok(match (r.bit()?, r.bit()?) {
        (0, 0) => Some(PieceType::Lance),
        (1, 0) => Some(PieceType::Knight),
        (0, 1) => Some(PieceType::Silver),
        _ => {
            if r.bit()? == 0 {
                Some(PieceType::Gold)
            } else {
                None
            }
        }
    })
}

fn color_of(bit: u32) -> Color {
    if bit == 0 {
        Color::Black
    } else {
        Color::White
    }
}

/// Decodes a HuffmanCodedPos into a validated position (move number 1).
pub fn decode_hcp(bytes: &[u8; HCP_BYTES]) -> Result<Position, HcpError> {
    let corrupt = |m: String| HcpError::Corrupt(m);
    let mut r = Bits { bytes, pos: 0 };
    let side = color_of(r.bit()?);
    let mut board: [Option<Piece>; 81] = [None; 81];
    let kings = [r.bits(7)? as usize, r.bits(7)? as usize];
    for (color, &sq) in Color::ALL.iter().zip(&kings) {
        if sq >= 81 {
            return Err(corrupt(format!("{color:?} king on square {sq}")));
        }
        if board[sq].is_some() {
            return Err(corrupt(format!("both kings on square {sq}")));
        }
        board[sq] = Some(Piece::new(*color, PieceType::King));
    }
    let mut seen = [0u32; 8];
    for (sq, cell) in board.iter_mut().enumerate() {
        if kings.contains(&sq) || r.bit()? == 0 {
            continue;
        }
        let kind = match read_kind(&mut r)? {
            Some(k) => k,
            None => {
                if r.bit()? == 0 {
                    PieceType::Bishop
                } else {
                    PieceType::Rook
                }
            }
        };
        let color = color_of(r.bit()?);
        let promoted = kind != PieceType::Gold && r.bit()? == 1;
        seen[kind as usize] += 1;
        *cell = Some(Piece::new(color, if promoted { kind.promote() } else { kind }));
    }
    let mut hands = [Hand::EMPTY; 2];
    let mut hand_count = [[0u32; 8]; 2];
    while r.pos < HCP_BYTES * 8 {
        let at = r.pos;
        // (kind, Some(colour) for a hand piece, None for the box)
        let (kind, owner) = match read_kind(&mut r)? {
            Some(PieceType::Gold) => (PieceType::Gold, Some(color_of(r.bit()?))),
            Some(kind) => match (r.bit()?, r.bit()?) {
                (0, c) => (kind, Some(color_of(c))),
                (1, 0) => (kind, None),
                (1, 1) if kind == PieceType::Silver => (PieceType::Gold, None),
                _ => return Err(corrupt(format!("invalid hand code at bit {at}"))),
            },
            None => match (r.bit()?, r.bit()?, r.bit()?) {
                (1, br, c) => (if br == 0 { PieceType::Bishop } else { PieceType::Rook }, Some(color_of(c))),
                (0, br, 0) => (if br == 0 { PieceType::Bishop } else { PieceType::Rook }, None),
                _ => return Err(corrupt(format!("invalid hand code at bit {at}"))),
            },
        };
        seen[kind as usize] += 1;
        if let Some(c) = owner {
            hand_count[c.index()][kind as usize] += 1;
        }
    }
    for pt in HAND_ORDER {
        if seen[pt as usize] != FULL_SET[pt as usize] {
            return Err(corrupt(format!(
                "{} {pt:?} pieces where a set has {}",
                seen[pt as usize], FULL_SET[pt as usize]
            )));
        }
        for c in Color::ALL {
            hands[c.index()].set(pt, hand_count[c.index()][pt as usize]);
        }
    }
    Position::from_board(board, hands, side, 1).map_err(|e| corrupt(format!("illegal position: {e}")))
}

struct Writer {
    bytes: [u8; HCP_BYTES],
    pos: usize,
}

impl Writer {
    /// Appends `bits` (a string of '0'/'1' in stream order) — only used with the short constant
    /// codes below.
    fn push(&mut self, bits: &str) -> bool {
        for b in bits.bytes() {
            if self.pos >= HCP_BYTES * 8 {
                return false;
            }
            if b == b'1' {
                self.bytes[self.pos / 8] |= 1 << (self.pos % 8);
            }
            self.pos += 1;
        }
        true
    }

    fn push_bit(&mut self, bit: bool) -> bool {
        self.push(if bit { "1" } else { "0" })
    }

    fn push_value(&mut self, v: u32, n: usize) -> bool {
        (0..n).all(|i| self.push_bit((v >> i) & 1 == 1))
    }
}

/// Board code of a kind without colour and promotion bits (leading occupancy bit included).
fn board_code(kind: PieceType) -> &'static str {
    match kind {
        PieceType::Pawn => "10",
        PieceType::Lance => "1100",
        PieceType::Knight => "1110",
        PieceType::Silver => "1101",
        PieceType::Gold => "11110",
        PieceType::Bishop => "111110",
        _ => "111111",
    }
}

/// Hand code of a kind without the colour bit.
fn hand_code(kind: PieceType) -> &'static str {
    match kind {
        PieceType::Pawn => "00",
        PieceType::Lance => "1000",
        PieceType::Knight => "1100",
        PieceType::Silver => "1010",
        PieceType::Gold => "1110",
        PieceType::Bishop => "111110",
        _ => "111111",
    }
}

fn box_code(kind: PieceType) -> &'static str {
    match kind {
        PieceType::Pawn => "010",
        PieceType::Lance => "10010",
        PieceType::Knight => "11010",
        PieceType::Silver => "10110",
        PieceType::Gold => "10111",
        PieceType::Bishop => "1111000",
        _ => "1111010",
    }
}

/// Encodes a position as HuffmanCodedPos. Fails for positions with more pieces of a kind than
/// a shogi set has.
pub fn encode_hcp(pos: &Position) -> Result<[u8; HCP_BYTES], HcpError> {
    let mut w = Writer { bytes: [0; HCP_BYTES], pos: 0 };
    let mut used = [0u32; 8];
    w.push_bit(pos.side_to_move() == Color::White);
    let kings = [pos.king_square(Color::Black), pos.king_square(Color::White)];
    w.push_value(kings[0].index() as u32, 7);
    w.push_value(kings[1].index() as u32, 7);
    let too_many = || HcpError::Unencodable(format!("more pieces than a shogi set: {}", pos.to_sfen()));
    for sq in Square::all() {
        if kings.contains(&sq) {
            continue;
        }
        let ok = match pos.piece_at(sq) {
            None => w.push("0"),
            Some(p) => {
                let pt = p.piece_type();
                let kind = pt.unpromote();
                used[kind as usize] += 1;
                w.push(board_code(kind))
                    && w.push_bit(p.color() == Color::White)
                    && (kind == PieceType::Gold || w.push_bit(pt.is_promoted()))
            }
        };
        if !ok {
            return Err(too_many());
        }
    }
    for color in Color::ALL {
        let hand = pos.hand(color);
        for kind in HAND_ORDER {
            for _ in 0..hand.count(kind) {
                used[kind as usize] += 1;
                if !(w.push(hand_code(kind)) && w.push_bit(color == Color::White)) {
                    return Err(too_many());
                }
            }
        }
    }
    for kind in HAND_ORDER {
        let (n, full) = (used[kind as usize], FULL_SET[kind as usize]);
        if n > full {
            return Err(too_many());
        }
        for _ in n..full {
            if !w.push(box_code(kind)) {
                return Err(too_many());
            }
        }
    }
    debug_assert_eq!(w.pos, HCP_BYTES * 8);
    Ok(w.bytes)
}

/// The koma move of a move16 code (`None` for 0 and codes no move has). Legality is the caller's.
pub fn move_from_move16(code: u16) -> Option<Move> {
    if code == 0 {
        return None;
    }
    let to = Square::from_index((code & 0x7f) as u8)?;
    let from = ((code >> 7) & 0x7f) as u8;
    let promote = code & (1 << 14) != 0;
    if code & (1 << 15) != 0 {
        return None;
    }
    if from >= 81 {
        let pt = PieceType::from_u8(from - 80).filter(|pt| PieceType::HAND.contains(pt))?;
        if promote {
            return None;
        }
        return Some(Move::drop(pt, to));
    }
    let from = Square::from_index(from)?;
    (from != to).then(|| Move::board(from, to, promote))
}

/// The move16 code of a move.
pub fn move_to_move16(m: Move) -> u16 {
    let to = m.to().index() as u16;
    match m.drop_piece_type() {
        Some(pt) => to | ((80 + pt as u16) << 7),
        None => to | ((m.from().index() as u16) << 7) | if m.is_promotion() { 1 << 14 } else { 0 },
    }
}

/// One 38-byte hcpe record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HcpeRecord {
    pub hcp: [u8; HCP_BYTES],
    /// Centipawns from the side to move.
    pub eval: i16,
    pub best_move16: u16,
    /// 0 draw, 1 Black won, 2 White won.
    pub game_result: u8,
    pub dummy: u8,
}

impl HcpeRecord {
    pub fn from_bytes(b: &[u8; HCPE_BYTES]) -> HcpeRecord {
        let mut hcp = [0u8; HCP_BYTES];
        hcp.copy_from_slice(&b[..HCP_BYTES]);
        HcpeRecord {
            hcp,
            eval: i16::from_le_bytes([b[32], b[33]]),
            best_move16: u16::from_le_bytes([b[34], b[35]]),
            game_result: b[36],
            dummy: b[37],
        }
    }

    pub fn to_bytes(&self) -> [u8; HCPE_BYTES] {
        let mut b = [0u8; HCPE_BYTES];
        b[..HCP_BYTES].copy_from_slice(&self.hcp);
        b[32..34].copy_from_slice(&self.eval.to_le_bytes());
        b[34..36].copy_from_slice(&self.best_move16.to_le_bytes());
        b[36] = self.game_result;
        b[37] = self.dummy;
        b
    }

    /// The winner (`gameResult` 1 Black, 2 White, 0 none); `Err` for other values.
    pub fn winner(&self) -> Result<Option<Color>, u8> {
        match self.game_result {
            0 => Ok(None),
            1 => Ok(Some(Color::Black)),
            2 => Ok(Some(Color::White)),
            other => Err(other),
        }
    }
}

/// `gameResult` of a winner.
pub fn game_result_code(winner: Option<Color>) -> u8 {
    match winner {
        None => 0,
        Some(Color::Black) => 1,
        Some(Color::White) => 2,
    }
}

/// The win/draw/loss estimate an evaluation stands for: win = sigmoid(eval / scale),
/// loss = sigmoid(−eval / scale) (each computed directly so that the tails keep their
/// precision), draw 0.
pub fn eval_to_wdl(eval: f64, scale: f64) -> [f32; 3] {
    let x = eval / scale;
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    [sigmoid(x) as f32, 0.0, sigmoid(-x) as f32]
}

/// The evaluation (centipawns) a W/D/L estimate stands for, counting a draw as half a win:
/// `scale · ln((w + d/2) / (l + d/2))`, clamped to the i16 range; `None` when all three are 0 or
/// the estimate is not finite.
pub fn wdl_to_eval(wdl: [f32; 3], scale: f64) -> Option<i16> {
    let [w, d, l] = wdl.map(|x| x as f64);
    if !(w.is_finite() && d.is_finite() && l.is_finite()) || w + d + l <= 0.0 {
        return None;
    }
    let (win, loss) = (w + d / 2.0, l + d / 2.0);
    let eval = if loss <= 0.0 {
        f64::INFINITY
    } else if win <= 0.0 {
        f64::NEG_INFINITY
    } else {
        scale * (win.ln() - loss.ln())
    };
    Some(eval.round().clamp(-(i16::MAX as f64), i16::MAX as f64) as i16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use koma_shogi::Handicap;

    #[test]
    fn bits_match_cshogi_test_vectors() {
        // cshogi's `Board(sfen).to_hcp()` of these positions (more in python/tests/test_data_import.py).
        let vectors = [
            (
                "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
                "58a449210cd757217e8e4d212caf427814c2ab109e4d212cd75f213e8e49210c",
            ),
            (
                "lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
                "59a449210c9742fc1c9b42585e85f0288457213c9b4258aebf427c1c9342181e",
            ),
            (
                "4k4/9/9/9/9/9/9/9/4K4 w RB2G2S2N2L9Prb2g2s2n2l9p 1",
                "5924000000000000000000000000004218a394733e3f922449c63867adf77eff",
            ),
        ];
        for (sfen, hex) in vectors {
            let pos = Position::from_sfen(sfen).unwrap();
            let bytes = encode_hcp(&pos).unwrap();
            let ours: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(ours, hex, "{sfen}");
            assert_eq!(decode_hcp(&bytes).unwrap().to_sfen(), pos.to_sfen());
        }
    }

    #[test]
    fn round_trips_handicaps_hands_and_random_games() {
        for h in Handicap::ALL {
            let pos = h.position();
            let back = decode_hcp(&encode_hcp(&pos).unwrap()).unwrap();
            assert_eq!(back.to_sfen(), pos.to_sfen());
        }
        let hands = Position::from_sfen("4k4/9/9/9/9/9/9/9/4K4 w RB2G2S2N2L9Prb2g2s2n2l9p 1").unwrap();
        assert_eq!(decode_hcp(&encode_hcp(&hands).unwrap()).unwrap().to_sfen(), hands.to_sfen());
        let mut seed = 12345u64;
        let mut below = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for g in 0..200 {
            let mut pos = Handicap::ALL[g % Handicap::ALL.len()].position();
            for _ in 0..(20 + below(150)) {
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                let m = moves[below(moves.len())];
                assert_eq!(move_from_move16(move_to_move16(m)), Some(m));
                pos.do_move(m);
                let bytes = encode_hcp(&pos).unwrap();
                assert_eq!(
                    decode_hcp(&bytes).unwrap().to_sfen().rsplit_once(' ').unwrap().0,
                    pos.to_sfen().rsplit_once(' ').unwrap().0
                );
            }
        }
    }

    #[test]
    fn refuses_garbage_without_panicking() {
        let too_many = Position::from_sfen("4k4/9/9/9/9/9/9/9/4K4 b 3R 1").unwrap();
        assert!(encode_hcp(&too_many).is_err());
        let mut seed = 7u64;
        let mut ok = 0;
        for _ in 0..5000 {
            let bytes: [u8; HCP_BYTES] = std::array::from_fn(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (seed >> 33) as u8
            });
            ok += decode_hcp(&bytes).is_ok() as usize;
        }
        assert!(ok < 5000);
        assert_eq!(move_from_move16(0), None);
        assert_eq!(move_from_move16(81 | (81 << 7)), None); // destination off the board
        assert_eq!(move_from_move16(40 | (88 << 7)), None); // a king "drop"
        assert_eq!(move_from_move16(40 | (81 << 7) | (1 << 14)), None); // a promoting drop
    }

    #[test]
    fn eval_mapping_round_trips() {
        for eval in [-32767i16, -30000, -5000, -757, -1, 0, 1, 300, 756, 12000, 32767] {
            let wdl = eval_to_wdl(eval as f64, DLSHOGI_EVAL_SCALE);
            assert!((wdl[0] + wdl[2] - 1.0).abs() < 1e-6);
            assert_eq!(wdl_to_eval(wdl, DLSHOGI_EVAL_SCALE), Some(eval), "{eval}");
        }
        assert_eq!(wdl_to_eval([0.0; 3], DLSHOGI_EVAL_SCALE), None);
        assert_eq!(wdl_to_eval([0.25, 0.5, 0.25], DLSHOGI_EVAL_SCALE), Some(0));
        assert_eq!(wdl_to_eval([1.0, 0.0, 0.0], DLSHOGI_EVAL_SCALE), Some(i16::MAX));
    }
}
