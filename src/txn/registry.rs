//! Transaction ids and the registry of transactions whose changes others
//! must not see yet.
//!
//! Every transaction takes a slot in a fixed array of atomic words, then
//! an id from a global counter, and stores the id in its slot. It leaves
//! the slot when its changes may become visible to transactions that start
//! later: for a `Sync` commit only once the commit is **durable** (a reader
//! never sees a commit that a crash could still take away), for `Write`
//! and `Lazy` commits (once any `Sync` commit they built on is durable,
//! R7) and for rollbacks at once. A read view takes the
//! counter's value as its upper limit and collects the ids found in the
//! slots, with no lock: there is no transaction list under a global mutex,
//! neither for begin, nor for commit, nor for read-view creation.
//!
//! Invariants:
//! * R5. Visibility follows commit order. With early lock release a
//!   transaction can read and build on a commit that is not durable yet
//!   (its commit LSN is lower). A `Sync` commit counts as visible once the
//!   log is durable to its commit LSN (not when its thread gets round to
//!   leaving its slot), so a view that sees a later commit sees every
//!   earlier one it may depend on. The commit LSN is published in the
//!   slot before the row locks are released.
//! * R7. A `Write` or `Lazy` commit is visible at once, but never before
//!   a `Sync` commit it built on (R5 for the other direction): a write or
//!   locking read of a row whose newest version a `Sync` commit made that
//!   is not durable yet notes that commit's LSN
//!   ([`TrxRegistry::undurable_commit`]), and the `Write`/`Lazy` commit
//!   waits until the log is durable to it before it publishes its own
//!   commit. Only such transactions pay (a scan of the slots per write).
//! * R6. A view's snapshot is atomic with respect to visibility changes
//!   (a slot released, an immediate commit published): they happen inside
//!   a seqlock (a global epoch, odd while changing), and a snapshot that
//!   overlapped one is retried. It loads the durable LSN, then the id
//!   counter, then scans, so a transaction that some visible commit
//!   depends on began before the counter was read.
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
//! * R4. Purge bound. Beside each slot sits the *view low* of the read
//!   view its transaction holds (0: none): a lower bound of the ids the
//!   view may not see. [`TrxRegistry::purge_bound`] is the minimum of the
//!   oldest id still in a slot (or the counter) and every view low; undo
//!   of a transaction below it is needed by no view, now or later. A view
//!   publishes a provisional low first (the last bound purge used, which
//!   is below every id any new view can hide, since the oldest id in the
//!   slots only grows), then takes its snapshot, then raises its low to
//!   the snapshot's oldest hidden id. So purge either sees the provisional
//!   low, or computed its bound before the view's snapshot (and then the
//!   view hides nothing below that bound). The view lows are scanned
//!   after the slots, up to the high-water mark loaded after the slot scan
//!   (a view in a slot claimed during the scan can hide a transaction the
//!   scan found gone).
//! * R8. The slot array (id and commit state) and the view-low array have
//!   one entry per slot, and a slot index (from [`TrxRegistry::begin`], or [`SlotToken::index`]) is
//!   below their length: indexed directly, so a bad index panics instead
//!   of silently not publishing a commit or a view low.
//! * R9. A claimed slot holds its owner's id from the draw until the
//!   owner releases it (its [`TrxSlot`] drops, or its [`SlotToken`] goes
//!   to [`TrxRegistry::release`]), and nobody else writes it; a commit LSN is
//!   nonzero and below [`IMMEDIATE`] (0 means "not committed", the top bit
//!   is the flag).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

use crate::{Error, Result};

/// A transaction id: unique, increasing in begin order, never 0.
pub type TrxId = u64;

/// Slot content while the owner is drawing its id.
pub const ASSIGNING: u64 = u64::MAX;
/// Flag in a slot's commit state: a `Write`/`Lazy` commit, visible at once.
pub const IMMEDIATE: u64 = 1 << 63;
const FREE: u64 = 0;

/// One slot of the registry: the id of the transaction holding it (or
/// [`FREE`] / [`ASSIGNING`]) and its commit state (R5: 0 while not
/// committed, else the commit LSN, with [`IMMEDIATE`] set for
/// `Write`/`Lazy` commits). Slots are dense, four to a cache line, not
/// one per line: every statement's read view scans them all up to the
/// high-water mark, while a transaction writes its own a few times in
/// its life, so the scan's bytes are what cost. Padded, two arrays of
/// 128-byte entries made a view over 1,024 claimed slots read 256 KiB
/// (`TrxRegistry::snapshot_at` grew from 0.5% to 3% of the server's
/// time between 64 and 1,024 connections); dense, it reads 16 KiB.
/// PostgreSQL made the same trade for its snapshot arrays.
#[derive(Debug)]
#[repr(C, align(16))]
struct Slot {
    id: AtomicU64,
    commit: AtomicU64,
}

/// The registry of transactions not yet visible to others.
#[derive(Debug)]
pub struct TrxRegistry {
    next_id: CachePadded<AtomicU64>,
    /// Slots: the id each holds and its commit state side by side, in
    /// one dense array that every read view scans (see [`Slot`]).
    slots: Box<[Slot]>,
    /// View lows, one per slot (R4); 0: no view.
    view_lows: Box<[CachePadded<AtomicU64>]>,
    /// Seqlock over visibility changes (R6): odd while one is under way.
    epoch: CachePadded<AtomicU64>,
    /// The last purge bound handed out (R4).
    purged_upto: CachePadded<AtomicU64>,
    /// Slots below this index have been claimed at least once (R3).
    high_water: CachePadded<AtomicUsize>,
    /// Where the next claim starts looking (spreads claims over the
    /// first [`CLAIM_WINDOW`] slots).
    hint: CachePadded<AtomicUsize>,
}

/// Claims start at a rotating slot among the first this many, and go
/// beyond them only when all are taken. Rotation spreads concurrent
/// claims over distinct cache lines ([`spread`]: many cores do not fight
/// over slot 0's line); the window keeps the high-water mark, and so the
/// slots every read view scans, at the peak concurrency rounded up to the
/// window instead of the registry's size: rotating over all 4,096 default
/// slots made each statement's view scan 4,096 cache lines of slots.
pub const CLAIM_WINDOW: usize = 256;

/// Slots that share a 64-byte cache line.
const SLOTS_PER_LINE: usize = 64 / std::mem::size_of::<Slot>();

/// The `h`-th claim's first slot in the window: successive claims start
/// on successive cache lines, and only after every line has been a start
/// does a line's next slot come up (a permutation of the window).
fn spread(h: usize) -> usize {
    let lines = CLAIM_WINDOW / SLOTS_PER_LINE;
    (h % lines) * SLOTS_PER_LINE + (h / lines) % SLOTS_PER_LINE
}

/// A claimed slot, not tied to a borrow of the registry: what a
/// transaction that owns its database handle (and so cannot borrow the
/// registry inside itself) keeps. Its holder ends it with exactly one of
/// [`TrxRegistry::release`] (the transaction's changes may become visible,
/// R6) or [`SlotToken::abandon`] (they never may: a commit whose sync
/// failed, a rollback that could not finish). Dropping it otherwise is a
/// bug that leaves the slot claimed for good (R9); it is logged, and
/// asserted in debug builds unless the thread is already panicking.
#[derive(Debug)]
#[must_use = "a slot must be released or abandoned"]
pub struct SlotToken {
    index: usize,
    id: TrxId,
    /// A commit was published: releasing the slot changes what views see.
    committed: std::cell::Cell<bool>,
}

impl SlotToken {
    /// The transaction's id.
    pub fn id(&self) -> TrxId {
        self.id
    }

    /// Index of the slot (for [`TrxRegistry::publish_view_low`]).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Keep the slot claimed for the life of the process: the
    /// transaction's changes never become visible to anybody (until
    /// recovery at the next open deals with them).
    pub fn abandon(self) {
        std::mem::forget(self);
    }
}

impl Drop for SlotToken {
    fn drop(&mut self) {
        tracing::error!(
            slot = self.index,
            trx = self.id,
            "registry R9: a slot token was dropped without release or abandon"
        );
        debug_assert!(
            std::thread::panicking(),
            "registry R9: slot {} (transaction {}) dropped without release or abandon",
            self.index,
            self.id
        );
    }
}

/// A claimed slot borrowed from its registry, released when dropped. A
/// transaction that ends by unwinding becomes "visible", which for a
/// transaction that changed nothing, or was rolled back, is correct.
#[derive(Debug)]
pub struct TrxSlot<'r> {
    reg: &'r TrxRegistry,
    /// `None` only once detached or dropped.
    token: Option<SlotToken>,
}

impl std::ops::Deref for TrxSlot<'_> {
    type Target = SlotToken;

    fn deref(&self) -> &SlotToken {
        match &self.token {
            Some(t) => t,
            // The token leaves only in `detach` and `drop`, which consume.
            None => unreachable!("registry R9: a live TrxSlot without its token"),
        }
    }
}

impl TrxSlot<'_> {
    /// The transaction's changes may be seen by views created from now on.
    #[cfg(test)]
    pub fn release(self) {}

    /// The slot as a token its holder releases itself.
    pub fn detach(mut self) -> SlotToken {
        match self.token.take() {
            Some(t) => t,
            None => unreachable!("registry R9: a live TrxSlot without its token"),
        }
    }
}

impl Drop for TrxSlot<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.token.take() {
            self.reg.release(t);
        }
    }
}

impl TrxRegistry {
    // R8: the two per-slot arrays share one length and `i` is a slot
    // index handed out by `begin`.
    #[allow(clippy::indexing_slicing)]
    fn slot(&self, i: usize) -> &AtomicU64 {
        &self.slots[i].id
    }

    #[allow(clippy::indexing_slicing)] // R8
    fn view_low_of(&self, i: usize) -> &AtomicU64 {
        &self.view_lows[i]
    }

    #[allow(clippy::indexing_slicing)] // R8
    fn commit_state(&self, i: usize) -> &AtomicU64 {
        &self.slots[i].commit
    }

    /// A registry for at most `max_active` transactions at once, with ids
    /// starting after `last_id` (the highest id found at recovery).
    pub fn new(max_active: usize, last_id: TrxId) -> Self {
        TrxRegistry {
            next_id: CachePadded::new(AtomicU64::new(last_id + 1)),
            slots: (0..max_active.max(1))
                .map(|_| Slot {
                    id: AtomicU64::new(FREE),
                    commit: AtomicU64::new(0),
                })
                .collect(),
            view_lows: (0..max_active.max(1))
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            epoch: CachePadded::new(AtomicU64::new(0)),
            purged_upto: CachePadded::new(AtomicU64::new(0)),
            high_water: CachePadded::new(AtomicUsize::new(0)),
            hint: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// Begin: claim a slot, then draw an id (R1); released when the
    /// returned slot drops.
    pub fn begin(&self) -> Result<TrxSlot<'_>> {
        Ok(TrxSlot {
            reg: self,
            token: Some(self.begin_token()?),
        })
    }

    /// [`TrxRegistry::begin`] for a holder that releases the slot itself
    /// ([`TrxRegistry::release`] or [`SlotToken::abandon`]).
    pub fn begin_token(&self) -> Result<SlotToken> {
        let n = self.slots.len();
        let h = self.hint.fetch_add(1, Ordering::Relaxed);
        let start = if n >= CLAIM_WINDOW { spread(h) } else { h % n };
        for k in 0..n {
            let index = (start + k) % n;
            let slot = self.slot(index); // R8: `% n`
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
                // R2: never 0 (ids start at `last_id + 1`), and never a
                // slot sentinel. The slot is freed before the panic: left
                // ASSIGNING, every scan would spin on it forever.
                if id == FREE || id == ASSIGNING {
                    slot.store(FREE, Ordering::SeqCst);
                    #[allow(clippy::panic)] // R2: ids ran out, or a bug
                    {
                        panic!("registry R2: drew id {id:#x}, a slot sentinel");
                    }
                }
                slot.store(id, Ordering::SeqCst);
                return Ok(SlotToken {
                    index,
                    id,
                    committed: std::cell::Cell::new(false),
                });
            }
        }
        Err(Error::LimitExceeded {
            what: "concurrent transactions",
            actual: n as u64 + 1,
            max: n as u64,
        })
    }

    /// Record the commit LSN of the transaction holding `slot` (R5),
    /// before its row locks are released. `immediate` (a `Write` or `Lazy`
    /// commit) makes it visible to views created from now on; otherwise it
    /// becomes visible once the log is durable to `lsn`, or when the slot
    /// is released.
    pub fn set_committed(&self, slot: &SlotToken, lsn: u64, immediate: bool) {
        assert!(
            lsn != 0 && lsn & IMMEDIATE == 0,
            "registry R9: commit LSN {lsn:#x} collides with the commit-state encoding"
        );
        let v = if immediate { lsn | IMMEDIATE } else { lsn };
        slot.committed.set(true);
        let c = self.commit_state(slot.index);
        if immediate {
            self.epoch.fetch_add(1, Ordering::SeqCst);
            c.store(v, Ordering::SeqCst);
            self.epoch.fetch_add(1, Ordering::SeqCst);
        } else {
            c.store(v, Ordering::SeqCst);
        }
    }

    /// Release `slot`: the transaction's changes may be seen by views
    /// created from now on (R6), and its view low is withdrawn (R4).
    pub fn release(&self, slot: SlotToken) {
        let (index, id, change) = (slot.index, slot.id, slot.committed.get());
        std::mem::forget(slot); // released here, not leaked
        self.view_low_of(index).store(0, Ordering::SeqCst);
        // A visibility change (R6): views taken meanwhile retry. A
        // transaction that committed nothing (read-only, or rolled back)
        // changes nothing any view could see, and skips the epoch.
        if change {
            self.epoch.fetch_add(1, Ordering::SeqCst);
        }
        self.commit_state(index).store(0, Ordering::SeqCst);
        let held = self.slot(index).swap(FREE, Ordering::SeqCst);
        if change {
            self.epoch.fetch_add(1, Ordering::SeqCst);
        }
        // After the epoch is even again (a panic inside the seqlock would
        // make every snapshot spin forever).
        assert_eq!(held, id, "registry R9: slot {index} held another id");
    }

    /// Publish the view low of the transaction in slot `index` (R4); 0
    /// withdraws it.
    pub fn publish_view_low(&self, index: usize, low: TrxId) {
        self.view_low_of(index).store(low, Ordering::SeqCst);
    }

    /// The view low published for slot `index` (0: none).
    pub fn view_low(&self, index: usize) -> TrxId {
        self.view_low_of(index).load(Ordering::SeqCst)
    }

    /// The id the next transaction will draw: every transaction that has
    /// drawn one so far is below it (a wait for those to end is a wait
    /// for [`TrxRegistry::purge_bound`] to reach it).
    pub fn id_limit(&self) -> TrxId {
        self.next_id.load(Ordering::SeqCst)
    }

    /// The last bound [`TrxRegistry::purge_bound`] returned: the
    /// provisional view low of R4.
    pub fn purged_upto(&self) -> TrxId {
        self.purged_upto.load(Ordering::SeqCst)
    }

    /// Transactions with ids below the returned bound are visible to every
    /// read view, present and future (R4); records it as the provisional
    /// low for new views. The scan needs no atomic snapshot (it takes the
    /// oldest id in any slot, committed or not, which only grows), so it
    /// never retries: under heavy oversubscription a seqlock reader that
    /// is descheduled mid-scan would retry for as long as commits go on.
    pub fn purge_bound(&self) -> TrxId {
        self.purge_bound_with(|| {})
    }

    /// [`TrxRegistry::purge_bound`], running `after_limit` once the id
    /// limit and the slot high-water mark are loaded and before the slots
    /// are scanned (tests interleave other threads' steps there).
    fn purge_bound_with(&self, after_limit: impl FnOnce()) -> TrxId {
        let limit = self.next_id.load(Ordering::SeqCst);
        let hw = self.high_water.load(Ordering::SeqCst);
        after_limit();
        let mut bound = limit;
        for slot in self.slots.iter().take(hw).map(|s| &s.id) {
            let mut v = slot.load(Ordering::SeqCst);
            while v == ASSIGNING {
                std::hint::spin_loop();
                v = slot.load(Ordering::SeqCst);
            }
            if v != FREE && v < bound {
                bound = v;
            }
        }
        // The view lows are scanned up to the high-water mark as it is
        // *now*, not as it was before the slot scan (R4): a transaction
        // that claimed a new slot meanwhile cannot have drawn an id below
        // `limit` (R3), but its view may hide one that left its slot
        // before the scan above reached it, and that view's low is all
        // that keeps the hidden transaction's undo.
        let hw = self.high_water.load(Ordering::SeqCst);
        for l in self.view_lows.iter().take(hw) {
            let v = l.load(Ordering::SeqCst);
            if v != 0 {
                bound = bound.min(v);
            }
        }
        self.purged_upto
            .fetch_max(bound, Ordering::SeqCst)
            .max(bound)
    }

    /// Transactions holding a slot now (active, or committed and waiting
    /// to become visible).
    pub fn active(&self) -> usize {
        let hw = self.high_water.load(Ordering::SeqCst);
        self.slots
            .iter()
            .take(hw)
            .filter(|s| s.id.load(Ordering::Relaxed) != FREE)
            .count()
    }

    /// The commit LSN of transaction `trx` if it is a `Sync` commit not yet
    /// durable (its LSN above `durable`) and still in its slot, else 0
    /// (R7). Scans the slots; for `Write`/`Lazy` transactions only.
    pub fn undurable_commit(&self, trx: TrxId, durable: u64) -> u64 {
        let hw = self.high_water.load(Ordering::SeqCst);
        for Slot { id: slot, commit } in self.slots.iter().take(hw) {
            if slot.load(Ordering::SeqCst) != trx {
                continue;
            }
            let c = commit.load(Ordering::SeqCst);
            // Read the id again: the slot may have been left and reused
            // between the two loads.
            if slot.load(Ordering::SeqCst) == trx && c & IMMEDIATE == 0 && c > durable {
                return c;
            }
            return 0;
        }
        0
    }

    /// The snapshot inputs of a read view: the id limit (ids at or above it
    /// began after the view) and the ids below it that are not visible yet
    /// (sorted). No lock is taken (R1, R3). Views use
    /// [`TrxRegistry::snapshot_at`]; this is for tests.
    #[cfg(test)]
    pub fn snapshot(&self) -> (TrxId, Vec<TrxId>) {
        self.snapshot_at(&|| 0)
    }

    /// [`TrxRegistry::snapshot`] for a log durable to `durable()`: a
    /// committed transaction still in its slot counts as visible when its
    /// commit is immediate or its commit LSN is durable (R5); the snapshot
    /// is retried until no visibility change overlapped it (R6).
    pub fn snapshot_at(&self, durable: &dyn Fn() -> u64) -> (TrxId, Vec<TrxId>) {
        let mut spins = 0u32;
        loop {
            let e1 = self.epoch.load(Ordering::SeqCst);
            if !e1.is_multiple_of(2) {
                spins += 1;
                if spins.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            let d = durable();
            let limit = self.next_id.load(Ordering::SeqCst);
            let hw = self.high_water.load(Ordering::SeqCst);
            let mut ids = Vec::new();
            for Slot { id: slot, commit } in self.slots.iter().take(hw) {
                let mut v = slot.load(Ordering::SeqCst);
                while v == ASSIGNING {
                    std::hint::spin_loop();
                    v = slot.load(Ordering::SeqCst);
                }
                if v == FREE || v >= limit {
                    continue;
                }
                let c = commit.load(Ordering::SeqCst);
                let visible = c != 0 && (c & IMMEDIATE != 0 || c <= d);
                if !visible {
                    ids.push(v);
                }
            }
            if self.epoch.load(Ordering::SeqCst) == e1 {
                ids.sort_unstable();
                return (limit, ids);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::ReadView;

    #[test]
    fn claims_start_on_successive_lines_and_cover_the_window() {
        let starts: Vec<usize> = (0..CLAIM_WINDOW).map(spread).collect();
        let mut sorted = starts.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..CLAIM_WINDOW).collect::<Vec<_>>());
        for w in starts.windows(2) {
            assert_ne!(w[0] / SLOTS_PER_LINE, w[1] / SLOTS_PER_LINE);
        }
        assert_eq!(SLOTS_PER_LINE, 4);
    }

    /// Claims stay within the window while it has room, so views scan
    /// only that much however many transactions have come and gone; past
    /// it they still find every free slot.
    #[test]
    fn claims_keep_the_high_water_mark_in_the_window() {
        let reg = TrxRegistry::new(4 * CLAIM_WINDOW, 0);
        for _ in 0..10 * CLAIM_WINDOW {
            let t = reg.begin_token().unwrap();
            reg.release(t);
        }
        assert!(reg.high_water.load(Ordering::SeqCst) <= CLAIM_WINDOW);
        let held: Vec<_> = (0..CLAIM_WINDOW + 3)
            .map(|_| reg.begin_token().unwrap())
            .collect();
        assert_eq!(reg.high_water.load(Ordering::SeqCst), CLAIM_WINDOW + 3);
        for t in held {
            reg.release(t);
        }
    }

    /// T1's building block: a token hands its slot back only through
    /// `release`; an abandoned one stays claimed, so its transaction is
    /// hidden from every later view.
    #[test]
    fn a_released_token_frees_its_slot_and_an_abandoned_one_keeps_it() {
        let reg = TrxRegistry::new(4, 0);
        let t = reg.begin_token().unwrap();
        assert_eq!(reg.active(), 1);
        reg.set_committed(&t, 100, false);
        reg.release(t);
        assert_eq!(reg.active(), 0);
        let t = reg.begin_token().unwrap();
        let id = t.id();
        t.abandon();
        assert_eq!(reg.active(), 1);
        let (limit, hidden) = reg.snapshot();
        assert!(limit > id && hidden.contains(&id), "{limit} {hidden:?}");
        // A borrowed slot detached into a token is the same slot.
        let s = reg.begin().unwrap();
        let (index, id) = (s.index(), s.id());
        let t = s.detach();
        assert_eq!((t.index(), t.id()), (index, id));
        assert_eq!(reg.active(), 2);
        reg.release(t);
        assert_eq!(reg.active(), 1);
    }

    /// Dropping a token without release or abandon is a bug (R9): loud in
    /// debug builds.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "registry R9")]
    fn a_token_dropped_without_release_is_a_bug() {
        let reg = TrxRegistry::new(2, 0);
        let _t = reg.begin_token().unwrap();
    }

    /// R4 with a view made in a slot claimed while purge scans: the view
    /// hides a transaction that leaves its slot before the scan reaches
    /// it, so only the view's low keeps that transaction's undo. Purge
    /// loaded the high-water mark before the new slot was claimed; the
    /// view lows must be scanned up to the mark as it is afterwards.
    #[test]
    fn a_view_in_a_slot_claimed_during_the_purge_scan_holds_the_bound() {
        let reg = TrxRegistry::new(8, 0);
        let old = reg.begin().unwrap(); // slot 0, id 1
        let old_id = old.id();
        let mut reader = None;
        let bound = reg.purge_bound_with(|| {
            let r = reg.begin().unwrap(); // slot 1: raises the mark
            let view = ReadView::open(&reg, &r, &|| 0);
            assert!(!view.sees(old_id));
            drop(old); // visible to views made from now on
            reader = Some((r, view));
        });
        let (r, view) = reader.unwrap();
        assert!(!view.sees(old_id));
        assert!(
            bound <= old_id,
            "purge bound {bound} passes transaction {old_id}, which a live view hides"
        );
        // Once the reader is gone, purge may pass it.
        drop((r, view));
        assert!(reg.purge_bound() > old_id);
    }
}
