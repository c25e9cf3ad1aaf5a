//! A bounded cache of evaluations keyed by position hash: direct-mapped (one slot per hash
//! bucket, newest wins), so memory is fixed and lookups are O(1).

use crate::evaluator::Evaluation;

/// Estimated bytes of one filled entry (the slot, priors of ~80 legal moves, the allocation):
/// what turns a memory budget into a capacity.
pub const EVAL_CACHE_ENTRY_BYTES: usize = 512;

pub struct EvalCache {
    slots: Vec<Option<(u64, Evaluation)>>,
    hits: u64,
    lookups: u64,
}

impl EvalCache {
    pub fn new(capacity: usize) -> EvalCache {
        EvalCache { slots: vec![None; capacity.max(1)], hits: 0, lookups: 0 }
    }

    #[inline]
    fn slot(&self, hash: u64) -> usize {
        ((hash as u128 * self.slots.len() as u128) >> 64) as usize
    }

    pub fn get(&mut self, hash: u64) -> Option<&Evaluation> {
        self.lookups += 1;
        let i = self.slot(hash);
        match &self.slots[i] {
            Some((h, e)) if *h == hash => {
                self.hits += 1;
                Some(e)
            }
            _ => None,
        }
    }

    pub fn insert(&mut self, hash: u64, evaluation: Evaluation) {
        let i = self.slot(hash);
        self.slots[i] = Some((hash, evaluation));
    }

    /// Drops every entry (the statistics stay): the evaluations of a replaced network are stale.
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|slot| *slot = None);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|slot| slot.is_some()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fraction of lookups that hit.
    pub fn hit_rate(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.hits as f64 / self.lookups as f64
        }
    }
}
