//! A fixed-capacity move list on the stack. 600 slots: the most legal moves known in a shogi
//! position is 593.

use std::mem::MaybeUninit;
use std::ops::Deref;

use crate::mv::Move;

pub const MAX_MOVES: usize = 600;

pub struct MoveList {
    moves: [MaybeUninit<Move>; MAX_MOVES],
    len: usize,
}

impl MoveList {
    #[inline]
    pub fn new() -> MoveList {
        MoveList { moves: [MaybeUninit::uninit(); MAX_MOVES], len: 0 }
    }

    #[inline]
    pub(crate) fn push(&mut self, m: Move) {
        debug_assert!(self.len < MAX_MOVES);
        // Legal positions never exceed 593 moves; the bound check keeps a bug from corrupting memory.
        if let Some(slot) = self.moves.get_mut(self.len) {
            slot.write(m);
            self.len += 1;
        }
    }

    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    #[inline]
    pub fn as_slice(&self) -> &[Move] {
        // SAFETY: the first `len` slots were written by `push`.
        unsafe { std::slice::from_raw_parts(self.moves.as_ptr() as *const Move, self.len) }
    }
}

impl Default for MoveList {
    fn default() -> MoveList {
        MoveList::new()
    }
}

impl Deref for MoveList {
    type Target = [Move];
    #[inline]
    fn deref(&self) -> &[Move] {
        self.as_slice()
    }
}

impl std::fmt::Debug for MoveList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}
