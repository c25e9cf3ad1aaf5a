//! A validated shogi position with incremental do/undo and the queries move generation and search
//! need (checkers, pinned pieces, attacks to a square, legality of a single move, check detection).
//!
//! The position keeps its own history of states (hash, checkers, captured piece), so undo is exact
//! and repetition can be judged without outside bookkeeping.

use crate::attacks::{self, between};
use crate::bitboard::Bitboard;
use crate::color::Color;
use crate::hand::Hand;
use crate::mv::Move;
use crate::piece::{Piece, PieceType};
use crate::square::Square;
use crate::zobrist;

/// What changes from ply to ply, kept on a stack for undo and repetition detection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StateInfo {
    /// Zobrist hash of board, hands and side to move.
    pub(crate) hash: u64,
    /// Enemy pieces giving check to the side to move.
    pub(crate) checkers: Bitboard,
    /// Pieces of the side to move pinned to their own king.
    pub(crate) pinned: Bitboard,
    /// The move that led here (`None` at the root) and what it captured.
    pub(crate) last_move: Option<Move>,
    pub(crate) captured: Option<Piece>,
}

#[derive(Clone)]
pub struct Position {
    board: [Option<Piece>; 81],
    by_color: [Bitboard; 2],
    by_type: [Bitboard; 15],
    hands: [Hand; 2],
    side_to_move: Color,
    king_squares: [Square; 2],
    /// SFEN move number of the current position (1 in a fresh game).
    move_number: u32,
    states: Vec<StateInfo>,
}

impl Position {
    /// Builds a position from raw parts; `crate::sfen` validates before calling this.
    pub(crate) fn from_parts(
        board: [Option<Piece>; 81],
        hands: [Hand; 2],
        side_to_move: Color,
        move_number: u32,
    ) -> Position {
        let mut pos = Position {
            board,
            by_color: [Bitboard::EMPTY; 2],
            by_type: [Bitboard::EMPTY; 15],
            hands,
            side_to_move,
            king_squares: [Square::from_index_unchecked(0); 2],
            move_number,
            states: Vec::with_capacity(32),
        };
        for sq in Square::all() {
            if let Some(p) = board[sq.index()] {
                pos.by_color[p.color().index()] |= Bitboard::from_square(sq);
                pos.by_type[p.piece_type().index()] |= Bitboard::from_square(sq);
                if p.piece_type() == PieceType::King {
                    pos.king_squares[p.color().index()] = sq;
                }
            }
        }
        let hash = pos.compute_hash();
        let (checkers, pinned) = pos.compute_check_info();
        pos.states.push(StateInfo { hash, checkers, pinned, last_move: None, captured: None });
        pos
    }

    // ---- simple accessors ---------------------------------------------------------------

    #[inline]
    pub fn side_to_move(&self) -> Color {
        self.side_to_move
    }

    #[inline]
    pub fn piece_at(&self, sq: Square) -> Option<Piece> {
        self.board[sq.index()]
    }

    #[inline]
    pub fn hand(&self, color: Color) -> Hand {
        self.hands[color.index()]
    }

    #[inline]
    pub fn king_square(&self, color: Color) -> Square {
        self.king_squares[color.index()]
    }

    #[inline]
    pub fn occupied(&self) -> Bitboard {
        self.by_color[0] | self.by_color[1]
    }

    #[inline]
    pub fn pieces_of(&self, color: Color) -> Bitboard {
        self.by_color[color.index()]
    }

    #[inline]
    pub fn pieces_of_type(&self, pt: PieceType) -> Bitboard {
        self.by_type[pt.index()]
    }

    #[inline]
    pub fn pieces(&self, color: Color, pt: PieceType) -> Bitboard {
        self.by_type[pt.index()] & self.by_color[color.index()]
    }

    /// Gold and the four promoted minor pieces, which all move like a gold.
    #[inline]
    pub fn gold_movers(&self) -> Bitboard {
        self.by_type[PieceType::Gold.index()]
            | self.by_type[PieceType::ProPawn.index()]
            | self.by_type[PieceType::ProLance.index()]
            | self.by_type[PieceType::ProKnight.index()]
            | self.by_type[PieceType::ProSilver.index()]
    }

    #[inline]
    pub(crate) fn bishop_movers(&self) -> Bitboard {
        self.by_type[PieceType::Bishop.index()] | self.by_type[PieceType::Horse.index()]
    }

    #[inline]
    pub(crate) fn rook_movers(&self) -> Bitboard {
        self.by_type[PieceType::Rook.index()] | self.by_type[PieceType::Dragon.index()]
    }

    /// SFEN move number (1 for the first move of a game started from a fresh position).
    #[inline]
    pub fn move_number(&self) -> u32 {
        self.move_number
    }

    /// Plies played since this position object was created (length of its history).
    #[inline]
    pub fn plies_from_root(&self) -> usize {
        self.states.len() - 1
    }

    #[inline]
    pub(crate) fn state(&self) -> &StateInfo {
        self.states.last().expect("the state stack always has the root")
    }

    #[inline]
    pub(crate) fn states(&self) -> &[StateInfo] {
        &self.states
    }

    /// Zobrist hash of board, hands and side to move.
    #[inline]
    pub fn hash(&self) -> u64 {
        self.state().hash
    }

    /// The Zobrist hash of the board and the side to move, without the hands: positions that
    /// differ only in their hands share it (a mate solver compares such positions by their hands).
    pub fn board_hash(&self) -> u64 {
        let mut h = self.hash();
        for color in Color::ALL {
            let hand = self.hands[color.index()];
            for pt in PieceType::HAND {
                h ^= zobrist::hand_total(color, pt, hand.count(pt));
            }
        }
        h
    }

    /// Enemy pieces giving check to the side to move.
    #[inline]
    pub fn checkers(&self) -> Bitboard {
        self.state().checkers
    }

    #[inline]
    pub fn in_check(&self) -> bool {
        self.state().checkers.is_nonempty()
    }

    /// Pieces of the side to move that are pinned to their king.
    #[inline]
    pub fn pinned(&self) -> Bitboard {
        self.state().pinned
    }

    /// The hash of the position `plies_back` plies ago in this position's history, if it goes back
    /// that far (0 is the current position).
    pub fn history_hash(&self, plies_back: usize) -> Option<u64> {
        self.states.len().checked_sub(plies_back + 1).map(|i| self.states[i].hash)
    }

    /// The move played `plies_back` + 1 plies ago (0 is the last move), if the history has it.
    pub fn history_move(&self, plies_back: usize) -> Option<Move> {
        self.states.len().checked_sub(plies_back + 1).and_then(|i| self.states[i].last_move)
    }

    /// The last move played, if the history has one.
    pub fn last_move(&self) -> Option<Move> {
        self.state().last_move
    }

    /// Moves played from the history's root, oldest first.
    pub fn moves_from_root(&self) -> impl Iterator<Item = Move> + '_ {
        self.states.iter().filter_map(|s| s.last_move)
    }

    // ---- attacks --------------------------------------------------------------------------

    /// Pieces of `color` attacking `sq`, with the given occupancy for sliders.
    #[inline]
    pub fn attackers_to(&self, color: Color, sq: Square, occ: Bitboard) -> Bitboard {
        let them = !color;
        let t = &self.by_type;
        let candidates = (attacks::pawn_attacks(them, sq) & t[PieceType::Pawn.index()])
            | (attacks::knight_attacks(them, sq) & t[PieceType::Knight.index()])
            | (attacks::silver_attacks(them, sq) & t[PieceType::Silver.index()])
            | (attacks::gold_attacks(them, sq) & self.gold_movers())
            | (attacks::king_attacks(sq)
                & (t[PieceType::King.index()] | t[PieceType::Horse.index()] | t[PieceType::Dragon.index()]))
            | (attacks::bishop_attacks(sq, occ) & self.bishop_movers())
            | (attacks::rook_attacks(sq, occ) & self.rook_movers())
            | (attacks::lance_attacks(them, sq, occ) & t[PieceType::Lance.index()]);
        candidates & self.by_color[color.index()]
    }

    /// Whether any piece of `color` attacks `sq` (same occupancy rules as [`Self::attackers_to`]).
    #[inline]
    pub fn is_attacked_by(&self, color: Color, sq: Square, occ: Bitboard) -> bool {
        self.attackers_to(color, sq, occ).is_nonempty()
    }

    /// Checkers of the side to move and its pinned pieces, from scratch.
    fn compute_check_info(&self) -> (Bitboard, Bitboard) {
        let us = self.side_to_move;
        let ksq = self.king_square(us);
        let checkers = self.attackers_to(!us, ksq, self.occupied());
        (checkers, self.blockers_for_king(us))
    }

    /// Pieces of `color` that shield its king from an enemy slider (pinned pieces).
    pub(crate) fn blockers_for_king(&self, color: Color) -> Bitboard {
        let ksq = self.king_square(color);
        let enemy = self.by_color[(!color).index()];
        let snipers = ((attacks::rook_attacks(ksq, Bitboard::EMPTY) & self.rook_movers())
            | (attacks::bishop_attacks(ksq, Bitboard::EMPTY) & self.bishop_movers())
            | (attacks::lance_ray(color, ksq) & self.by_type[PieceType::Lance.index()]))
            & enemy;
        let occ = self.occupied();
        let own = self.by_color[color.index()];
        let mut pinned = Bitboard::EMPTY;
        for sniper in snipers {
            let blockers = between(ksq, sniper) & occ;
            if blockers.is_nonempty() && !blockers.more_than_one() {
                pinned |= blockers & own;
            }
        }
        pinned
    }

    /// Our pieces that block one of our sliders' lines to the enemy king: moving one off that line
    /// gives a discovered check.
    pub(crate) fn discovered_check_candidates(&self) -> Bitboard {
        let us = self.side_to_move;
        let them = !us;
        let ksq = self.king_square(them);
        let snipers = ((attacks::rook_attacks(ksq, Bitboard::EMPTY) & self.rook_movers())
            | (attacks::bishop_attacks(ksq, Bitboard::EMPTY) & self.bishop_movers())
            | (attacks::lance_ray(them, ksq) & self.by_type[PieceType::Lance.index()]))
            & self.by_color[us.index()];
        let occ = self.occupied();
        let mut candidates = Bitboard::EMPTY;
        for sniper in snipers {
            let blockers = between(ksq, sniper) & occ;
            if blockers.is_nonempty() && !blockers.more_than_one() {
                candidates |= blockers & self.by_color[us.index()];
            }
        }
        candidates
    }

    // ---- hashing ----------------------------------------------------------------------------

    fn compute_hash(&self) -> u64 {
        let mut h = 0u64;
        for sq in Square::all() {
            if let Some(p) = self.board[sq.index()] {
                h ^= zobrist::piece_square(p, sq);
            }
        }
        for color in Color::ALL {
            for pt in PieceType::HAND {
                for n in 1..=self.hands[color.index()].count(pt) {
                    h ^= zobrist::hand(color, pt, n);
                }
            }
        }
        if self.side_to_move == Color::White {
            h ^= zobrist::side();
        }
        h
    }

    /// The hash recomputed from scratch (for tests of the incremental update).
    pub fn hash_from_scratch(&self) -> u64 {
        self.compute_hash()
    }

    // ---- making and unmaking moves ----------------------------------------------------------

    #[inline]
    fn put(&mut self, piece: Piece, sq: Square) {
        let b = Bitboard::from_square(sq);
        self.board[sq.index()] = Some(piece);
        self.by_color[piece.color().index()] |= b;
        self.by_type[piece.piece_type().index()] |= b;
    }

    #[inline]
    fn remove(&mut self, piece: Piece, sq: Square) {
        let b = Bitboard::from_square(sq);
        self.board[sq.index()] = None;
        self.by_color[piece.color().index()] ^= b;
        self.by_type[piece.piece_type().index()] ^= b;
    }

    /// Plays a legal move. Passing an illegal move corrupts the position: check untrusted moves
    /// with [`Position::is_legal`] first.
    pub fn do_move(&mut self, m: Move) {
        let us = self.side_to_move;
        let them = !us;
        let mut hash = self.state().hash ^ zobrist::side();
        let to = m.to();
        let mut captured = None;
        if let Some(pt) = m.drop_piece_type() {
            let n = self.hands[us.index()].count(pt);
            hash ^= zobrist::hand(us, pt, n);
            self.hands[us.index()].remove(pt);
            let piece = Piece::new(us, pt);
            self.put(piece, to);
            hash ^= zobrist::piece_square(piece, to);
        } else {
            let from = m.from();
            let piece = self.board[from.index()].expect("do_move: no piece on the origin square");
            if let Some(victim) = self.board[to.index()] {
                self.remove(victim, to);
                hash ^= zobrist::piece_square(victim, to);
                let kind = victim.piece_type().unpromote();
                self.hands[us.index()].add(kind);
                hash ^= zobrist::hand(us, kind, self.hands[us.index()].count(kind));
                captured = Some(victim);
            }
            self.remove(piece, from);
            hash ^= zobrist::piece_square(piece, from);
            let placed = if m.is_promotion() { Piece::new(us, piece.piece_type().promote()) } else { piece };
            self.put(placed, to);
            hash ^= zobrist::piece_square(placed, to);
            if placed.piece_type() == PieceType::King {
                self.king_squares[us.index()] = to;
            }
        }
        self.side_to_move = them;
        self.move_number += 1;
        let checkers = self.attackers_to(us, self.king_square(them), self.occupied());
        let pinned = self.blockers_for_king(them);
        self.states.push(StateInfo { hash, checkers, pinned, last_move: Some(m), captured });
    }

    /// Takes back the last move. Does nothing at the root of the history.
    pub fn undo_move(&mut self) {
        if self.states.len() < 2 {
            return;
        }
        let state = self.states.pop().expect("checked above");
        let m = state.last_move.expect("non-root states carry their move");
        let them = self.side_to_move;
        let us = !them;
        self.side_to_move = us;
        self.move_number -= 1;
        let to = m.to();
        let moved = self.board[to.index()].expect("undo_move: destination is empty");
        self.remove(moved, to);
        if let Some(pt) = m.drop_piece_type() {
            self.hands[us.index()].add(pt);
        } else {
            let from = m.from();
            let original = if m.is_promotion() { Piece::new(us, moved.piece_type().unpromote()) } else { moved };
            self.put(original, from);
            if original.piece_type() == PieceType::King {
                self.king_squares[us.index()] = from;
            }
            if let Some(victim) = state.captured {
                self.put(victim, to);
                self.hands[us.index()].remove(victim.piece_type().unpromote());
            }
        }
    }

    /// A copy of the current position without its history: cheap to make, for handing leaf
    /// positions to an evaluator. Repetition can't be judged on the copy.
    pub fn without_history(&self) -> Position {
        let mut states = Vec::with_capacity(8);
        states.push(StateInfo { last_move: None, captured: None, ..*self.state() });
        Position { states, ..*self }
    }

    // ---- legality of single moves -------------------------------------------------------

    /// Whether a drop of `pt` by the side to move on the empty square `to` would leave a piece that
    /// can never move (pawn/lance on the last rank, knight on the last two).
    #[inline]
    pub(crate) fn is_dead_square(color: Color, pt: PieceType, to: Square) -> bool {
        let rr = to.relative_rank(color);
        match pt {
            PieceType::Pawn | PieceType::Lance => rr == 0,
            PieceType::Knight => rr <= 1,
            _ => false,
        }
    }

    /// Whether the side to move already has an unpromoted pawn on the file of `sq` (nifu).
    #[inline]
    pub fn has_pawn_on_file(&self, color: Color, sq: Square) -> bool {
        (self.pieces(color, PieceType::Pawn) & Bitboard::file(sq.file_index())).is_nonempty()
    }

    /// Whether dropping a pawn on `to` (which must give check) would checkmate: the uchifuzume
    /// test. The drop square is directly in front of the enemy king.
    pub(crate) fn pawn_drop_mates(&self, to: Square) -> bool {
        let us = self.side_to_move;
        let them = !us;
        let ksq = self.king_square(them);
        let occ_after = self.occupied().with(to);
        // Can the king take the pawn? Only if nothing of ours defends it.
        if !self.is_attacked_by(us, to, occ_after.without(ksq)) {
            return false;
        }
        // Can another enemy piece take it? Pinned pieces only along their pin line.
        let defenders = self.attackers_to(them, to, occ_after).without(ksq);
        if defenders.is_nonempty() {
            let pinned = self.blockers_for_king(them);
            for d in defenders {
                if !pinned.contains(d) || attacks::aligned(ksq, d, to) {
                    return false;
                }
            }
        }
        // Can the king step away? The pawn is on `to`; the king's own square is vacated.
        let occ_without_king = occ_after.without(ksq);
        let escapes = attacks::king_attacks(ksq) & !self.by_color[them.index()] & !Bitboard::from_square(to);
        for esc in escapes {
            if !self.is_attacked_by(us, esc, occ_without_king) {
                return false;
            }
        }
        true
    }

    /// Complete legality check of any move for the side to move: the piece exists and can make the
    /// move, promotion is allowed (and not skipped where it is forced), drops respect dead squares,
    /// nifu and uchifuzume, and the king is not left in check.
    pub fn is_legal(&self, m: Move) -> bool {
        let us = self.side_to_move;
        let to = m.to();
        let own = self.by_color[us.index()];
        let ksq = self.king_square(us);
        let checkers = self.checkers();
        if let Some(pt) = m.drop_piece_type() {
            if !self.hands[us.index()].has(pt) || self.board[to.index()].is_some() || Self::is_dead_square(us, pt, to) {
                return false;
            }
            if checkers.is_nonempty() {
                if checkers.more_than_one() {
                    return false;
                }
                let checker = checkers.first().expect("non-empty");
                if !between(ksq, checker).contains(to) {
                    return false;
                }
            }
            if pt == PieceType::Pawn {
                if self.has_pawn_on_file(us, to) {
                    return false;
                }
                if attacks::pawn_attacks(us, to).contains(self.king_square(!us)) && self.pawn_drop_mates(to) {
                    return false;
                }
            }
            return true;
        }
        let from = m.from();
        let Some(piece) = self.board[from.index()] else { return false };
        if piece.color() != us || own.contains(to) {
            return false;
        }
        let pt = piece.piece_type();
        let occ = self.occupied();
        if !attacks::attacks(us, pt, from, occ).contains(to) {
            return false;
        }
        if m.is_promotion() {
            if !pt.can_promote() || !(from.in_promotion_zone(us) || to.in_promotion_zone(us)) {
                return false;
            }
        } else if Self::is_dead_square(us, pt, to) {
            return false;
        }
        if pt == PieceType::King {
            return !self.is_attacked_by(!us, to, occ.without(from));
        }
        if checkers.is_nonempty() {
            if checkers.more_than_one() {
                return false;
            }
            let checker = checkers.first().expect("non-empty");
            if to != checker && !between(ksq, checker).contains(to) {
                return false;
            }
        }
        !self.pinned().contains(from) || attacks::aligned(ksq, from, to)
    }

    /// Whether a legal move gives check (directly or by discovery).
    pub fn gives_check(&self, m: Move) -> bool {
        self.gives_check_with(m, self.discovered_check_candidates())
    }

    /// Whether the enemy king would have a legal move after the legal move `m`: a square next to
    /// it, not held by its own pieces, that no piece of ours attacks once `m` is played (the king
    /// itself taken off the board, so that it cannot hide behind itself from a slider). Exactly
    /// "the king can move" after `m`, without playing it: the mate-in-one searches' cheap filter,
    /// since a check the king can step out of is no mate.
    pub fn king_escapes_after(&self, m: Move) -> bool {
        let us = self.side_to_move;
        let them = !us;
        let eksq = self.king_square(them);
        let to = m.to();
        let (occ, moved) = if m.is_drop() {
            (self.occupied().with(to), Bitboard::EMPTY)
        } else {
            (self.occupied().without(m.from()).with(to), Bitboard::from_square(m.from()))
        };
        let occ = occ.without(eksq);
        let theirs = self.by_color[them.index()].without(to);
        let from_moved_piece = attacks::attacks(us, self.piece_type_after(m), to, occ);
        (attacks::king_attacks(eksq) & !theirs)
            .into_iter()
            .any(|sq| !from_moved_piece.contains(sq) && (self.attackers_to(us, sq, occ) & !moved).is_empty())
    }

    /// [`Position::gives_check`] with the discovered-check candidates computed once for many moves.
    pub(crate) fn gives_check_with(&self, m: Move, discoverers: Bitboard) -> bool {
        let us = self.side_to_move;
        let them = !us;
        let eksq = self.king_square(them);
        let to = m.to();
        let occ = self.occupied();
        let pt = self.piece_type_after(m);
        if m.is_drop() {
            return attacks::attacks(us, pt, to, occ.with(to)).contains(eksq);
        }
        let from = m.from();
        if attacks::attacks(us, pt, to, occ.without(from).with(to)).contains(eksq) {
            return true;
        }
        discoverers.contains(from) && !attacks::aligned(eksq, from, to)
    }

    /// The kind of piece on the destination of the legal move `m` once it is played.
    fn piece_type_after(&self, m: Move) -> PieceType {
        match m.drop_piece_type() {
            Some(pt) => pt,
            None => {
                let piece = self.board[m.from().index()].expect("a legal move has a piece on its origin square");
                if m.is_promotion() {
                    piece.piece_type().promote()
                } else {
                    piece.piece_type()
                }
            }
        }
    }
}

impl PartialEq for Position {
    /// Positions are equal when board, hands, side to move and move number are; history is ignored.
    fn eq(&self, other: &Position) -> bool {
        self.board == other.board
            && self.hands == other.hands
            && self.side_to_move == other.side_to_move
            && self.move_number == other.move_number
    }
}

impl Eq for Position {}

impl std::fmt::Debug for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Position({})", self.to_sfen())
    }
}
