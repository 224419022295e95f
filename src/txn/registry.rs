//! Transaction ids and the registry of transactions whose changes others
//! must not see yet.
//!
//! Every transaction takes a slot in a fixed array of atomic words, then
//! an id from a global counter, and stores the id in its slot. It leaves
//! the slot when its changes may become visible to transactions that start
//! later: for a `Sync` commit only once the commit is **durable** (a reader
//! never sees a commit that a crash could still take away), for `Write`
//! and `Lazy` commits and for rollbacks at once. A read view takes the
//! counter's value as its upper limit and collects the ids found in the
//! slots, with no lock: there is no transaction list under a global mutex,
//! neither for begin, nor for commit, nor for read-view creation.
//!
//! Invariants:
//! * R1. A slot is claimed with the sentinel [`ASSIGNING`] *before* the id
//!   is drawn from the counter, and holds the id until the transaction
//!   becomes visible. A view loads the counter first and scans second (all
//!   sequentially consistent), so a transaction with an id below the
//!   view's limit is either found in its slot, or still assigning (the
//!   scan waits for the id), or already visible.
//! * R2. Ids are unique and increase in the order they are drawn; id 0 is
//!   never used (it marks data written outside any transaction).
//! * R3. The scan covers slots below the high-water mark of slots ever
//!   claimed; a claim raises the mark before it writes the slot.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

use crate::{Error, Result};

/// A transaction id: unique, increasing in begin order, never 0.
pub type TrxId = u64;

/// Slot content while the owner is drawing its id.
pub const ASSIGNING: u64 = u64::MAX;
const FREE: u64 = 0;

/// The registry of transactions not yet visible to others.
#[derive(Debug)]
pub struct TrxRegistry {
    next_id: CachePadded<AtomicU64>,
    /// Slots, each on its own cache line: claimed and released by one
    /// transaction, read by view scans.
    slots: Box<[CachePadded<AtomicU64>]>,
    /// Slots below this index have been claimed at least once (R3).
    high_water: CachePadded<AtomicUsize>,
    /// Where the next claim starts looking (spreads claims).
    hint: CachePadded<AtomicUsize>,
}

/// A claimed slot. Dropping it without [`TrxSlot::release`] releases it
/// too (a transaction that ends by unwinding becomes "visible", which for
/// a transaction that changed nothing, or was rolled back, is correct).
#[derive(Debug)]
pub struct TrxSlot<'r> {
    reg: &'r TrxRegistry,
    index: usize,
    id: TrxId,
}

impl TrxSlot<'_> {
    /// The transaction's id.
    pub fn id(&self) -> TrxId {
        self.id
    }

    /// The transaction's changes may be seen by views created from now on.
    pub fn release(self) {}
}

impl Drop for TrxSlot<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.reg.slots.get(self.index) {
            s.store(FREE, Ordering::SeqCst);
        }
    }
}

impl TrxRegistry {
    /// A registry for at most `max_active` transactions at once, with ids
    /// starting after `last_id` (the highest id found at recovery).
    pub fn new(max_active: usize, last_id: TrxId) -> Self {
        TrxRegistry {
            next_id: CachePadded::new(AtomicU64::new(last_id + 1)),
            slots: (0..max_active.max(1))
                .map(|_| CachePadded::new(AtomicU64::new(FREE)))
                .collect(),
            high_water: CachePadded::new(AtomicUsize::new(0)),
            hint: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// The id the next transaction will get.
    pub fn next_id(&self) -> TrxId {
        self.next_id.load(Ordering::SeqCst)
    }

    /// Begin: claim a slot, then draw an id (R1).
    pub fn begin(&self) -> Result<TrxSlot<'_>> {
        let n = self.slots.len();
        let start = self.hint.fetch_add(1, Ordering::Relaxed) % n;
        for k in 0..n {
            let index = (start + k) % n;
            let Some(slot) = self.slots.get(index) else {
                continue;
            };
            if slot.load(Ordering::Relaxed) != FREE {
                continue;
            }
            // R3: raise the mark before the slot can hold anything.
            self.high_water.fetch_max(index + 1, Ordering::SeqCst);
            if slot
                .compare_exchange(FREE, ASSIGNING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                let id = self.next_id.fetch_add(1, Ordering::SeqCst);
                slot.store(id, Ordering::SeqCst);
                return Ok(TrxSlot {
                    reg: self,
                    index,
                    id,
                });
            }
        }
        Err(Error::LimitExceeded {
            what: "concurrent transactions",
            actual: n as u64 + 1,
            max: n as u64,
        })
    }

    /// The snapshot inputs of a read view: the id limit (ids at or above it
    /// began after the view) and the ids below it that are not visible yet
    /// (sorted). No lock is taken (R1, R3).
    pub fn snapshot(&self) -> (TrxId, Vec<TrxId>) {
        let limit = self.next_id.load(Ordering::SeqCst);
        let hw = self.high_water.load(Ordering::SeqCst);
        let mut ids = Vec::new();
        for slot in self.slots.iter().take(hw) {
            let mut v = slot.load(Ordering::SeqCst);
            while v == ASSIGNING {
                std::hint::spin_loop();
                v = slot.load(Ordering::SeqCst);
            }
            if v != FREE && v < limit {
                ids.push(v);
            }
        }
        ids.sort_unstable();
        (limit, ids)
    }
}
