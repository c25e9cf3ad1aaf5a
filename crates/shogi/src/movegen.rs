//! Legal move generation. Moves are generated legal directly (pins, evasions, king safety, nifu,
//! uchifuzume, dead squares), never as pseudo-legal moves filtered afterwards. All legal moves are
//! produced, including the rarely useful non-promotions of pawns, bishops and rooks, because
//! published perft counts and the dlshogi move labels include them.

use crate::attacks::{self, between, line};
use crate::bitboard::Bitboard;
use crate::color::Color;
use crate::movelist::MoveList;
use crate::mv::Move;
use crate::piece::PieceType;
use crate::position::Position;
use crate::square::Square;

/// The far rank(s) of `color` where a dropped or unpromoted piece could never move again.
#[inline]
fn last_ranks(color: Color, count: u8) -> Bitboard {
    let mut bb = Bitboard::EMPTY;
    for i in 0..count {
        bb |= Bitboard::rank(if color == Color::Black { i } else { 8 - i });
    }
    bb
}

/// Pushes the promoting and/or non-promoting versions of a board move.
#[inline]
pub(crate) fn push_board_move(list: &mut MoveList, us: Color, pt: PieceType, from: Square, to: Square) {
    match pt {
        PieceType::Pawn | PieceType::Lance => {
            let rr = to.relative_rank(us);
            if rr < 3 {
                list.push(Move::board(from, to, true));
            }
            if rr != 0 {
                list.push(Move::board(from, to, false));
            }
        }
        PieceType::Knight => {
            let rr = to.relative_rank(us);
            if rr < 3 {
                list.push(Move::board(from, to, true));
            }
            if rr >= 2 {
                list.push(Move::board(from, to, false));
            }
        }
        PieceType::Silver | PieceType::Bishop | PieceType::Rook => {
            if to.in_promotion_zone(us) || from.in_promotion_zone(us) {
                list.push(Move::board(from, to, true));
            }
            list.push(Move::board(from, to, false));
        }
        _ => list.push(Move::board(from, to, false)),
    }
}

impl Position {
    /// All legal moves of the side to move.
    pub fn legal_moves(&self) -> MoveList {
        let mut list = MoveList::new();
        self.generate_legal(&mut list);
        list
    }

    /// Fills `list` with all legal moves of the side to move.
    pub fn generate_legal(&self, list: &mut MoveList) {
        list.clear();
        let us = self.side_to_move();
        let checkers = self.checkers();
        self.generate_king_moves(list, !self.pieces_of(us));
        if checkers.is_empty() {
            self.generate_piece_moves(list, !self.pieces_of(us), Bitboard::ALL);
            self.generate_drops(list, !self.occupied());
        } else if !checkers.more_than_one() {
            let checker = checkers.first().expect("one checker");
            let block = between(self.king_square(us), checker);
            self.generate_piece_moves(list, block.with(checker), Bitboard::ALL);
            self.generate_drops(list, block);
        }
    }

    /// Fills `list` with the legal captures of the side to move, promoting or not, for the
    /// quiescence search of a material player. Out of check only: in check every evasion
    /// matters, captures or not, so this yields all legal moves there.
    pub fn generate_captures(&self, list: &mut MoveList) {
        if self.in_check() {
            self.generate_legal(list);
            return;
        }
        list.clear();
        let them = self.pieces_of(!self.side_to_move());
        self.generate_king_moves(list, them);
        self.generate_piece_moves(list, them, Bitboard::ALL);
    }

    /// Whether the side to move has any legal move (false means it has lost).
    pub fn has_legal_move(&self) -> bool {
        let mut list = MoveList::new();
        self.generate_king_moves(&mut list, !self.pieces_of(self.side_to_move()));
        if !list.is_empty() {
            return true;
        }
        self.generate_legal(&mut list);
        !list.is_empty()
    }

    /// King moves onto `target` squares (never onto its own pieces) that leave it unattacked.
    fn generate_king_moves(&self, list: &mut MoveList, target: Bitboard) {
        let us = self.side_to_move();
        let ksq = self.king_square(us);
        let occ = self.occupied().without(ksq);
        for to in attacks::king_attacks(ksq) & target & !self.pieces_of(us) {
            if !self.is_attacked_by(!us, to, occ) {
                list.push(Move::board(ksq, to, false));
            }
        }
    }

    /// Moves of every piece but the king among `movers` onto `target` squares, respecting pins.
    pub(crate) fn generate_piece_moves(&self, list: &mut MoveList, target: Bitboard, movers: Bitboard) {
        let us = self.side_to_move();
        let ksq = self.king_square(us);
        let occ = self.occupied();
        let pinned = self.pinned();
        let own = self.pieces_of(us) & movers;

        // Pawns: unpinned ones all at once by shifting the set one rank forward.
        let pawns = self.pieces(us, PieceType::Pawn) & movers;
        let free = (pawns & !pinned).0;
        let pushed = Bitboard(if us == Color::Black { free >> 1 } else { free << 1 }) & target;
        for to in pushed {
            let from =
                Square::from_index_unchecked(if us == Color::Black { to.index() + 1 } else { to.index() - 1 } as u8);
            push_board_move(list, us, PieceType::Pawn, from, to);
        }
        for from in pawns & pinned {
            for to in attacks::pawn_attacks(us, from) & target & line(ksq, from) {
                push_board_move(list, us, PieceType::Pawn, from, to);
            }
        }

        let mut each = |pt: PieceType, pieces: Bitboard, attack: &dyn Fn(Square) -> Bitboard| {
            for from in pieces {
                let mut tos = attack(from) & target;
                if pinned.contains(from) {
                    tos &= line(ksq, from);
                }
                for to in tos {
                    push_board_move(list, us, pt, from, to);
                }
            }
        };
        each(PieceType::Lance, self.pieces(us, PieceType::Lance) & movers, &|from| {
            attacks::lance_attacks(us, from, occ)
        });
        each(PieceType::Knight, self.pieces(us, PieceType::Knight) & movers, &|from| attacks::knight_attacks(us, from));
        each(PieceType::Silver, self.pieces(us, PieceType::Silver) & movers, &|from| attacks::silver_attacks(us, from));
        each(PieceType::Gold, self.gold_movers() & own, &|from| attacks::gold_attacks(us, from));
        each(PieceType::Bishop, self.pieces(us, PieceType::Bishop) & movers, &|from| {
            attacks::bishop_attacks(from, occ)
        });
        each(PieceType::Rook, self.pieces(us, PieceType::Rook) & movers, &|from| attacks::rook_attacks(from, occ));
        each(PieceType::Horse, self.pieces(us, PieceType::Horse) & movers, &|from| attacks::horse_attacks(from, occ));
        each(PieceType::Dragon, self.pieces(us, PieceType::Dragon) & movers, &|from| {
            attacks::dragon_attacks(from, occ)
        });
    }

    /// Drops from hand onto `target` (empty) squares.
    pub(crate) fn generate_drops(&self, list: &mut MoveList, target: Bitboard) {
        let us = self.side_to_move();
        let hand = self.hand(us);
        if hand.is_empty() || target.is_empty() {
            return;
        }
        if hand.has(PieceType::Pawn) {
            let mut squares = target & !last_ranks(us, 1);
            for pawn in self.pieces(us, PieceType::Pawn) {
                squares &= !Bitboard::file(pawn.file_index());
            }
            let mate_square = attacks::pawn_attacks(!us, self.king_square(!us));
            if let Some(sq) = (squares & mate_square).first() {
                if self.pawn_drop_mates(sq) {
                    squares = squares.without(sq);
                }
            }
            for to in squares {
                list.push(Move::drop(PieceType::Pawn, to));
            }
        }
        if hand.has(PieceType::Lance) {
            for to in target & !last_ranks(us, 1) {
                list.push(Move::drop(PieceType::Lance, to));
            }
        }
        if hand.has(PieceType::Knight) {
            for to in target & !last_ranks(us, 2) {
                list.push(Move::drop(PieceType::Knight, to));
            }
        }
        let mut others = [PieceType::Silver; 4];
        let mut n = 0;
        for pt in [PieceType::Silver, PieceType::Gold, PieceType::Bishop, PieceType::Rook] {
            if hand.has(pt) {
                others[n] = pt;
                n += 1;
            }
        }
        for to in target {
            for &pt in &others[..n] {
                list.push(Move::drop(pt, to));
            }
        }
    }

    /// Legal moves of the side to move that give check.
    ///
    /// Out of check, only moves that could check are generated: board moves and drops onto a
    /// square from which some piece attacks the enemy king (a superset of each kind's checking
    /// squares), and every move of the pieces that can uncover a check. Each is then tested with
    /// `gives_check`. A slider that moves along its line to the king away from it cannot land on a
    /// checking square it did not already check from, so the king's lines through the current
    /// board bound the direct checks. In check (rare for the attacker), the evasions are
    /// filtered.
    pub fn checking_moves(&self) -> Vec<Move> {
        let discoverers = self.discovered_check_candidates();
        let mut list = MoveList::new();
        if self.in_check() {
            self.generate_legal(&mut list);
        } else {
            let us = self.side_to_move();
            let eksq = self.king_square(!us);
            let occ = self.occupied();
            let near = attacks::king_attacks(eksq)
                | attacks::knight_attacks(!us, eksq)
                | attacks::rook_attacks(eksq, occ)
                | attacks::bishop_attacks(eksq, occ);
            self.generate_piece_moves(&mut list, near & !self.pieces_of(us), Bitboard::ALL);
            // Moves that uncover a check from squares that do not check directly.
            self.generate_piece_moves(&mut list, !near & !self.pieces_of(us), discoverers);
            if discoverers.contains(self.king_square(us)) {
                self.generate_king_moves(&mut list, !self.pieces_of(us));
            }
            self.generate_drops(&mut list, near & !occ);
        }
        list.iter().copied().filter(|&m| self.gives_check_with(m, discoverers)).collect()
    }

    /// A move that checkmates at once, if the side to move has one (pawn-drop mates are illegal
    /// and so never returned).
    pub fn mate_in_one(&mut self) -> Option<Move> {
        let candidates = self.checking_moves();
        for m in candidates {
            if self.king_escapes_after(m) {
                continue;
            }
            self.do_move(m);
            let mated = !self.has_legal_move();
            self.undo_move();
            if mated {
                return Some(m);
            }
        }
        None
    }

    /// A move that mates within three plies (a check after which every evasion allows a mate in
    /// one), if the side to move has one and it is found within `max_positions` evasions tried.
    /// Lines through a repeated position count as no mate, so a returned move never relies on
    /// sennichite or perpetual check. Pawn-drop mates are illegal and never used.
    pub fn mate_in_three(&mut self, max_positions: u32) -> Option<Move> {
        let checks = self.checking_moves();
        for &m in &checks {
            if self.king_escapes_after(m) {
                continue;
            }
            self.do_move(m);
            let mated = !self.has_legal_move();
            self.undo_move();
            if mated {
                return Some(m);
            }
        }
        let mut tried = 0u32;
        for m in checks {
            self.do_move(m);
            let forced = self.repetition(2) == crate::rules::Repetition::None
                && self.every_evasion_allows_mate(&mut tried, max_positions);
            self.undo_move();
            if forced {
                return Some(m);
            }
            if tried >= max_positions {
                return None;
            }
        }
        None
    }

    /// Whether the side to move (in check, with a legal move) is mated in one after each evasion.
    fn every_evasion_allows_mate(&mut self, tried: &mut u32, max_positions: u32) -> bool {
        for e in self.legal_moves().iter().copied() {
            *tried += 1;
            if *tried > max_positions {
                return false;
            }
            self.do_move(e);
            let mated = self.repetition(2) == crate::rules::Repetition::None && self.mate_in_one().is_some();
            self.undo_move();
            if !mated {
                return false;
            }
        }
        true
    }
}
