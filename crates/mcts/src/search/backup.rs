//! Values into the tree: backing a leaf's value up the path, releasing abandoned walks, and the
//! exact values of nodes the rules (or a short mate search) decide.

use koma_shogi::rules::Repetition;
use koma_shogi::{Move, Position, Status};

use super::Search;
use crate::tree::NONE;

impl Search {
    /// The value of a new node if search should not look further: game over by the rules, the
    /// first repetition, a winning declaration, or a short mate for the side to move.
    pub(super) fn terminal_value(&mut self, pos: &mut Position) -> Option<i8> {
        if pos.lost_by_try(self.rules.impasse) {
            return Some(-1);
        }
        if self.moves.is_empty() {
            return Some(-1);
        }
        match pos.repetition(self.config.search_repetitions) {
            Repetition::None => {}
            Repetition::Draw => return Some(0),
            Repetition::OpponentPerpetualCheck => return Some(1),
            Repetition::OwnPerpetualCheck => return Some(-1),
        }
        if pos.move_limit_reached(&self.rules) {
            return Some(0);
        }
        if let Some(status) = pos.jishogi(self.rules.impasse) {
            return Some(match status {
                Status::JishogiWin => 1,
                Status::JishogiLoss => -1,
                _ => 0,
            });
        }
        if pos.declaration(self.rules.impasse) == Some(Status::DeclarationWin) {
            return Some(1);
        }
        self.short_mate(pos).map(|_| 1)
    }

    /// The first move of a mate by the side to move within `mate_plies` (none when 0).
    pub(super) fn short_mate(&self, pos: &mut Position) -> Option<Move> {
        match self.config.mate_plies {
            0 => None,
            1 | 2 => pos.mate_in_one(),
            _ => pos.mate_in_three(self.config.mate_max_positions),
        }
    }

    /// Adds a visit with `value` (for the side to move at `node`) to `node` and each ancestor,
    /// releasing the walk's virtual visit on each.
    pub(super) fn backup(&mut self, node: u32, value: f32, draw: f32) {
        let mut v = -value;
        let mut n = node;
        while n != NONE {
            let entry = &mut self.tree.nodes[n as usize];
            entry.visits += 1;
            entry.value_sum += v;
            entry.draw_sum += draw;
            entry.virtual_visits = entry.virtual_visits.saturating_sub(1);
            n = entry.parent;
            v = -v;
        }
    }

    /// Releases the virtual visits of an abandoned walk that ended at `node`.
    pub(super) fn revert_virtual_visits(&mut self, node: u32) {
        let mut n = node;
        while n != NONE {
            let entry = &mut self.tree.nodes[n as usize];
            entry.virtual_visits = entry.virtual_visits.saturating_sub(1);
            n = entry.parent;
        }
    }
}
