//! Game rules beyond legal moves: how a game ends. Everything that differs between real rule sets
//! (impasse scoring, the move limit, the Try rule) is configurable in [`GameRules`].

use crate::bitboard::Bitboard;
use crate::color::Color;
use crate::piece::PieceType;
use crate::position::Position;
use crate::square::Square;

/// How entering-king (impasse, 入玉) games are decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImpasseRule {
    /// No declaration; such games end by the move limit.
    None,
    /// The CSA rule of computer shogi: the side to move declares with its king in the enemy camp,
    /// at least 10 other pieces there, not in check, and 28 points (Black) or 27 (White), counting
    /// rook and bishop (promoted or not) as 5 and the rest as 1, in the camp and in hand.
    Csa27,
    /// The JSA amateur 24-point rule: same conditions, 31 points or more wins, 24–30 draws.
    Jsa24,
    /// The Try rule: a king that safely reaches the enemy king's starting square (5a for Black,
    /// 5i for White) wins at once.
    Try,
}

impl ImpasseRule {
    pub fn from_name(name: &str) -> Option<ImpasseRule> {
        match name {
            "none" => Some(ImpasseRule::None),
            "csa27" | "27" => Some(ImpasseRule::Csa27),
            "jsa24" | "24" => Some(ImpasseRule::Jsa24),
            "try" => Some(ImpasseRule::Try),
            _ => None,
        }
    }
}

/// What happens when the move limit is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MaxMovesRule {
    /// The game is drawn as soon as the limit is reached.
    Draw,
    /// JSA style: drawn at the limit, unless a series of consecutive checks is in progress, which
    /// plays on until it ends.
    DrawAfterChecks,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GameRules {
    /// Plies after which the game is drawn (512 for self-play; JSA uses 500 moves).
    pub max_plies: u32,
    pub max_moves_rule: MaxMovesRule,
    pub impasse: ImpasseRule,
    /// Occurrences of one position that end the game in sennichite (4 in every rule set).
    pub repetitions: u32,
}

impl Default for GameRules {
    fn default() -> GameRules {
        GameRules { max_plies: 512, max_moves_rule: MaxMovesRule::Draw, impasse: ImpasseRule::Csa27, repetitions: 4 }
    }
}

/// The state of a game, judged for the side to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Ongoing,
    /// The side to move has no legal move (checkmate, or the rare stalemate): it has lost.
    Checkmate,
    /// Sennichite: drawn.
    RepetitionDraw,
    /// Sennichite through the opponent's perpetual check: the side to move wins.
    PerpetualCheckWin,
    /// Sennichite through the side to move's own perpetual check: it loses.
    PerpetualCheckLoss,
    /// The side to move may declare and win under the impasse rule (or make the winning Try move).
    DeclarationWin,
    /// The side to move may declare a draw (24-point rule, 24–30 points).
    DeclarationDraw,
    /// The opponent's king has reached the Try square: the side to move has lost.
    TryLoss,
    /// The move limit is reached: drawn.
    MaxMovesDraw,
}

impl Status {
    /// The name used in `koma rules` output and records.
    pub const fn name(self) -> &'static str {
        match self {
            Status::Ongoing => "ongoing",
            Status::Checkmate => "checkmate",
            Status::RepetitionDraw => "repetition_draw",
            Status::PerpetualCheckWin => "perpetual_check_win",
            Status::PerpetualCheckLoss => "perpetual_check_loss",
            Status::DeclarationWin => "declaration_win",
            Status::DeclarationDraw => "declaration_draw",
            Status::TryLoss => "try_loss",
            Status::MaxMovesDraw => "max_moves_draw",
        }
    }

    /// Whether the game is over without any player action (declarations need one).
    pub const fn is_terminal(self) -> bool {
        !matches!(self, Status::Ongoing | Status::DeclarationWin | Status::DeclarationDraw)
    }
}

/// How a finished game ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndReason {
    Checkmate,
    Resignation,
    Repetition,
    PerpetualCheck,
    /// Impasse declaration (入玉宣言), won or drawn by points.
    Declaration,
    /// The Try rule.
    Try,
    MaxMoves,
    TimeLoss,
    IllegalMove,
    Abort,
}

/// The result of a game: the winner (`None` for a draw or an aborted game) and why it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GameResult {
    pub winner: Option<Color>,
    pub reason: EndReason,
}

impl GameResult {
    /// The result implied by a terminal status, `to_move` being the side to move in that position.
    pub fn from_status(status: Status, to_move: Color) -> Option<GameResult> {
        let (winner, reason) = match status {
            Status::Ongoing | Status::DeclarationWin | Status::DeclarationDraw => return None,
            Status::Checkmate => (Some(!to_move), EndReason::Checkmate),
            Status::RepetitionDraw => (None, EndReason::Repetition),
            Status::PerpetualCheckWin => (Some(to_move), EndReason::PerpetualCheck),
            Status::PerpetualCheckLoss => (Some(!to_move), EndReason::PerpetualCheck),
            Status::TryLoss => (Some(!to_move), EndReason::Try),
            Status::MaxMovesDraw => (None, EndReason::MaxMoves),
        };
        Some(GameResult { winner, reason })
    }
}

/// The result of sennichite detection for the current position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repetition {
    None,
    Draw,
    /// The opponent checked on every move of the cycle: the side to move wins.
    OpponentPerpetualCheck,
    /// The side to move checked on every move of the cycle: it loses.
    OwnPerpetualCheck,
}

/// The try square of `color`: the enemy king's starting square.
pub fn try_square(color: Color) -> Square {
    match color {
        Color::Black => Square::from_usi("5a").expect("valid"),
        Color::White => Square::from_usi("5i").expect("valid"),
    }
}

impl Position {
    /// How many times the current position (board, hands, side to move) has occurred in the
    /// history, counting itself, and the index in the state stack of its first occurrence.
    fn occurrences(&self) -> (u32, usize) {
        let states = self.states();
        let now = states.len() - 1;
        let hash = states[now].hash;
        let mut count = 1;
        let mut first = now;
        let mut i = now;
        while i >= 2 {
            i -= 2;
            if states[i].hash == hash {
                count += 1;
                first = i;
            }
        }
        (count, first)
    }

    /// Sennichite: whether the current position has occurred `repetitions` times, and whether one
    /// side checked on every one of its moves since the first occurrence.
    pub fn repetition(&self, repetitions: u32) -> Repetition {
        let (count, first) = self.occurrences();
        if count < repetitions {
            return Repetition::None;
        }
        let states = self.states();
        let now = states.len() - 1;
        // State j was reached by a check when its checkers are non-empty. The opponent made the
        // moves into states now, now-2, …; the side to move made now-1, now-3, ….
        let all_checks = |parity: usize| ((first + 1)..=now).filter(|j| (now - j) % 2 == parity).all(|j| states[j].checkers.is_nonempty());
        if all_checks(0) {
            Repetition::OpponentPerpetualCheck
        } else if all_checks(1) {
            Repetition::OwnPerpetualCheck
        } else {
            Repetition::Draw
        }
    }

    /// Impasse points of `color`: rook/bishop-class pieces 5, others 1, counting pieces in the
    /// enemy camp (king excluded) and in hand; also the number of pieces in the camp.
    pub fn impasse_points(&self, color: Color) -> (u32, u32) {
        let camp = enemy_camp(color);
        let own = self.pieces_of(color) & camp;
        let big = own & (self.bishop_movers() | self.rook_movers());
        let king = own & self.pieces_of_type(PieceType::King);
        let small = own.and_not(big).and_not(king);
        let hand = self.hand(color);
        let hand_big = hand.count(PieceType::Bishop) + hand.count(PieceType::Rook);
        let hand_small = hand.total() - hand_big;
        let points = 5 * (big.count() + hand_big) + small.count() + hand_small;
        (points, big.count() + small.count())
    }

    /// Whether the side to move meets the declaration conditions of the CSA and JSA rules, and its
    /// points.
    fn declaration_points(&self) -> Option<u32> {
        let us = self.side_to_move();
        if self.in_check() || !enemy_camp(us).contains(self.king_square(us)) {
            return None;
        }
        let (points, pieces_in_camp) = self.impasse_points(us);
        (pieces_in_camp >= 10).then_some(points)
    }

    /// Under the Try rule, the legal king move to the Try square, if the side to move has one.
    pub fn try_move(&self) -> Option<crate::mv::Move> {
        let us = self.side_to_move();
        let target = try_square(us);
        let m = crate::mv::Move::board(self.king_square(us), target, false);
        (crate::attacks::king_attacks(self.king_square(us)).contains(target) && self.is_legal(m)).then_some(m)
    }

    /// The game status for the side to move under `rules`.
    pub fn status(&self, rules: &GameRules) -> Status {
        let us = self.side_to_move();
        if rules.impasse == ImpasseRule::Try && self.king_square(!us) == try_square(!us) {
            return Status::TryLoss;
        }
        if !self.has_legal_move() {
            return Status::Checkmate;
        }
        match self.repetition(rules.repetitions) {
            Repetition::None => {}
            Repetition::Draw => return Status::RepetitionDraw,
            Repetition::OpponentPerpetualCheck => return Status::PerpetualCheckWin,
            Repetition::OwnPerpetualCheck => return Status::PerpetualCheckLoss,
        }
        let plies = self.move_number() - 1;
        if plies >= rules.max_plies && !(rules.max_moves_rule == MaxMovesRule::DrawAfterChecks && self.in_check()) {
            return Status::MaxMovesDraw;
        }
        self.declaration(rules.impasse).unwrap_or(Status::Ongoing)
    }

    /// `DeclarationWin` or `DeclarationDraw` if the side to move may declare now under `impasse`
    /// (for the Try rule: has a legal king move to its Try square).
    pub fn declaration(&self, impasse: ImpasseRule) -> Option<Status> {
        match impasse {
            ImpasseRule::None => None,
            ImpasseRule::Csa27 => {
                let needed = if self.side_to_move() == Color::Black { 28 } else { 27 };
                self.declaration_points().filter(|&p| p >= needed).map(|_| Status::DeclarationWin)
            }
            ImpasseRule::Jsa24 => match self.declaration_points() {
                Some(p) if p >= 31 => Some(Status::DeclarationWin),
                Some(p) if p >= 24 => Some(Status::DeclarationDraw),
                _ => None,
            },
            ImpasseRule::Try => self.try_move().map(|_| Status::DeclarationWin),
        }
    }
}

/// The three ranks farthest from `color`.
fn enemy_camp(color: Color) -> Bitboard {
    match color {
        Color::Black => Bitboard::rank(0) | Bitboard::rank(1) | Bitboard::rank(2),
        Color::White => Bitboard::rank(6) | Bitboard::rank(7) | Bitboard::rank(8),
    }
}
