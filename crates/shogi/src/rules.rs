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
    /// The Try rule: once both kings have entered their promotion zones, the side that first
    /// brings its king safely to the enemy king's starting square (5a for Black, 5i for White)
    /// wins.
    Try,
    /// The Try rule without the condition on the kings (what some engines call TryRule): reaching
    /// the Try square wins wherever the other king stands.
    TryUnconditional,
    /// Jishōgi (持将棋) by agreement, with the professional count: as soon as both kings stand in
    /// their promotion zones the game is adjudicated; each side counts all its pieces on the board
    /// and in hand (king excluded), rook and bishop (promoted or not) 5, the others 1; a side with
    /// fewer than 24 points loses, otherwise the game is drawn.
    Agreement,
}

impl ImpasseRule {
    pub const ALL: [ImpasseRule; 6] = [
        ImpasseRule::Csa27,
        ImpasseRule::Jsa24,
        ImpasseRule::Try,
        ImpasseRule::TryUnconditional,
        ImpasseRule::Agreement,
        ImpasseRule::None,
    ];

    /// The option name (`--impasse`, configs, the engine's `ImpasseRule` option).
    pub const fn name(self) -> &'static str {
        match self {
            ImpasseRule::None => "none",
            ImpasseRule::Csa27 => "csa27",
            ImpasseRule::Jsa24 => "jsa24",
            ImpasseRule::Try => "try",
            ImpasseRule::TryUnconditional => "try-unconditional",
            ImpasseRule::Agreement => "jishogi",
        }
    }

    /// Reads an option name (case-insensitive; `27`, `24` and `agreement` are accepted too).
    pub fn from_name(name: &str) -> Option<ImpasseRule> {
        match name.trim().to_ascii_lowercase().as_str() {
            "27" => Some(ImpasseRule::Csa27),
            "24" => Some(ImpasseRule::Jsa24),
            "agreement" => Some(ImpasseRule::Agreement),
            lower => ImpasseRule::ALL.into_iter().find(|r| r.name() == lower),
        }
    }

    /// The accepted names, for error messages: `csa27, jsa24, try, try-unconditional, jishogi or none`.
    pub fn expected() -> String {
        let names: Vec<&str> = ImpasseRule::ALL.iter().map(|r| r.name()).collect();
        format!("{} or {}", names[..names.len() - 1].join(", "), names[names.len() - 1])
    }

    /// Whether a winning "declaration" under this rule is the king's move to its Try square.
    pub const fn is_try(self) -> bool {
        matches!(self, ImpasseRule::Try | ImpasseRule::TryUnconditional)
    }
}

impl std::str::FromStr for ImpasseRule {
    type Err = String;
    fn from_str(s: &str) -> Result<ImpasseRule, String> {
        ImpasseRule::from_name(s).ok_or_else(|| format!("impasse rule {s:?}: expected {}", ImpasseRule::expected()))
    }
}

/// What happens when the move limit is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MaxMovesRule {
    /// The game is drawn as soon as the limit is reached.
    Draw,
    /// The JSA rule: the game is drawn after the move at the limit, unless that move is a check;
    /// then it goes on while every move of the checking side is a check, and is drawn at the
    /// first move of the checking side that is not a check (or ends by mate, repetition, …).
    DrawAfterChecks,
}

impl MaxMovesRule {
    pub const ALL: [MaxMovesRule; 2] = [MaxMovesRule::Draw, MaxMovesRule::DrawAfterChecks];

    /// The option name: `draw` or `checks`.
    pub const fn name(self) -> &'static str {
        match self {
            MaxMovesRule::Draw => "draw",
            MaxMovesRule::DrawAfterChecks => "checks",
        }
    }

    /// Reads an option name (case-insensitive; `jsa` is accepted for `checks`).
    pub fn from_name(name: &str) -> Option<MaxMovesRule> {
        match name.trim().to_ascii_lowercase().as_str() {
            "draw" => Some(MaxMovesRule::Draw),
            "checks" | "jsa" => Some(MaxMovesRule::DrawAfterChecks),
            _ => None,
        }
    }
}

impl std::str::FromStr for MaxMovesRule {
    type Err = String;
    fn from_str(s: &str) -> Result<MaxMovesRule, String> {
        MaxMovesRule::from_name(s).ok_or_else(|| format!("move-limit rule {s:?}: expected draw or checks"))
    }
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
    /// Jishōgi by agreement (both kings entered): the side to move has 24 points or more and the
    /// opponent fewer, so the side to move wins.
    JishogiWin,
    /// Jishōgi by agreement: the side to move has fewer than 24 points and the opponent 24 or
    /// more, so the side to move loses.
    JishogiLoss,
    /// Jishōgi by agreement: drawn (both sides have 24 points or more, or both fewer).
    JishogiDraw,
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
            Status::JishogiWin => "jishogi_win",
            Status::JishogiLoss => "jishogi_loss",
            Status::JishogiDraw => "jishogi_draw",
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
    /// An impasse decided by points: a declaration (入玉宣言), won or drawn, or jishōgi (持将棋)
    /// by agreement.
    Declaration,
    /// The Try rule.
    Try,
    MaxMoves,
    TimeLoss,
    IllegalMove,
    /// A player could not go on (its engine crashed, closed its pipe or broke the protocol) and
    /// lost the game by forfeit.
    Forfeit,
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
            Status::JishogiWin => (Some(to_move), EndReason::Declaration),
            Status::JishogiLoss => (Some(!to_move), EndReason::Declaration),
            Status::JishogiDraw => (None, EndReason::Declaration),
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
        let all_checks = |parity: usize| {
            ((first + 1)..=now).filter(|j| (now - j) % 2 == parity).all(|j| states[j].checkers.is_nonempty())
        };
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

    /// The legal king move of the side to move to its Try square, if it has one (whether it wins
    /// depends on the rule: see [`Position::declaration`]).
    pub fn try_move(&self) -> Option<crate::mv::Move> {
        let us = self.side_to_move();
        let target = try_square(us);
        let m = crate::mv::Move::board(self.king_square(us), target, false);
        (crate::attacks::king_attacks(self.king_square(us)).contains(target) && self.is_legal(m)).then_some(m)
    }

    /// Whether `color`'s king stands in its promotion zone (the three ranks farthest from it).
    pub fn king_entered(&self, color: Color) -> bool {
        enemy_camp(color).contains(self.king_square(color))
    }

    /// Whether both kings stand in their promotion zones (the condition of the Try rule and of
    /// jishōgi by agreement).
    pub fn both_kings_entered(&self) -> bool {
        self.king_entered(Color::Black) && self.king_entered(Color::White)
    }

    /// Whether the side to move has lost by the opponent's Try under `impasse`: the opponent's
    /// king stands on its Try square and, under [`ImpasseRule::Try`], the side to move's king
    /// stands in its promotion zone too (both kings have entered).
    pub fn lost_by_try(&self, impasse: ImpasseRule) -> bool {
        let us = self.side_to_move();
        let tried = self.king_square(!us) == try_square(!us);
        match impasse {
            ImpasseRule::Try => tried && self.king_entered(us),
            ImpasseRule::TryUnconditional => tried,
            _ => false,
        }
    }

    /// Whether the game is over by the move limit under `rules` (see [`MaxMovesRule`]). Plies
    /// played are the SFEN move number − 1. Under the JSA rule the checking side's moves at the
    /// limit and after it are judged from the position's history; moves made before the position
    /// was set up (an SFEN with a high move number) are not known, and count as checks.
    pub fn move_limit_reached(&self, rules: &GameRules) -> bool {
        let plies = self.move_number().saturating_sub(1);
        if plies < rules.max_plies {
            return false;
        }
        match rules.max_moves_rule {
            MaxMovesRule::Draw => true,
            MaxMovesRule::DrawAfterChecks => {
                // State j was reached by ply root + j; it was reached by a check when its
                // checkers are non-empty. The checking side played plies limit, limit + 2, ….
                let states = self.states();
                let root = plies.saturating_sub(states.len() as u32 - 1);
                (rules.max_plies..=plies)
                    .step_by(2)
                    .filter(|&ply| ply >= root)
                    .any(|ply| states[(ply - root) as usize].checkers.is_empty())
            }
        }
    }

    /// Jishōgi points of `color` (the professional count): all its pieces on the board (king
    /// excluded) and in hand, rook and bishop (promoted or not) 5, the others 1.
    pub fn jishogi_points(&self, color: Color) -> u32 {
        let own = self.pieces_of(color);
        let big = own & (self.bishop_movers() | self.rook_movers());
        let small = own.and_not(big).and_not(self.pieces_of_type(PieceType::King));
        let hand = self.hand(color);
        let hand_big = hand.count(PieceType::Bishop) + hand.count(PieceType::Rook);
        5 * (big.count() + hand_big) + small.count() + hand.total() - hand_big
    }

    /// Under [`ImpasseRule::Agreement`]: once both kings have entered, the adjudicated result for
    /// the side to move (`JishogiWin`, `JishogiLoss` or `JishogiDraw`).
    pub fn jishogi(&self, impasse: ImpasseRule) -> Option<Status> {
        if impasse != ImpasseRule::Agreement || !self.both_kings_entered() {
            return None;
        }
        let us = self.side_to_move();
        let short = |c: Color| self.jishogi_points(c) < 24;
        Some(match (short(us), short(!us)) {
            (false, true) => Status::JishogiWin,
            (true, false) => Status::JishogiLoss,
            _ => Status::JishogiDraw,
        })
    }

    /// The game status for the side to move under `rules`.
    pub fn status(&self, rules: &GameRules) -> Status {
        if self.lost_by_try(rules.impasse) {
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
        if self.move_limit_reached(rules) {
            return Status::MaxMovesDraw;
        }
        if let Some(status) = self.jishogi(rules.impasse) {
            return status;
        }
        self.declaration(rules.impasse).unwrap_or(Status::Ongoing)
    }

    /// `DeclarationWin` or `DeclarationDraw` if the side to move may declare now under `impasse`
    /// (for the Try rules: has a legal king move to its Try square, and under
    /// [`ImpasseRule::Try`] the opponent's king stands in its promotion zone).
    pub fn declaration(&self, impasse: ImpasseRule) -> Option<Status> {
        match impasse {
            ImpasseRule::None | ImpasseRule::Agreement => None,
            ImpasseRule::Csa27 => {
                let needed = if self.side_to_move() == Color::Black { 28 } else { 27 };
                self.declaration_points().filter(|&p| p >= needed).map(|_| Status::DeclarationWin)
            }
            ImpasseRule::Jsa24 => match self.declaration_points() {
                Some(p) if p >= 31 => Some(Status::DeclarationWin),
                Some(p) if p >= 24 => Some(Status::DeclarationDraw),
                _ => None,
            },
            ImpasseRule::Try if !self.king_entered(!self.side_to_move()) => None,
            ImpasseRule::Try | ImpasseRule::TryUnconditional => self.try_move().map(|_| Status::DeclarationWin),
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
