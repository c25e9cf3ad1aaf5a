//! Checks and mates in one for mate solvers, without testing every candidate move: checks are
//! generated onto the squares from which each kind of piece attacks the enemy king (and every
//! move of a piece that uncovers a check), and the king's escapes after a check are read from its
//! neighbourhood computed once per position, with only the squares a move can change looked at
//! again. [`Position::checking_moves`] and [`Position::king_escapes_after`] give the same answers
//! one move at a time; the property tests hold the two to each other.

use crate::attacks::{self, between, line};
use crate::bitboard::Bitboard;
use crate::color::Color;
use crate::hand::Hand;
use crate::movegen::push_board_move;
use crate::movelist::MoveList;
use crate::mv::Move;
use crate::piece::{Piece, PieceType};
use crate::position::Position;
use crate::square::Square;
use crate::zobrist;

/// The enemy king's neighbourhood before a move, for [`Position::king_escapes_with`].
#[derive(Clone, Copy, Debug)]
pub struct KingEscapes {
    king: Square,
    /// Squares next to the king that it could step to but for our attacks (not its own pieces).
    open: Bitboard,
    /// Of those, the ones no piece of ours attacks (the king lifted off the board).
    safe: Bitboard,
    /// The squares next to the king that a piece of ours attacks (the king lifted).
    covered: Bitboard,
}

/// For each kind (indexed by [`PieceType::index`]), the squares from which a piece of `color`
/// of that kind would attack `target`, with `occ`.
fn checking_squares_by_kind(color: Color, target: Square, occ: Bitboard) -> [Bitboard; 15] {
    let them = !color;
    let mut squares = [Bitboard::EMPTY; 15];
    let king = attacks::king_attacks(target);
    let bishop = attacks::bishop_attacks(target, occ);
    let rook = attacks::rook_attacks(target, occ);
    let gold = attacks::gold_attacks(them, target);
    squares[PieceType::Pawn.index()] = attacks::pawn_attacks(them, target);
    squares[PieceType::Lance.index()] = attacks::lance_attacks(them, target, occ);
    squares[PieceType::Knight.index()] = attacks::knight_attacks(them, target);
    squares[PieceType::Silver.index()] = attacks::silver_attacks(them, target);
    squares[PieceType::Bishop.index()] = bishop;
    squares[PieceType::Rook.index()] = rook;
    for pt in [PieceType::Gold, PieceType::ProPawn, PieceType::ProLance, PieceType::ProKnight, PieceType::ProSilver] {
        squares[pt.index()] = gold;
    }
    squares[PieceType::Horse.index()] = bishop | king;
    squares[PieceType::Dragon.index()] = rook | king;
    squares
}

/// Pushes the versions of the board move `from`→`to` of a `pt` that are legal and check: the
/// promotion when `promoted_checks`, the plain move when `plain_checks`.
#[inline]
fn push_checks(
    list: &mut MoveList,
    us: Color,
    pt: PieceType,
    from: Square,
    to: Square,
    plain_checks: bool,
    promoted_checks: bool,
) {
    let (promote, plain) = match pt {
        PieceType::Pawn | PieceType::Lance => {
            let rr = to.relative_rank(us);
            (rr < 3, rr != 0)
        }
        PieceType::Knight => {
            let rr = to.relative_rank(us);
            (rr < 3, rr >= 2)
        }
        PieceType::Silver | PieceType::Bishop | PieceType::Rook => {
            (to.in_promotion_zone(us) || from.in_promotion_zone(us), true)
        }
        _ => (false, true),
    };
    if promote && promoted_checks {
        list.push(Move::board(from, to, true));
    }
    if plain && plain_checks {
        list.push(Move::board(from, to, false));
    }
}

/// For each square, the squares within `files` files and `ranks` ranks of it.
const fn box_table(files: i32, ranks: i32) -> [u128; 81] {
    let mut table = [0u128; 81];
    let mut sq = 0;
    while sq < 81 {
        let (f, r) = ((sq / 9) as i32, (sq % 9) as i32);
        let mut other: i32 = 0;
        while other < 81 {
            let (g, s) = (other / 9, other % 9);
            if (f - g).abs() <= files && (r - s).abs() <= ranks {
                table[sq] |= 1u128 << other;
            }
            other += 1;
        }
        sq += 1;
    }
    table
}

/// Where a pawn, silver, gold or promoted minor piece must stand to give a direct check (with or
/// without promoting): within two squares of the king.
static STEP_REACH: [u128; 81] = box_table(2, 2);
/// Where a knight must stand (it checks from two ranks away, or next to the king promoted).
static KNIGHT_REACH: [u128; 81] = box_table(2, 4);
/// Where a lance must stand: on the king's file or next to it.
static LANCE_REACH: [u128; 81] = box_table(1, 8);

/// The pieces of kind `pt` that may give a direct check to a king on `king`: a superset, by
/// distance alone.
#[inline]
fn may_check(pt: PieceType, king: Square) -> Bitboard {
    Bitboard(match pt {
        PieceType::Knight => KNIGHT_REACH[king.index()],
        PieceType::Lance => LANCE_REACH[king.index()],
        PieceType::Bishop | PieceType::Rook | PieceType::Horse | PieceType::Dragon => Bitboard::ALL.0,
        _ => STEP_REACH[king.index()],
    })
}

/// The kinds a piece of the side to move may have on the board, the king excepted.
const BOARD_KINDS: [PieceType; 13] = [
    PieceType::Pawn,
    PieceType::Lance,
    PieceType::Knight,
    PieceType::Silver,
    PieceType::Bishop,
    PieceType::Rook,
    PieceType::Gold,
    PieceType::ProPawn,
    PieceType::ProLance,
    PieceType::ProKnight,
    PieceType::ProSilver,
    PieceType::Horse,
    PieceType::Dragon,
];

impl Position {
    /// Fills `list` with the legal moves of the side to move that give check: the same moves as
    /// [`Position::checking_moves`], generated onto each kind's checking squares instead of tested
    /// one by one.
    pub fn generate_checks(&self, list: &mut MoveList) {
        list.clear();
        let us = self.side_to_move();
        let discoverers = self.discovered_check_candidates();
        if self.in_check() {
            // Rare for an attacker: its evasions that check.
            let mut evasions = MoveList::new();
            self.generate_legal(&mut evasions);
            for &m in evasions.iter() {
                if self.gives_check_with(m, discoverers) {
                    list.push(m);
                }
            }
            return;
        }
        let eksq = self.king_square(!us);
        let ksq = self.king_square(us);
        let occ = self.occupied();
        let own = self.pieces_of(us);
        let pinned = self.pinned();
        let squares = checking_squares_by_kind(us, eksq, occ);
        for pt in BOARD_KINDS {
            let promoted = if pt.can_promote() { squares[pt.promote().index()] } else { Bitboard::EMPTY };
            for from in self.pieces(us, pt) & (may_check(pt, eksq) | discoverers) {
                let mut tos = attacks::attacks(us, pt, from, occ) & !own;
                if pinned.contains(from) {
                    tos &= line(ksq, from);
                }
                // A piece that uncovers a check checks with every move off its line to the king.
                let uncovered = if discoverers.contains(from) { !line(eksq, from) } else { Bitboard::EMPTY };
                let (plain, promoting) = (squares[pt.index()] | uncovered, promoted | uncovered);
                for to in tos & (plain | promoting) {
                    push_checks(list, us, pt, from, to, plain.contains(to), promoting.contains(to));
                }
            }
        }
        if discoverers.contains(ksq) {
            let off_line = !line(eksq, ksq);
            let king_occ = occ.without(ksq);
            for to in attacks::king_attacks(ksq) & !own & off_line {
                if !self.is_attacked_by(!us, to, king_occ) {
                    list.push(Move::board(ksq, to, false));
                }
            }
        }
        let hand = self.hand(us);
        if hand.is_empty() {
            return;
        }
        let empty = !occ;
        for pt in PieceType::HAND {
            if !hand.has(pt) {
                continue;
            }
            for to in squares[pt.index()] & empty {
                if Position::is_dead_square(us, pt, to) {
                    continue;
                }
                if pt == PieceType::Pawn && (self.has_pawn_on_file(us, to) || self.pawn_drop_mates(to)) {
                    continue;
                }
                list.push(Move::drop(pt, to));
            }
        }
    }

    /// The enemy king's neighbourhood now, for [`Position::king_escapes_with`] over many moves.
    pub fn king_escapes(&self) -> KingEscapes {
        let us = self.side_to_move();
        let king = self.king_square(!us);
        let near = attacks::king_attacks(king);
        let open = near & !self.pieces_of(!us);
        let covered = self.attacks_on(us, king, near, self.occupied().without(king));
        KingEscapes { king, open, safe: open & !covered, covered }
    }

    /// The squares of `near` that a piece of `color` attacks, sliders seeing through `occ`: one
    /// pass over the pieces instead of one attacker search per square.
    fn attacks_on(&self, color: Color, center: Square, near: Bitboard, occ: Bitboard) -> Bitboard {
        if near.is_empty() {
            return near;
        }
        // Only pieces close enough to reach a square next to `center` matter.
        let mine = self.pieces_of(color);
        let steps = Bitboard(STEP_REACH[center.index()]) & mine;
        let pawns = self.pieces(color, PieceType::Pawn).0;
        let mut covered = Bitboard(if color == Color::Black { pawns >> 1 } else { pawns << 1 });
        for sq in self.pieces_of_type(PieceType::Knight) & mine & Bitboard(KNIGHT_REACH[center.index()]) {
            covered |= attacks::knight_attacks(color, sq);
        }
        for sq in self.pieces_of_type(PieceType::Silver) & steps {
            covered |= attacks::silver_attacks(color, sq);
        }
        for sq in self.gold_movers() & steps {
            covered |= attacks::gold_attacks(color, sq);
        }
        let kings = self.pieces_of_type(PieceType::King)
            | self.pieces_of_type(PieceType::Horse)
            | self.pieces_of_type(PieceType::Dragon);
        for sq in kings & steps {
            covered |= attacks::king_attacks(sq);
        }
        if (covered & near) == near {
            return near;
        }
        for sq in self.bishop_movers() & mine {
            covered |= attacks::bishop_attacks(sq, occ);
        }
        for sq in self.rook_movers() & mine {
            covered |= attacks::rook_attacks(sq, occ);
        }
        for sq in self.pieces_of_type(PieceType::Lance) & mine & Bitboard(LANCE_REACH[center.index()]) {
            covered |= attacks::lance_attacks(color, sq, occ);
        }
        covered & near
    }

    /// Fills `list` with the legal moves of the side to move, as [`Position::generate_legal`]
    /// does (king moves first, drops last), the king's moves found with one pass over the enemy
    /// pieces and, in check, the other answers from the squares that take or block the checker.
    pub fn generate_legal_fast(&self, list: &mut MoveList) {
        list.clear();
        let us = self.side_to_move();
        let ksq = self.king_square(us);
        let targets = attacks::king_attacks(ksq) & !self.pieces_of(us);
        let attacked = self.attacks_on(!us, ksq, targets, self.occupied().without(ksq));
        for to in targets & !attacked {
            list.push(Move::board(ksq, to, false));
        }
        let checkers = self.checkers();
        if checkers.is_empty() {
            self.generate_piece_moves(list, !self.pieces_of(us), Bitboard::ALL);
            self.generate_drops(list, !self.occupied());
        } else if !checkers.more_than_one() {
            // The few squares that answer a check, and the pieces that reach each.
            let checker = checkers.first().expect("one checker");
            let block = between(ksq, checker);
            let occ = self.occupied();
            let pinned = self.pinned();
            let movers = self.pieces_of(us).without(ksq);
            for to in block.with(checker) {
                for from in self.attackers_to(us, to, occ) & movers {
                    if !pinned.contains(from) || line(ksq, from).contains(to) {
                        let pt = self.piece_at(from).expect("an attacker stands there").piece_type();
                        push_board_move(list, us, pt, from, to);
                    }
                }
            }
            self.generate_drops(list, block);
        }
    }

    /// [`Position::king_escapes_after`] for the legal move `m`, with `escapes` from
    /// [`Position::king_escapes`] of this position: only the squares next to the king that `m`
    /// can change (its destination, the lines through its origin and destination, the squares
    /// its piece attacked or will attack) are looked at again.
    pub fn king_escapes_with(&self, m: Move, escapes: &KingEscapes) -> bool {
        let us = self.side_to_move();
        let to = m.to();
        let from = (!m.is_drop()).then(|| m.from());
        let origin = from.map_or(Bitboard::EMPTY, Bitboard::from_square);
        let occ = (self.occupied() & !origin).with(to).without(escapes.king);
        let after = attacks::attacks(us, self.piece_type_after_move(m), to, occ);
        let free = |sq: Square| !after.contains(sq) && !self.attacked_except(us, sq, occ, origin);
        // A square no piece attacked stays free unless the moved piece attacks it now, or a slider
        // sees it through the square the piece left.
        for sq in escapes.safe.without(to) & !after {
            match from {
                // Only when nothing stands between the square and the one left.
                Some(f) if line(sq, f).is_nonempty() && (between(sq, f) & occ).is_empty() => {
                    if free(sq) {
                        return true;
                    }
                }
                _ => return true,
            }
        }
        // An attacked square may be freed when the moved piece was its attacker or the piece
        // now blocks a slider's line to it.
        let before = from.map_or(Bitboard::EMPTY, |f| {
            let piece = self.piece_at(f).expect("a legal move has a piece on its origin square");
            attacks::attacks(us, piece.piece_type(), f, self.occupied().without(escapes.king))
        });
        for sq in (escapes.open & !escapes.safe).without(to) & !after {
            if (before.contains(sq) || line(sq, to).is_nonempty()) && free(sq) {
                return true;
            }
        }
        // The king takes the checking piece if nothing defends it.
        attacks::king_attacks(escapes.king).contains(to) && free(to)
    }

    /// Whether a piece of `color` other than those on `except` attacks `sq`, sliders seeing
    /// through `occ`: [`Position::attackers_to`] with the cheap step pieces first.
    fn attacked_except(&self, color: Color, sq: Square, occ: Bitboard, except: Bitboard) -> bool {
        let them = !color;
        let mine = self.pieces_of(color) & !except;
        let t = |pt: PieceType| self.pieces_of_type(pt) & mine;
        let steps = (attacks::pawn_attacks(them, sq) & t(PieceType::Pawn))
            | (attacks::knight_attacks(them, sq) & t(PieceType::Knight))
            | (attacks::silver_attacks(them, sq) & t(PieceType::Silver))
            | (attacks::gold_attacks(them, sq) & self.gold_movers() & mine)
            | (attacks::king_attacks(sq) & (t(PieceType::King) | t(PieceType::Horse) | t(PieceType::Dragon)));
        if steps.is_nonempty() {
            return true;
        }
        let diagonal = self.bishop_movers() & mine;
        if diagonal.is_nonempty() && (attacks::bishop_attacks(sq, occ) & diagonal).is_nonempty() {
            return true;
        }
        let straight = self.rook_movers() & mine;
        if straight.is_nonempty() && (attacks::rook_attacks(sq, occ) & straight).is_nonempty() {
            return true;
        }
        let lances = t(PieceType::Lance);
        lances.is_nonempty() && (attacks::lance_attacks(them, sq, occ) & lances).is_nonempty()
    }

    /// The kind of piece on the destination of the legal move `m` once it is played.
    #[inline]
    fn piece_type_after_move(&self, m: Move) -> PieceType {
        match m.drop_piece_type() {
            Some(pt) => pt,
            None => {
                let pt = self.piece_at(m.from()).expect("a legal move has a piece on its origin square").piece_type();
                if m.is_promotion() {
                    pt.promote()
                } else {
                    pt
                }
            }
        }
    }

    /// The first of `checks` (legal checks of the side to move) that mates at once, if any: a
    /// check the king can step out of is passed over without playing it.
    pub fn mate_among(&mut self, checks: impl IntoIterator<Item = Move>) -> Option<Move> {
        let mut checks = checks.into_iter().peekable();
        checks.peek()?;
        let escapes = self.king_escapes();
        checks.find_map(|m| self.mates(m, &escapes))
    }

    /// Whether the side to move, in check, can answer with a move of a piece other than its king
    /// or a drop: take a single checker or block its line.
    fn has_evasion_without_king(&self) -> bool {
        let checkers = self.checkers();
        if checkers.more_than_one() {
            return false;
        }
        let Some(checker) = checkers.first() else { return true };
        let us = self.side_to_move();
        let ksq = self.king_square(us);
        let block = between(ksq, checker);
        let (occ, pinned, movers) = (self.occupied(), self.pinned(), self.pieces_of(us).without(ksq));
        for to in block.with(checker) {
            for from in self.attackers_to(us, to, occ) & movers {
                if !pinned.contains(from) || line(ksq, from).contains(to) {
                    // Some version of the move is legal: a piece that reaches a square can stop
                    // there, promoted if not otherwise.
                    return true;
                }
            }
        }
        let mut list = MoveList::new();
        self.generate_drops(&mut list, block);
        !list.is_empty()
    }

    /// The hash ([`Position::hash`]) and the mover's hand after the legal move `m`, without
    /// playing it.
    pub fn hash_and_hand_after(&self, m: Move) -> (u64, Hand) {
        let us = self.side_to_move();
        let mut hand = self.hand(us);
        let to = m.to();
        let mut h = self.hash() ^ zobrist::side();
        if let Some(pt) = m.drop_piece_type() {
            h ^= zobrist::hand(us, pt, hand.count(pt)) ^ zobrist::piece_square(Piece::new(us, pt), to);
            hand.remove(pt);
            return (h, hand);
        }
        let from = m.from();
        let piece = self.piece_at(from).expect("a legal move has a piece on its origin square");
        if let Some(victim) = self.piece_at(to) {
            let kind = victim.piece_type().unpromote();
            hand.add(kind);
            h ^= zobrist::piece_square(victim, to) ^ zobrist::hand(us, kind, hand.count(kind));
        }
        let placed = if m.is_promotion() { Piece::new(us, piece.piece_type().promote()) } else { piece };
        (h ^ zobrist::piece_square(piece, from) ^ zobrist::piece_square(placed, to), hand)
    }

    /// The board hash ([`Position::board_hash`]) after the legal move `m`, from the board hash
    /// now (`board_hash`), without playing it: for fetching a table entry ahead of time.
    pub fn board_hash_after(&self, board_hash: u64, m: Move) -> u64 {
        let us = self.side_to_move();
        let to = m.to();
        let mut h = board_hash ^ zobrist::side();
        if let Some(pt) = m.drop_piece_type() {
            return h ^ zobrist::piece_square(Piece::new(us, pt), to);
        }
        let from = m.from();
        let piece = self.piece_at(from).expect("a legal move has a piece on its origin square");
        if let Some(victim) = self.piece_at(to) {
            h ^= zobrist::piece_square(victim, to);
        }
        let placed = if m.is_promotion() { Piece::new(us, piece.piece_type().promote()) } else { piece };
        h ^ zobrist::piece_square(piece, from) ^ zobrist::piece_square(placed, to)
    }

    /// A mate in one for the side to move, and whether it has any check at all, found without
    /// generating every check: a move can only mate if its piece covers every square the king
    /// could flee to now (but the one it lands on, and those a line opened behind it may cover),
    /// so only the destinations in the intersection of those squares' attackers are tried. The
    /// same answers as [`Position::generate_checks`] with [`Position::mate_among`]; the mate found
    /// may be another one. Board moves are tried before drops (a mate that needs no piece in
    /// hand first).
    pub fn mate_in_one_or_checks(&mut self) -> (Option<Move>, bool) {
        if self.in_check() {
            let mut checks = MoveList::new();
            self.generate_checks(&mut checks);
            return (self.mate_among(checks.iter().copied()), !checks.is_empty());
        }
        let us = self.side_to_move();
        let them = !us;
        let eksq = self.king_square(them);
        let ksq = self.king_square(us);
        let occ = self.occupied();
        let lifted = occ.without(eksq);
        let own = self.pieces_of(us);
        let pinned = self.pinned();
        let discoverers = self.discovered_check_candidates();
        let escapes = self.king_escapes();
        let near = attacks::king_attacks(eksq);
        let mut checks = false;
        let squares = checking_squares_by_kind(us, eksq, occ);
        // The destinations from which a piece of each kind covers every safe square (or stands
        // on it), computed when first needed.
        let covering = |pt: PieceType, required: Bitboard, occ: Bitboard| {
            let mut to = Bitboard::ALL;
            for sq in required {
                to &= attacks::attacks(them, pt, sq, occ).with(sq);
            }
            to
        };
        let mut cover: [Option<Bitboard>; 15] = [None; 15];
        let mut cover_of = |pt: PieceType| {
            let kind = if pt.moves_like_gold() { PieceType::Gold } else { pt };
            *cover[kind.index()].get_or_insert_with(|| covering(kind, escapes.safe, lifted))
        };
        let zone = relative_ranks(us, 3);
        let (last1, last2) = (relative_ranks(us, 1), relative_ranks(us, 2));
        {
            for from in (self.may_give_check(us, eksq) | discoverers).without(ksq) {
                let pt = self.piece_at(from).expect("a piece of ours stands there").piece_type();
                let promoted = pt.promote();
                let mut tos = attacks::attacks(us, pt, from, occ) & !own;
                if pinned.contains(from) {
                    tos &= line(ksq, from);
                }
                if tos.is_empty() {
                    continue;
                }
                let (promote_to, plain_to) = match pt {
                    PieceType::Pawn | PieceType::Lance => (zone, !last1),
                    PieceType::Knight => (zone, !last2),
                    PieceType::Silver | PieceType::Bishop | PieceType::Rook => {
                        (if zone.contains(from) { Bitboard::ALL } else { zone }, Bitboard::ALL)
                    }
                    _ => (Bitboard::EMPTY, Bitboard::ALL),
                };
                if discoverers.contains(from) {
                    // Every move off the line to the king checks: each is tried in full.
                    let off = !line(eksq, from);
                    for (promote, allowed, kind) in [(false, plain_to, pt), (true, promote_to, promoted)] {
                        if promote && !pt.can_promote() {
                            continue;
                        }
                        let targets = tos & allowed & (off | squares[kind.index()]);
                        checks |= targets.is_nonempty();
                        for to in targets {
                            if let Some(m) = self.mates(Move::board(from, to, promote), &escapes) {
                                return (Some(m), true);
                            }
                        }
                    }
                    continue;
                }
                // A safe square that a slider may see through the square left need not be
                // covered by the moved piece.
                let mut required = None;
                for (promote, allowed, kind) in [(false, plain_to, pt), (true, promote_to, promoted)] {
                    if promote && !pt.can_promote() {
                        continue;
                    }
                    let targets = tos & allowed & squares[kind.index()];
                    if targets.is_empty() {
                        continue;
                    }
                    checks = true;
                    let required = *required.get_or_insert_with(|| {
                        let mut required = escapes.safe;
                        for sq in escapes.safe {
                            if line(sq, from).is_nonempty() && (between(sq, from) & lifted).is_empty() {
                                required = required.without(sq);
                            }
                        }
                        required
                    });
                    let reach = if required == escapes.safe && !is_slider(kind) {
                        cover_of(kind)
                    } else {
                        covering(kind, required, lifted.without(from))
                    };
                    for to in targets & reach {
                        if let Some(m) = self.mates(Move::board(from, to, promote), &escapes) {
                            return (Some(m), true);
                        }
                    }
                }
            }
        }
        if discoverers.contains(ksq) {
            let off_line = !line(eksq, ksq);
            let king_occ = occ.without(ksq);
            for to in attacks::king_attacks(ksq) & !own & off_line {
                if !self.is_attacked_by(them, to, king_occ) {
                    checks = true;
                    if let Some(m) = self.mates(Move::board(ksq, to, false), &escapes) {
                        return (Some(m), true);
                    }
                }
            }
        }
        let hand = self.hand(us);
        let empty = !occ;
        for pt in PieceType::HAND {
            if !hand.has(pt) {
                continue;
            }
            let mut targets = squares[pt.index()] & empty;
            match pt {
                // A pawn drop that mates is illegal: pawn drops only tell whether there is a check.
                PieceType::Pawn => {
                    if !checks {
                        checks = (targets & !last1)
                            .into_iter()
                            .any(|to| !self.has_pawn_on_file(us, to) && !self.pawn_drop_mates(to));
                    }
                    continue;
                }
                PieceType::Lance => targets &= !last1,
                PieceType::Knight => targets &= !last2,
                _ => {}
            }
            checks |= targets.is_nonempty();
            for to in targets & cover_of(pt) & (escapes.covered | !near) {
                if let Some(m) = self.mates(Move::drop(pt, to), &escapes) {
                    return (Some(m), true);
                }
            }
        }
        (None, checks)
    }

    /// The pieces of `us` but the king that may give a direct check to a king on `king`: a
    /// superset, by distance alone ([`may_check`]).
    fn may_give_check(&self, us: Color, king: Square) -> Bitboard {
        let steps = self.pieces(us, PieceType::Pawn) | self.pieces(us, PieceType::Silver) | self.gold_movers();
        let far = self.bishop_movers() | self.rook_movers();
        ((steps & Bitboard(STEP_REACH[king.index()]))
            | (self.pieces_of_type(PieceType::Knight) & Bitboard(KNIGHT_REACH[king.index()]))
            | (self.pieces_of_type(PieceType::Lance) & Bitboard(LANCE_REACH[king.index()]))
            | far)
            & self.pieces_of(us)
    }

    /// `m` (a legal check) if it mates.
    #[inline]
    fn mates(&mut self, m: Move, escapes: &KingEscapes) -> Option<Move> {
        if self.king_escapes_with(m, escapes) {
            return None;
        }
        self.do_move(m);
        // The king has no move: mated unless another piece takes the checker or blocks.
        let mated = !self.has_evasion_without_king();
        self.undo_move();
        mated.then_some(m)
    }
}

/// Whether a piece of kind `pt` slides (its attacks depend on the occupancy).
#[inline]
fn is_slider(pt: PieceType) -> bool {
    matches!(pt, PieceType::Lance | PieceType::Bishop | PieceType::Rook | PieceType::Horse | PieceType::Dragon)
}

/// The `count` ranks farthest from `color`'s side (its promotion zone for 3).
#[inline]
fn relative_ranks(color: Color, count: u8) -> Bitboard {
    let mut bb = Bitboard::EMPTY;
    for i in 0..count {
        bb |= Bitboard::rank(if color == Color::Black { i } else { 8 - i });
    }
    bb
}
