//! Row locks: shared and exclusive locks on byte-string keys (a table id
//! and a primary key, encoded by the caller), with FIFO waiting, deadlock
//! detection and a lock-wait timeout.
//!
//! The table is sharded by key hash; a shard's mutex is held only while a
//! request or a release updates that key's entry, never while anyone
//! waits. A key is hashed once per request or release: the same hash picks
//! the shard (its middle bits) and the slot within it. Waits-for edges
//! live in one small graph under its own mutex, touched only when a
//! request has to wait, when a wait ends, and when a release finds
//! waiters; a release nobody waits for takes only its key's shard, so
//! commits on different keys share no lock. No lock of this module is
//! ever held across a commit's wait for durability.
//!
//! Invariants:
//! * L1. Holders of one key are compatible: any number of shared holders,
//!   or exactly one exclusive holder (which may also hold it shared).
//! * L2. A new request is granted at once only if it is compatible with
//!   every holder and nobody is queued (FIFO, no starvation); a holder's
//!   upgrade from shared to exclusive jumps the queue when it is the only
//!   holder.
//! * L3. Lock order: a shard's mutex, then the graph's mutex; never the
//!   reverse, and never two shards.
//! * L4. A request that would wait checks the waits-for graph for a cycle
//!   back to itself first; if there is one the requester is the victim
//!   and gets [`Error::Deadlock`] (retryable), having changed nothing.
//!   Edges are refreshed on every release of a key with waiters (a
//!   waiter's edges point at its own key's holders, and that key's queue
//!   holds the waiter), so a stale edge can delay
//!   detection (the timeout still ends the wait) but never invents a
//!   cycle that does not exist at the moment of the check.
//! * L5. A waiter is granted at most once, only while queued, and only by
//!   `wake` under its key's shard lock; a waiter that timed out leaves the
//!   queue under the same lock, so it is either granted or removed, never
//!   both and never neither.
//! * L6. After `wake`, a non-empty queue has a holder in front of it: a
//!   waiter never waits on a key nobody holds (it would sleep until its
//!   timeout for nothing).
//! * L7. A key's entry exists exactly while it has holders or waiters.
//!   Releasing a key that has no entry is not an error (a caller that
//!   lists a key twice releases it once).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, Ordering};

use hashbrown::HashTable;
use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;

use super::registry::TrxId;
use crate::{Error, Result};

/// Lock strength.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Shared (readers): compatible with other shared locks.
    Shared,
    /// Exclusive (writers): compatible with nothing of other transactions.
    Exclusive,
}

#[derive(Debug)]
struct Waiter {
    trx: TrxId,
    mode: LockMode,
    state: Mutex<Option<bool>>, // Some(true) granted
    cv: Condvar,
}

/// A key's holders and waiters. Most keys have one holder and no
/// waiter, so the holder is kept inline: an uncontended lock allocates
/// nothing (the queue allocates only when someone waits).
#[derive(Debug, Default)]
struct Entry {
    holders: SmallVec<[(TrxId, LockMode); 1]>,
    queue: VecDeque<Arc<Waiter>>,
}

impl Entry {
    fn compatible(&self, trx: TrxId, mode: LockMode) -> bool {
        self.holders
            .iter()
            .all(|&(t, m)| t == trx || (mode == LockMode::Shared && m == LockMode::Shared))
    }

    fn holds(&self, trx: TrxId, mode: LockMode) -> bool {
        self.holders
            .iter()
            .any(|&(t, m)| t == trx && (m == LockMode::Exclusive || mode == LockMode::Shared))
    }

    fn grant(&mut self, trx: TrxId, mode: LockMode) {
        // L1: both callers check compatibility first.
        debug_assert!(
            self.compatible(trx, mode),
            "lock L1: trx {trx} granted {mode:?} against {:?}",
            self.holders
        );
        if let Some(h) = self.holders.iter_mut().find(|(t, _)| *t == trx) {
            if mode == LockMode::Exclusive {
                h.1 = LockMode::Exclusive;
            }
        } else {
            self.holders.push((trx, mode));
        }
    }

    /// The holders `trx` would wait for.
    fn blockers(&self, trx: TrxId, mode: LockMode) -> Vec<TrxId> {
        self.holders
            .iter()
            .filter(|&&(t, m)| {
                t != trx && (mode == LockMode::Exclusive || m == LockMode::Exclusive)
            })
            .map(|&(t, _)| t)
            .collect()
    }
}

/// Bytes kept inline in a [`KeyBytes`]: a row lock's name is a table
/// id, a separator and the primary key (18 bytes for one `BIGINT`
/// column), so common keys are built, kept by their transaction and
/// stored in the table without allocating.
pub const INLINE_KEY: usize = 32;

/// A lock key's bytes (inline up to [`INLINE_KEY`] bytes).
pub type KeyBytes = SmallVec<[u8; INLINE_KEY]>;

/// A key with its hash under one lock table ([`LockTable::key`]): a
/// transaction keeps its locked keys so, and its lock and its release
/// of a key hash it once between them.
#[derive(Clone, Debug)]
pub struct LockKey {
    hash: u64,
    bytes: KeyBytes,
}

/// One shard of the lock table: (key, its holders and queue), found by the
/// key's hash under the table's [`RandomState`]. Keys come from clients'
/// rows, so the hash is the standard library's SipHash, which resists keys
/// chosen to collide (foldhash, which the page hash uses, is cheaper but
/// only minimally resistant). It is not cheap: about 240 instructions for
/// a 20-byte key, 2.5% of a bulk load's per row, so a transaction hashes
/// each key once for its lock and its release ([`LockKey`]).
type Shard = Mutex<HashTable<(KeyBytes, Entry)>>;

/// What a granted request changed for its transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// It held no lock on the key before: releasing the key undoes
    /// exactly this request.
    New,
    /// It already held the key (in this mode, or shared before an
    /// upgrade to exclusive).
    Held,
}

/// Counters for `quill status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LockStats {
    /// Requests that had to wait.
    pub waits: u64,
    /// Deadlocks detected (victims told to retry).
    pub deadlocks: u64,
    /// Waits that timed out.
    pub timeouts: u64,
}

/// How often a cancelable lock wait looks at its cancel flag.
pub const CANCEL_POLL: Duration = Duration::from_millis(20);

/// What ends a lock wait besides a grant, a deadlock and the table's lock
/// wait timeout ([`LockTable::lock_cancelable`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitLimits<'a> {
    /// Set by a client: the wait ends with [`Error::Canceled`] soon after
    /// (it is looked at every [`CANCEL_POLL`]).
    pub cancel: Option<&'a AtomicBool>,
    /// A statement's time is up then: the wait ends with
    /// [`Error::Canceled`] (or at the lock wait timeout if that comes
    /// first).
    pub stop_at: Option<Instant>,
    /// The caller's own lock wait timeout, in place of the table's: a
    /// wait this long ends with [`Error::LockWaitLimit`].
    pub timeout: Option<Duration>,
}

/// The lock table.
#[derive(Debug)]
pub struct LockTable {
    /// Keys' hashes (one random key per table).
    hasher: RandomState,
    shards: Box<[CachePadded<Shard>]>,
    graph: Mutex<HashMap<TrxId, Vec<TrxId>>>,
    stats: Mutex<LockStats>,
    timeout: Duration,
}

impl LockTable {
    /// A lock table whose waits give up after `timeout`.
    pub fn new(timeout: Duration) -> LockTable {
        let n = (crate::stats::cores() * 16).next_power_of_two();
        LockTable {
            hasher: RandomState::new(),
            shards: (0..n)
                .map(|_| CachePadded::new(Mutex::new(HashTable::new())))
                .collect(),
            graph: Mutex::new(HashMap::new()),
            stats: Mutex::new(LockStats::default()),
            timeout,
        }
    }

    /// `key`'s hash, for its shard and its slot in the shard.
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard of a key hashing to `h`. It takes bits 32 and up (below
    /// the 2^10 shards of 64 cores, far below the top 7 bits the table
    /// keeps as tags), so the keys of one shard still differ in the low
    /// bits that pick their slot.
    #[allow(clippy::indexing_slicing)] // the mask keeps the index in range
    fn shard(&self, h: u64) -> &Shard {
        &self.shards[((h >> 32) as usize) & (self.shards.len() - 1)]
    }

    /// The rehash of a stored key (when a shard grows).
    fn rehasher(&self) -> impl Fn(&(KeyBytes, Entry)) -> u64 + '_ {
        |(k, _)| self.hash(k)
    }

    /// Whether `from` reaches `to` in the waits-for graph.
    fn reaches(graph: &HashMap<TrxId, Vec<TrxId>>, from: &[TrxId], to: TrxId) -> bool {
        let mut seen = HashSet::new();
        let mut stack: Vec<TrxId> = from.to_vec();
        while let Some(t) = stack.pop() {
            if t == to {
                return true;
            }
            if seen.insert(t)
                && let Some(next) = graph.get(&t)
            {
                stack.extend(next.iter().copied());
            }
        }
        false
    }

    /// `bytes` as a key of this table, hashed once for its lock and its
    /// release.
    pub fn key(&self, bytes: KeyBytes) -> LockKey {
        LockKey {
            hash: self.hash(&bytes),
            bytes,
        }
    }

    /// Lock `key` for `trx` in `mode`, waiting if needed (L2, L4). The
    /// caller remembers its keys and passes them to [`LockTable::release`].
    pub fn lock(&self, trx: TrxId, key: &LockKey, mode: LockMode) -> Result<Acquired> {
        self.lock_cancelable(trx, key, mode, WaitLimits::default())
    }

    /// [`LockTable::lock`] within the caller's `limits`; the request
    /// then leaves the queue as a timed-out one does.
    pub fn lock_cancelable(
        &self,
        trx: TrxId,
        key: &LockKey,
        mode: LockMode,
        limits: WaitLimits<'_>,
    ) -> Result<Acquired> {
        debug_assert_eq!(key.hash, self.hash(&key.bytes), "a key of another table");
        self.acquire(trx, key.hash, &key.bytes, mode, limits)
    }

    /// [`LockTable::lock_cancelable`] of `key`, whose hash is `h`.
    fn acquire(
        &self,
        trx: TrxId,
        h: u64,
        key: &[u8],
        mode: LockMode,
        limits: WaitLimits<'_>,
    ) -> Result<Acquired> {
        let WaitLimits {
            cancel,
            stop_at,
            timeout,
        } = limits;
        let (waiter, acquired) = {
            let mut shard = self.shard(h).lock();
            let e = match shard.entry(h, |(k, _)| k.as_slice() == key, self.rehasher()) {
                hashbrown::hash_table::Entry::Occupied(o) => &mut o.into_mut().1,
                hashbrown::hash_table::Entry::Vacant(v) => {
                    // L7: nobody holds or waits for it: granted at once.
                    v.insert((KeyBytes::from_slice(key), Entry::default()))
                        .into_mut()
                        .1
                        .grant(trx, mode);
                    return Ok(Acquired::New);
                }
            };
            if e.holds(trx, mode) {
                return Ok(Acquired::Held);
            }
            let upgrade = e.holders.iter().any(|&(t, _)| t == trx);
            let acquired = if upgrade {
                Acquired::Held
            } else {
                Acquired::New
            };
            if e.compatible(trx, mode) && (e.queue.is_empty() || upgrade) {
                e.grant(trx, mode);
                return Ok(acquired);
            }
            // W1: a thread that must not block gets WouldWait here,
            // before it queues, having changed nothing (as a victim, L4).
            // The entry stays: it has holders or waiters (L7).
            crate::wait::check("a row lock")?;
            let blockers = e.blockers(trx, mode);
            {
                let mut g = self.graph.lock();
                if Self::reaches(&g, &blockers, trx) {
                    drop(g);
                    self.stats.lock().deadlocks += 1;
                    return Err(Error::Deadlock { trx });
                }
                g.insert(trx, blockers);
            }
            let w = Arc::new(Waiter {
                trx,
                mode,
                state: Mutex::new(None),
                cv: Condvar::new(),
            });
            if upgrade {
                e.queue.push_front(w.clone());
            } else {
                e.queue.push_back(w.clone());
            }
            (w, acquired)
        };
        self.stats.lock().waits += 1;
        let started = Instant::now();
        let deadline = started + timeout.unwrap_or(self.timeout);
        let mut canceled = false;
        {
            let mut st = waiter.state.lock();
            while st.is_none() {
                let now = Instant::now();
                if cancel.is_some_and(|c| c.load(Ordering::Acquire))
                    || stop_at.is_some_and(|s| now >= s)
                {
                    canceled = true;
                    break;
                }
                let mut until = match cancel {
                    Some(_) => deadline.min(now + CANCEL_POLL),
                    None => deadline,
                };
                if let Some(s) = stop_at {
                    until = until.min(s);
                }
                if waiter.cv.wait_until(&mut st, until).timed_out() && until == deadline {
                    break;
                }
            }
            if *st == Some(true) {
                return Ok(acquired);
            }
        }
        // Timed out: leave the queue unless granted in the meantime.
        let mut shard = self.shard(h).lock();
        if *waiter.state.lock() == Some(true) {
            return Ok(acquired);
        }
        // L5/L7: not granted (checked under this shard lock), so still
        // queued, so the entry exists.
        match shard.find_entry(h, |(k, _)| k.as_slice() == key) {
            Ok(mut o) => {
                let e = &mut o.get_mut().1;
                let queued = e.queue.len();
                e.queue.retain(|w| !Arc::ptr_eq(w, &waiter));
                assert_eq!(
                    e.queue.len() + 1,
                    queued,
                    "lock L5: a timed-out waiter of trx {trx} was not queued once"
                );
                Self::settle(o, &self.graph);
            }
            #[allow(clippy::panic)] // L7: a queued waiter keeps its entry
            Err(_) => panic!("lock L7: trx {trx} timed out waiting on a key with no entry"),
        }
        self.graph.lock().remove(&trx);
        if canceled {
            return Err(Error::Canceled { trx });
        }
        self.stats.lock().timeouts += 1;
        let waited_ms = started.elapsed().as_millis() as u64;
        Err(match timeout {
            Some(_) => Error::LockWaitLimit { trx, waited_ms },
            None => Error::LockTimeout { trx, waited_ms },
        })
    }

    /// After a key lost a holder or a waiter: [`Self::wake`] its queue,
    /// then drop its entry if nobody holds or waits for it any more (L7).
    fn settle(
        mut o: hashbrown::hash_table::OccupiedEntry<'_, (KeyBytes, Entry)>,
        graph: &Mutex<HashMap<TrxId, Vec<TrxId>>>,
    ) {
        let e = &mut o.get_mut().1;
        Self::wake(e, graph);
        if e.holders.is_empty() && e.queue.is_empty() {
            o.remove();
        }
    }

    /// Grant queued requests that have become compatible, in order, and
    /// refresh the edges of those still waiting (L4).
    fn wake(e: &mut Entry, graph: &Mutex<HashMap<TrxId, Vec<TrxId>>>) {
        if e.queue.is_empty() {
            // Nobody to grant and no edges to refresh: the graph's lock
            // (one for the whole table) stays off a release's path.
            return;
        }
        let mut g = graph.lock();
        while let Some(w) = e.queue.pop_front() {
            if !e.compatible(w.trx, w.mode) {
                e.queue.push_front(w); // FIFO (L2): it stays first
                break;
            }
            e.grant(w.trx, w.mode);
            g.remove(&w.trx);
            let before = w.state.lock().replace(true);
            assert!(before.is_none(), "lock L5: trx {} granted twice", w.trx);
            w.cv.notify_one();
        }
        // L6: the loop grants every compatible waiter at the front, and
        // anything is compatible with no holders.
        assert!(
            e.queue.is_empty() || !e.holders.is_empty(),
            "lock L6: waiters queued on a key nobody holds"
        );
        for w in &e.queue {
            let b = e.blockers(w.trx, w.mode);
            g.insert(w.trx, b);
        }
    }

    /// Release `trx`'s locks on `keys` (at commit or rollback, or those a
    /// refused call took, wait W5).
    pub fn release(&self, trx: TrxId, keys: &[LockKey]) {
        for key in keys {
            debug_assert_eq!(key.hash, self.hash(&key.bytes), "a key of another table");
            let mut shard = self.shard(key.hash).lock();
            // No entry: a key listed twice was released already (L7).
            if let Ok(mut o) = shard.find_entry(key.hash, |(k, _)| k[..] == key.bytes[..]) {
                o.get_mut().1.holders.retain(|h| h.0 != trx);
                Self::settle(o, &self.graph);
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> LockStats {
        self.stats.lock().clone()
    }

    /// Keys with an entry, over every shard (L7: those held or waited for).
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering};

    fn key_of(t: &LockTable, bytes: &[u8]) -> LockKey {
        t.key(KeyBytes::from_slice(bytes))
    }

    fn table(ms: u64) -> Arc<LockTable> {
        Arc::new(LockTable::new(Duration::from_millis(ms)))
    }

    #[test]
    fn shared_is_shared_exclusive_excludes() {
        let t = table(50);
        t.lock(1, &key_of(&t, b"a"), LockMode::Shared).unwrap();
        t.lock(2, &key_of(&t, b"a"), LockMode::Shared).unwrap();
        assert!(matches!(
            t.lock(3, &key_of(&t, b"a"), LockMode::Exclusive),
            Err(Error::LockTimeout { .. })
        ));
        t.release(1, &[key_of(&t, b"a")]);
        t.release(2, &[key_of(&t, b"a")]);
        let a = key_of(&t, b"a");
        assert_eq!(t.lock(3, &a, LockMode::Exclusive).unwrap(), Acquired::New);
        // Already stronger.
        assert_eq!(t.lock(3, &a, LockMode::Shared).unwrap(), Acquired::Held);
        assert!(matches!(
            t.lock(4, &key_of(&t, b"a"), LockMode::Shared),
            Err(Error::LockTimeout { .. })
        ));
        assert_eq!(t.stats().timeouts, 2);
    }

    /// Keys kept inline and keys too long for it (on the heap) lock
    /// alike: keys differing only in their last byte, inline or not, are
    /// different keys, and each conflicts with itself; nothing is left
    /// after release (L7).
    #[test]
    fn inline_and_heap_keys_lock_alike() {
        let t = table(50);
        for len in [
            1,
            INLINE_KEY - 1,
            INLINE_KEY,
            INLINE_KEY + 1,
            3 * INLINE_KEY,
        ] {
            let a = vec![7u8; len];
            let mut b = a.clone();
            if let Some(last) = b.last_mut() {
                *last = 8;
            }
            let (ka, kb) = (key_of(&t, &a), key_of(&t, &b));
            assert_eq!(ka.bytes.spilled(), len > INLINE_KEY, "{len} bytes");
            t.lock(1, &ka, LockMode::Exclusive).unwrap();
            t.lock(2, &kb, LockMode::Exclusive).unwrap();
            assert!(
                matches!(
                    t.lock(2, &key_of(&t, &a), LockMode::Shared),
                    Err(Error::LockTimeout { .. })
                ),
                "{len} bytes"
            );
            t.release(1, std::slice::from_ref(&ka));
            t.lock(2, &ka, LockMode::Exclusive).unwrap();
            t.release(2, &[ka, kb]);
            assert_eq!(t.entries(), 0, "lock L7: {len}-byte keys left entries");
        }
    }

    /// Enough keys to make every shard's table grow and rehash: each is
    /// found again to be released (the rehash used the same hash), and
    /// no entry is left (L7); a second transaction then gets them all.
    #[test]
    fn many_keys_are_found_again_after_the_shards_grow() {
        let t = table(50);
        let keys: Vec<LockKey> = (0u32..20_000)
            .map(|i| key_of(&t, &i.to_be_bytes()))
            .collect();
        for k in &keys {
            t.lock(1, k, LockMode::Exclusive).unwrap();
        }
        assert_eq!(t.entries(), keys.len());
        for k in keys.iter().step_by(997) {
            assert!(matches!(
                t.lock(2, k, LockMode::Shared),
                Err(Error::LockTimeout { .. })
            ));
        }
        t.release(1, &keys);
        assert_eq!(t.entries(), 0, "lock L7: entries left after release");
        for k in &keys {
            t.lock(2, k, LockMode::Exclusive).unwrap();
        }
        t.release(2, &keys);
        assert_eq!(t.entries(), 0);
    }

    /// W1: a request refused for waiting changes nothing: the holder's
    /// entry stays, and its release then removes it (L7).
    #[test]
    fn a_refused_wait_leaves_the_holders_entry() {
        let t = table(50);
        t.lock(1, &key_of(&t, b"k"), LockMode::Exclusive).unwrap();
        let (r, refused) =
            crate::wait::without_waiting(|| t.lock(2, &key_of(&t, b"k"), LockMode::Shared));
        assert!(
            refused && matches!(r, Err(Error::WouldWait { .. })),
            "{r:?}"
        );
        assert_eq!(t.entries(), 1);
        assert_eq!(t.stats().waits, 0);
        t.release(1, &[key_of(&t, b"k")]);
        assert_eq!(t.entries(), 0);
        t.lock(2, &key_of(&t, b"k"), LockMode::Shared).unwrap();
    }

    #[test]
    fn upgrade_when_alone() {
        let t = table(50);
        let k = key_of(&t, b"k");
        assert_eq!(t.lock(1, &k, LockMode::Shared).unwrap(), Acquired::New);
        assert_eq!(t.lock(1, &k, LockMode::Exclusive).unwrap(), Acquired::Held);
        assert!(matches!(
            t.lock(2, &key_of(&t, b"k"), LockMode::Shared),
            Err(Error::LockTimeout { .. })
        ));
    }

    #[test]
    fn waiter_is_granted_on_release() {
        let t = table(5000);
        t.lock(1, &key_of(&t, b"k"), LockMode::Exclusive).unwrap();
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.lock(2, &key_of(&t2, b"k"), LockMode::Exclusive));
        std::thread::sleep(Duration::from_millis(20));
        t.release(1, &[key_of(&t, b"k")]);
        assert_eq!(h.join().unwrap().unwrap(), Acquired::New);
        assert_eq!(t.stats().waits, 1);
    }

    #[test]
    fn two_way_deadlock_is_detected() {
        let t = table(10_000);
        t.lock(1, &key_of(&t, b"a"), LockMode::Exclusive).unwrap();
        t.lock(2, &key_of(&t, b"b"), LockMode::Exclusive).unwrap();
        let t1 = t.clone();
        let h = std::thread::spawn(move || t1.lock(1, &key_of(&t1, b"b"), LockMode::Exclusive));
        // Wait until trx 1 is queued on b.
        while t.stats().waits == 0 {
            std::thread::yield_now();
        }
        let r = t.lock(2, &key_of(&t, b"a"), LockMode::Exclusive);
        assert!(matches!(r, Err(Error::Deadlock { trx: 2 })), "{r:?}");
        assert!(r.unwrap_err().is_retryable());
        // The victim rolls back: its locks go, trx 1 proceeds.
        t.release(2, &[key_of(&t, b"b")]);
        h.join().unwrap().unwrap();
        assert_eq!(t.stats().deadlocks, 1);
    }

    /// A canceled wait ends soon with `Canceled`, leaves the queue, and
    /// counts as no timeout; the key is then free for others.
    #[test]
    fn a_canceled_wait_leaves_the_queue() {
        let t = table(10_000);
        t.lock(1, &key_of(&t, b"a"), LockMode::Exclusive).unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        let (t1, f1) = (t.clone(), flag.clone());
        let h = std::thread::spawn(move || {
            let started = Instant::now();
            let limits = WaitLimits {
                cancel: Some(&f1),
                ..WaitLimits::default()
            };
            let r = t1.lock_cancelable(2, &key_of(&t1, b"a"), LockMode::Exclusive, limits);
            (r, started.elapsed())
        });
        while t.stats().waits == 0 {
            std::thread::yield_now();
        }
        flag.store(true, Ordering::Release);
        let (r, waited) = h.join().unwrap();
        assert!(matches!(r, Err(Error::Canceled { trx: 2 })), "{r:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        assert_eq!(t.stats().timeouts, 0);
        t.release(1, &[key_of(&t, b"a")]);
        t.lock(3, &key_of(&t, b"a"), LockMode::Exclusive).unwrap();
    }

    /// A wait whose statement's time runs out (`stop_at`) ends then with
    /// `Canceled`, before the lock wait timeout, leaves the queue, and
    /// counts as no timeout; one past its time already ends at once.
    #[test]
    fn a_wait_past_its_stop_time_ends_canceled() {
        let t = table(10_000);
        t.lock(1, &key_of(&t, b"a"), LockMode::Exclusive).unwrap();
        let started = Instant::now();
        let stop = started + Duration::from_millis(150);
        let stop_at = |at| WaitLimits {
            stop_at: Some(at),
            ..WaitLimits::default()
        };
        let r = t.lock_cancelable(2, &key_of(&t, b"a"), LockMode::Exclusive, stop_at(stop));
        let waited = started.elapsed();
        assert!(matches!(r, Err(Error::Canceled { trx: 2 })), "{r:?}");
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        assert_eq!(t.stats().timeouts, 0);
        let r = t.lock_cancelable(3, &key_of(&t, b"a"), LockMode::Exclusive, stop_at(started));
        assert!(matches!(r, Err(Error::Canceled { trx: 3 })), "{r:?}");
        t.release(1, &[key_of(&t, b"a")]);
        // Free now: granted at once, whatever the stop time.
        t.lock_cancelable(4, &key_of(&t, b"a"), LockMode::Exclusive, stop_at(started))
            .unwrap();
    }

    /// A wait with a limit of its own (a server's `lock_timeout`) ends
    /// then with `LockWaitLimit`, not retryable, in place of the table's
    /// timeout (shorter or longer), and leaves the queue.
    #[test]
    fn a_wait_with_its_own_limit_ends_at_it() {
        let t = table(300);
        t.lock(1, &key_of(&t, b"a"), LockMode::Exclusive).unwrap();
        let limit = |ms| WaitLimits {
            timeout: Some(Duration::from_millis(ms)),
            ..WaitLimits::default()
        };
        for (trx, ms) in [(2, 100), (3, 600)] {
            let started = Instant::now();
            let r = t.lock_cancelable(trx, &key_of(&t, b"a"), LockMode::Exclusive, limit(ms));
            let waited = started.elapsed();
            assert!(
                matches!(r, Err(Error::LockWaitLimit { trx: t, .. }) if t == trx),
                "{r:?}"
            );
            assert!(!r.unwrap_err().is_retryable());
            assert!(waited >= Duration::from_millis(ms), "{waited:?}");
            assert!(waited < Duration::from_secs(5), "{waited:?}");
        }
        assert_eq!(t.stats().timeouts, 2);
        t.release(1, &[key_of(&t, b"a")]);
        t.lock_cancelable(4, &key_of(&t, b"a"), LockMode::Exclusive, limit(1))
            .unwrap();
    }

    /// Many threads lock random keys exclusively in random order: every
    /// request ends granted, as a deadlock victim or timed out, and no
    /// key ever has two exclusive holders.
    #[test]
    fn random_contention_keeps_exclusion() {
        use rand::{RngExt, SeedableRng, rngs::SmallRng};
        let t = table(200);
        let holders: Arc<Vec<AtomicI32>> = Arc::new((0..8).map(|_| AtomicI32::new(0)).collect());
        let hs: Vec<_> = (0..6u64)
            .map(|w| {
                let (t, holders) = (t.clone(), holders.clone());
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(w);
                    let mut outcomes = (0, 0, 0);
                    for round in 0..300u64 {
                        let trx = 1 + w + 6 * round;
                        let mut held: Vec<u8> = Vec::new();
                        let mut failed = false;
                        for _ in 0..3 {
                            let k = rng.random_range(0..8u8);
                            match t.lock(trx, &key_of(&t, &[k]), LockMode::Exclusive) {
                                Ok(acquired) => {
                                    assert_eq!(
                                        acquired == Acquired::New,
                                        !held.contains(&k),
                                        "a lock reported new exactly when not held"
                                    );
                                    if !held.contains(&k) {
                                        let c = holders[k as usize].fetch_add(1, Ordering::SeqCst);
                                        assert_eq!(c, 0, "two exclusive holders of {k}");
                                        held.push(k);
                                        std::thread::yield_now();
                                    }
                                }
                                Err(Error::Deadlock { .. }) => {
                                    outcomes.1 += 1;
                                    failed = true;
                                    break;
                                }
                                Err(Error::LockTimeout { .. }) => {
                                    outcomes.2 += 1;
                                    failed = true;
                                    break;
                                }
                                Err(e) => panic!("{e}"),
                            }
                        }
                        if !failed {
                            outcomes.0 += 1;
                        }
                        for &k in &held {
                            holders[k as usize].fetch_sub(1, Ordering::SeqCst);
                        }
                        let keys: Vec<LockKey> = held.iter().map(|&k| key_of(&t, &[k])).collect();
                        t.release(trx, &keys);
                    }
                    outcomes
                })
            })
            .collect();
        let (mut done, mut victims) = (0, 0);
        for h in hs {
            let (d, v, to) = h.join().unwrap();
            done += d;
            victims += v + to;
        }
        assert!(done > 0);
        // (Whether any request had to wait depends on scheduling; the
        // deadlock and grant tests above make waits happen for certain.)
        let s = t.stats();
        assert_eq!(s.deadlocks + s.timeouts, victims);
    }
}
