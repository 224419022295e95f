//! Group commit: making LSNs durable for waiting committers.
//!
//! **Leader mode** (default, no dedicated thread). A committer whose LSN is
//! not durable takes the *sync role* if nobody holds it: it writes
//! everything published so far and syncs it (it is the leader); when
//! everything before is durable already, the write and the sync are one
//! `RWF_DSYNC` write (writer I3). Arrivals during that sync park in a
//! min-heap by LSN. When the sync completes, the leader removes exactly
//! the waiters it covered, hands the sync role on (to the heir, below,
//! else to one parked waiter; no broadcast, no timer: the next sync starts
//! the instant this one ends), and wakes the covered ones. A sync
//! therefore happens only when someone waits for it and covers everything
//! written before it, so syncs per commit never exceed one and fall as
//! concurrency rises.
//!
//! **On a slow device the first arrival pre-writes** (the *heir*): when a
//! typical sync takes [`PREWRITE_MIN_SYNC`] or more, the first committer
//! to arrive during a sync writes its group's bytes at once, so that the
//! next group's write overlaps the current sync, then waits like the
//! others; if it is still awake (pre-writing) when the sync ends, the role
//! is left to it and no thread is woken for it. One heir per sync: later
//! arrivals park. On a fast device nobody pre-writes: a pre-write is a
//! write call and a device submission of its own, and the sync after it a
//! second call, where the leader's one durable write does both. Measured
//! on 2 vCPUs (`bench/results/oltp-20261128-prewrite-ab/`): with every
//! arrival pre-writing (one heir after another, 2 to 5 log writes per
//! sync), sysbench write-only at 16 threads spent 84 us of CPU per
//! transaction and ran 15.5k/s; with no pre-write 58 us and 21.6k/s. With
//! a 2 ms sync the heir is worth up to 28% at 4 clients (log benchmark).
//!
//! **A leader yields once before it writes** (`sched_yield`): committers
//! that are runnable but not running (more threads than cores) append their
//! commit records first and join this group instead of waiting for the next
//! one. With a core per committer nobody is waiting to run and the call
//! returns at once. No timer and no setting: the delay is exactly the
//! runnable work ahead of the leader. On 2 vCPUs it cut syncs per commit at
//! 64 clients from about 0.054 to 0.017 (log benchmark) and from 0.11 to
//! 0.023 (update transactions), and halved p99 commit latency there; the
//! price is peak log-only throughput at 64 to 256 clients with almost no
//! work per commit (20 to 35% lower: the device idles while the leader
//! waits its turn), while transactions, which do real work per commit, ran
//! as fast or faster (`bench/results/commit.md`, `bench/results/txn.md`).
//! Measured again on sysbench shapes
//! (`bench/results/oltp-20261203-yield-ab/`): without it, insert,
//! update-non-index and delete at 4 and 16 clients ran 10-24% slower
//! (groups shrank: insert at 16 clients made 0.118 syncs per transaction
//! instead of 0.083); yielding twice, or again after each yield during
//! which the log grew (at most 8), made 1-4% fewer syncs and ran from 4%
//! slower to 7% faster, within the host's noise. The one yield is where the
//! group forms.
//!
//! **The leader yields only while one of the last 32 syncs completed more
//! than one waiter** (`Core::shared_syncs`; waiters are commits and the
//! log's own waits: `make_durable`, the timed sync). With one client a sync
//! is shared only when such a wait joins a commit's sync; otherwise nobody
//! can join, and the yield could only hand the core to unrelated work,
//! which `sched_yield` does even for a process at nice 19. With two busy
//! loops at nice 19 beside the benchmark on 2 vCPUs, the unconditional
//! yield put sysbench update-non-index and delete at 1 client at 7,088 and
//! 6,872 tps (p99 335-661 us); yielding only after shared syncs, 9,207 and
//! 8,814 (p99 172-302 us). On an idle host, 1, 4 and 16 clients ran within
//! a few percent either way (`bench/results/oltp-20261203-busy-host/`).
//! With more clients than cores most syncs are shared, so the yield happens
//! as before.
//!
//! **A completing leader hands the role on rather than leading again**,
//! though it is on a core and the waiter it wakes is not: tried with one
//! more sync led by the completing committer for the waiters queued
//! meanwhile, sysbench insert and update ran 21-29% slower at 4 clients and
//! no faster at 16 (`bench/results/oltp-20261202-leader-rounds-ab/`): the
//! held committer is a transaction fewer in flight, which costs more than
//! the wake-up saves.
//!
//! **Flusher mode**: the same role is held by a dedicated, demand-driven
//! thread, woken only when a committer waits and nobody holds the role. In
//! leader mode the flusher leads only for async committers (which must not
//! block an executor thread) when no thread is waiting, except that an async
//! committer finding the role free leads inline when a typical sync fits an
//! async task's budget between awaits (fast devices only; see
//! `inline_sync_is_cheaper`).
//!
//! **Naive mode**: a mutex around write + sync for every commit; the baseline.
//!
//! **Write durability** uses a second group of the same shape (the *write
//! group*): the first `Write` committer that finds no write in flight writes
//! everything published, the others park and are completed by that write or
//! lead the next. (Queued on the writer lock instead, each wrote a block of
//! its own: 67k against 185-213k commits/s at 16 clients here.)
//!
//! Waiting: a waiter spins instead of parking only when the measured sync
//! latency says the wait is about as short as a wake-up (so never on a slow
//! device), only when recent groups were smaller than the cores less one
//! (otherwise the spinning core is one a woken committer needs: on 2 cores,
//! spinning at 16 clients cut throughput by more than half), and only while
//! fewer than `cores - 1` others spin.
//!
//! Invariants (group In):
//! 1. At most one holder of the sync role at a time (`owner`); only it
//!    syncs for waiting commits. Other syncs (a naive committer under the
//!    naive mutex, an appender waiting for log space in `sync_written`) may
//!    run beside it; `durable` only moves forward, so they cannot undo it.
//!    Nothing that holds an unpublished reservation ever waits for the role
//!    (a role holder may be waiting for that very reservation).
//! 2. A waiter is woken `DONE` only after `durable >= its LSN`.
//! 3. While waiters exist, someone holds the sync role or is the heir (no
//!    waiter is stranded): a completing holder hands the role to the heir,
//!    a waiter or the flusher, and clears it with waiters left only when the
//!    heir exists; the heir, once back under the lock, leads if the role is
//!    free and waiters are queued, even if its own LSN is already durable.
//!
//! 4. The flush thread leads only while `flusher_owns` says the role is its
//!    own (given by `give_to_flusher` together with `owner`); a ring alone
//!    never makes it lead.
//!
//! Waiter lifecycle: `WAITING --complete()--> DONE`, `WAITING --complete()
//! hands role--> LEAD` (then `lead()`), `WAITING --fail()--> FAILED`.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::thread::Thread;
use std::time::{Duration, Instant};

use atomic_waker::AtomicWaker;

use super::core::Core;
use super::{CommitMode, Durability};
use crate::{Error, Result};

/// Shortest typical sync during which an arriving committer pre-writes
/// its group (the heir); see `Core::prewrite_pays`. Not a tuning knob: a
/// pre-write costs a write system call and a device submission of its own
/// plus a separate sync after it (instead of one `RWF_DSYNC` write), which
/// on the 2-vCPU virtual machines measured cost more CPU than the overlap
/// saved at 100-200 us syncs, and paid off at 2 ms ones.
pub(crate) const PREWRITE_MIN_SYNC: Duration = Duration::from_millis(1);

/// Longest typical sync an async committer leads on its own (executor)
/// thread; see `Core::inline_sync_is_cheaper`. Not a tuning knob: it is the
/// executor's contract (tasks should yield within 10-100 us).
pub(crate) const INLINE_SYNC_BUDGET: Duration = Duration::from_micros(100);

const WAITING: u8 = 0;
const DONE: u8 = 1;
const LEAD: u8 = 2;
const FAILED: u8 = 3;

/// How a waiter is woken.
#[derive(Debug)]
enum WakeTarget {
    Thread(Thread),
    Task(AtomicWaker),
}

/// One waiting commit.
#[derive(Debug)]
pub(crate) struct Waiter {
    state: AtomicU8,
    target: WakeTarget,
    /// `Core::now_ns` when woken, to measure wake-up latency.
    woken_at_ns: AtomicU64,
}

impl Waiter {
    fn thread() -> Arc<Waiter> {
        Arc::new(Waiter {
            state: AtomicU8::new(WAITING),
            target: WakeTarget::Thread(std::thread::current()),
            woken_at_ns: AtomicU64::new(0),
        })
    }

    fn task(cx: &Context<'_>) -> Arc<Waiter> {
        let w = AtomicWaker::new();
        w.register(cx.waker());
        Arc::new(Waiter {
            state: AtomicU8::new(WAITING),
            target: WakeTarget::Task(w),
            woken_at_ns: AtomicU64::new(0),
        })
    }

    fn is_thread(&self) -> bool {
        matches!(self.target, WakeTarget::Thread(_))
    }

    fn wake(&self, state: u8, now_ns: u64) {
        self.woken_at_ns.store(now_ns, Ordering::Relaxed);
        self.state.store(state, Ordering::Release);
        match &self.target {
            WakeTarget::Thread(t) => t.unpark(),
            WakeTarget::Task(w) => w.wake(),
        }
    }
}

#[derive(Debug)]
struct Entry {
    lsn: u64,
    seq: u64,
    waiter: Arc<Waiter>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.lsn, self.seq) == (other.lsn, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so `BinaryHeap` pops the lowest LSN first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.lsn, other.seq).cmp(&(self.lsn, self.seq))
    }
}

/// Group-commit state, under `Core::group`.
#[derive(Debug, Default)]
pub(crate) struct GroupState {
    /// Someone holds this group's role: the sync role in `Core::group`
    /// (group I1), the write role in `Core::write_group`.
    owner: bool,
    /// A committer that arrived during the current sync is pre-writing its
    /// group and will take the sync role the moment it is free.
    heir: bool,
    /// An heir has pre-written during the current sync: later arrivals
    /// park instead (cleared when the sync completes).
    prewrote: bool,
    /// The role is the flush thread's: it acts on a ring only then (group I4).
    flusher_owns: bool,
    waiters: BinaryHeap<Entry>,
    thread_waiters: usize,
    max_lsn: u64,
    seq: u64,
}

impl GroupState {
    fn push(&mut self, lsn: u64, waiter: Arc<Waiter>) {
        self.seq += 1;
        if waiter.is_thread() {
            self.thread_waiters += 1;
        }
        self.max_lsn = self.max_lsn.max(lsn);
        self.waiters.push(Entry {
            lsn,
            seq: self.seq,
            waiter,
        });
    }

    /// Highest LSN a queued waiter asked for, 0 if none.
    pub(crate) fn max_lsn_pending(&self) -> u64 {
        if self.waiters.is_empty() {
            0
        } else {
            self.max_lsn
        }
    }

    fn pop(&mut self) -> Option<Entry> {
        let e = self.waiters.pop()?;
        if e.waiter.is_thread() {
            self.thread_waiters -= 1;
        }
        if self.waiters.is_empty() {
            self.max_lsn = 0;
        }
        Some(e)
    }

    /// Remove and return the lowest-LSN thread waiter, if any.
    fn take_thread_waiter(&mut self) -> Option<Entry> {
        if self.thread_waiters == 0 {
            return None;
        }
        let mut skipped = Vec::new();
        let mut found = None;
        while let Some(e) = self.waiters.pop() {
            if e.waiter.is_thread() {
                found = Some(e);
                break;
            }
            skipped.push(e);
        }
        self.waiters.extend(skipped);
        if found.is_some() {
            self.thread_waiters -= 1;
        }
        found
    }
}

/// Who is leading a sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A committing thread.
    Thread,
    /// The flush thread.
    Flusher,
}

/// What a completing leader does next.
enum Next {
    /// Nothing: the caller's own commit is durable.
    Done,
    /// (Flusher only) keep leading: only async waiters are left.
    Continue,
}

impl Core {
    /// Make `lsn` durable to `durability`'s level (the public `commit`).
    pub(crate) fn commit(self: &Arc<Self>, lsn: u64, durability: Durability) -> Result<()> {
        let t0 = Instant::now();
        let r = match durability {
            Durability::Sync => self.commit_sync(lsn),
            Durability::Write => self.commit_write(lsn),
            Durability::Lazy => self.commit_lazy(lsn),
        };
        self.metrics.commit_wait.record_duration(t0.elapsed());
        r
    }

    pub(crate) fn check_lsn(&self, lsn: u64) -> Result<()> {
        let reserved = self.reserved.load(Ordering::Acquire);
        if lsn > reserved {
            return Err(Error::InvalidArgument {
                what: "commit LSN",
                reason: format!("{lsn} is beyond the end of the log ({reserved})"),
            });
        }
        Ok(())
    }

    /// Wait until `lsn` is durable (a `Sync` commit).
    pub(crate) fn commit_sync(&self, lsn: u64) -> Result<()> {
        self.check_failed()?;
        self.check_lsn(lsn)?;
        self.metrics.commits_sync.incr();
        self.sync_to(lsn, true)
    }

    /// Make `lsn` durable through the commit mode's path. `is_commit` is false
    /// for the log's own requests (timer, checkpoint, close), which are not
    /// counted as commits.
    pub(crate) fn sync_to(&self, lsn: u64, is_commit: bool) -> Result<()> {
        if self.opts.mode == CommitMode::Naive {
            return self.commit_naive(lsn);
        }
        if self.durable.load(Ordering::Acquire) >= lsn {
            if is_commit {
                self.metrics.commits_already_durable.incr();
            }
            return Ok(());
        }
        match self.opts.mode {
            CommitMode::Flusher => self.commit_via_flusher(lsn),
            _ => self.commit_leader(lsn),
        }
    }

    fn commit_write(self: &Arc<Self>, lsn: u64) -> Result<()> {
        self.check_failed()?;
        self.check_lsn(lsn)?;
        self.metrics.commits_write.incr();
        if self.written.load(Ordering::Acquire) < lsn {
            self.write_group_to(lsn)?;
        }
        self.lazy_lsn.fetch_max(lsn, Ordering::AcqRel);
        self.ensure_timer()
    }

    /// Wait until `lsn` is written (not synced): a write group built like the
    /// sync group. The first committer that finds no write in flight writes
    /// everything published; those arriving meanwhile park and are completed
    /// by that write, or one of them leads the next. Without it, committers
    /// queued on the writer lock wrote one small write each.
    fn write_group_to(&self, lsn: u64) -> Result<()> {
        let mut st = self.write_group.lock();
        self.check_failed()?;
        if self.written.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        if !st.owner {
            st.owner = true;
            drop(st);
            return self.lead_write(lsn);
        }
        let w = Waiter::thread();
        st.push(lsn, w.clone());
        drop(st);
        match self.wait(&w, false) {
            DONE => Ok(()),
            LEAD => self.lead_write(lsn),
            _ => Err(self.poisoned()),
        }
    }

    /// Holding the write role: write everything published (at least to
    /// `lsn`), then complete the covered waiters and pass the role on.
    fn lead_write(&self, lsn: u64) -> Result<()> {
        let written = self.write_up_to(lsn)?;
        let mut done = Vec::new();
        let next = {
            let mut st = self.write_group.lock();
            while st.waiters.peek().is_some_and(|e| e.lsn <= written) {
                if let Some(e) = st.pop() {
                    done.push(e.waiter);
                }
            }
            // Only threads wait here, so a waiter left means a new leader.
            let next = st.take_thread_waiter();
            if next.is_none() {
                st.owner = false;
            }
            next
        };
        if let Some(e) = next {
            e.waiter.wake(LEAD, self.now_ns());
        }
        self.wake_all(done);
        Ok(())
    }

    fn commit_lazy(self: &Arc<Self>, lsn: u64) -> Result<()> {
        self.check_failed()?;
        self.check_lsn(lsn)?;
        self.metrics.commits_lazy.incr();
        self.lazy_lsn.fetch_max(lsn, Ordering::AcqRel);
        self.ensure_timer()
    }

    /// The baseline: every commit writes and syncs under one mutex.
    fn commit_naive(&self, lsn: u64) -> Result<()> {
        let _serial = self.naive.lock();
        self.check_failed()?;
        let from = self.durable.load(Ordering::Acquire);
        let w = self.write_to(lsn, true)?;
        if !w.synced {
            // This mode is the one-sync-per-commit baseline, so it never
            // skips: with nothing new written (another commit made this
            // one durable), it syncs the file of its own last byte alone;
            // otherwise everything written since `durable`.
            if w.written > from {
                self.sync_range(from, w.written)?;
            } else {
                self.sync_range(lsn.saturating_sub(1), lsn)?;
            }
        }
        self.mark_durable(&w);
        self.metrics.group_size.record(1);
        self.metrics.group_ewma.update_count(1);
        Ok(())
    }

    fn commit_leader(&self, lsn: u64) -> Result<()> {
        let mut st = self.group.lock();
        let mut tried_heir = false;
        loop {
            self.check_failed()?;
            if self.durable.load(Ordering::Acquire) >= lsn {
                self.metrics.commits_already_durable.incr();
                return Ok(());
            }
            if !st.owner {
                self.set_owner(&mut st, true);
                drop(st);
                return self.lead(lsn, Role::Thread).map(|_| ());
            }
            if !st.heir
                && !tried_heir
                && !st.prewrote
                && self.prewrite_pays()
                && self.written.load(Ordering::Acquire) < lsn
            {
                // First to arrive during this (long) sync with bytes to
                // write: write our group now (the write overlaps the sync)
                // and take the role when it ends. (One already written
                // leaves the one pre-write of this sync to a later arrival.)
                st.prewrote = true;
                st.heir = true;
                tried_heir = true;
                drop(st);
                let r = self.be_heir(lsn);
                st = self.group.lock();
                st.heir = false;
                r?;
                if !st.owner && !st.waiters.is_empty() {
                    // A completing leader left the role to us (group I3):
                    // lead for the queued waiters even if we are covered.
                    self.set_owner(&mut st, true);
                    let need = lsn.max(st.max_lsn);
                    drop(st);
                    return self.lead(need, Role::Thread).map(|_| ());
                }
                continue;
            }
            let w = Waiter::thread();
            st.push(lsn, w.clone());
            drop(st);
            return match self.wait(&w, self.cores_idle()) {
                DONE => Ok(()),
                LEAD => self.lead(lsn, Role::Thread).map(|_| ()),
                _ => Err(self.poisoned()),
            };
        }
    }

    /// The heir's work outside the group lock: write our group's bytes while
    /// the current sync runs. (The heir does not spin for the role: on the
    /// 2-core machines measured, a spinning heir took the core a woken
    /// committer needed and cut throughput by 12-75%; see
    /// `bench/results/commit.md`.)
    fn be_heir(&self, lsn: u64) -> Result<()> {
        self.metrics.prewrites.incr();
        if self.written.load(Ordering::Acquire) < lsn {
            self.write_up_to(lsn)?;
        }
        Ok(())
    }

    /// Whether a committer arriving during a sync should pre-write its
    /// group: only when a typical sync (the outlier-resistant average) is
    /// long, [`PREWRITE_MIN_SYNC`] or more. On a fast device the leader
    /// instead writes the whole group with one durable write when the sync
    /// role is free again (writer I3).
    fn prewrite_pays(&self) -> bool {
        self.metrics.sync_ewma.get() >= PREWRITE_MIN_SYNC
    }

    /// Set or clear the sync role (group I1). Clearing it also takes it from
    /// the flush thread.
    fn set_owner(&self, st: &mut GroupState, owner: bool) {
        st.owner = owner;
        if !owner {
            st.flusher_owns = false;
        }
    }

    /// Give the free sync role to the flush thread; the caller rings it.
    fn give_to_flusher(&self, st: &mut GroupState) {
        st.owner = true;
        st.flusher_owns = true;
    }

    /// Whether an async committer should lead a sync on its own thread: only
    /// when a typical sync (the outlier-resistant average) fits the time an
    /// async task may run between two awaits, which tokio's guidance puts at
    /// 10-100 us ([`INLINE_SYNC_BUDGET`]). Handing off instead costs two
    /// thread wake-ups and two context switches per commit, which on fast
    /// devices is as long as the sync itself; on a slow device (5 ms) the
    /// commit always goes to the flush thread and the executor never blocks.
    pub(crate) fn inline_sync_is_cheaper(&self) -> bool {
        let sync = self.metrics.sync_ewma.get();
        !sync.is_zero() && sync <= INLINE_SYNC_BUDGET
    }

    fn commit_via_flusher(&self, lsn: u64) -> Result<()> {
        let w = Waiter::thread();
        let ring = {
            let mut st = self.group.lock();
            self.check_failed()?;
            if self.durable.load(Ordering::Acquire) >= lsn {
                self.metrics.commits_already_durable.incr();
                return Ok(());
            }
            st.push(lsn, w.clone());
            let ring = !st.owner;
            if ring {
                self.give_to_flusher(&mut st);
            }
            ring
        };
        if ring {
            self.flusher.ring();
        }
        match self.wait(&w, false) {
            DONE => Ok(()),
            LEAD => self.lead(lsn, Role::Thread).map(|_| ()),
            _ => Err(self.poisoned()),
        }
    }

    /// Holding the sync role: write everything published (at least to
    /// `need`), sync it, publish `durable`, and complete the covered waiters.
    fn lead(&self, need: u64, role: Role) -> Result<Next> {
        // Let runnable committers append first, while recent syncs show
        // there are any (see "A leader yields once" in the module docs).
        if self.shared_syncs.load(Ordering::Relaxed) != 0 {
            self.metrics.leader_yields.incr();
            std::thread::yield_now();
        }
        let from = self.durable.load(Ordering::Acquire);
        let w = self.write_to(need, true)?;
        if !w.synced {
            self.sync_range(from, w.written)?;
        }
        self.mark_durable(&w);
        Ok(self.complete(w.written, role))
    }

    /// After a sync made `target` durable: pop the covered waiters, pass the
    /// sync role on (group I3), then wake the covered ones.
    fn complete(&self, target: u64, role: Role) -> Next {
        let mut done = Vec::new();
        let mut next_leader = None;
        let mut ring_flusher = false;
        {
            let mut st = self.group.lock();
            while st.waiters.peek().is_some_and(|e| e.lsn <= target) {
                if let Some(e) = st.pop() {
                    done.push(e.waiter);
                }
            }
            st.prewrote = false;
            let own = u64::from(role == Role::Thread);
            let covered = done.len() as u64 + own;
            self.metrics.group_size.record(covered);
            self.metrics.group_ewma.update_count(covered);
            // Under the lock: one completing leader at a time updates it.
            let recent = self.shared_syncs.load(Ordering::Relaxed);
            self.shared_syncs
                .store((recent << 1) | u32::from(covered > 1), Ordering::Relaxed);
            if st.waiters.is_empty() || (st.heir && self.opts.mode != CommitMode::Flusher) {
                // Nobody left, or the heir (awake, pre-writing) takes the
                // role when it comes back: no wake-up needed.
                self.set_owner(&mut st, false);
            } else if self.opts.mode == CommitMode::Flusher {
                ring_flusher = role == Role::Thread;
            } else if let Some(e) = st.take_thread_waiter() {
                next_leader = Some(e.waiter);
                st.flusher_owns = false;
            } else {
                ring_flusher = role == Role::Thread;
            }
            if ring_flusher {
                self.give_to_flusher(&mut st);
            }
            if st.owner && next_leader.is_none() && role == Role::Flusher {
                drop(st);
                self.wake_all(done);
                return Next::Continue;
            }
        }
        let now = self.now_ns();
        if let Some(w) = next_leader {
            self.metrics.leader_handoffs.incr();
            w.wake(LEAD, now);
        }
        if ring_flusher {
            self.flusher.ring();
        }
        self.wake_all(done);
        Next::Done
    }

    fn wake_all(&self, done: Vec<Arc<Waiter>>) {
        let now = self.now_ns();
        for w in done {
            w.wake(DONE, now);
        }
    }

    /// Wake every waiter with the failure (core I4).
    pub(crate) fn fail_waiters(&self) {
        let mut all: Vec<Arc<Waiter>> = Vec::new();
        for group in [&self.group, &self.write_group] {
            let mut st = group.lock();
            st.owner = false;
            st.flusher_owns = false;
            while let Some(e) = st.pop() {
                all.push(e.waiter);
            }
        }
        let now = self.now_ns();
        for w in all {
            w.wake(FAILED, now);
        }
    }

    /// Whether cores are likely idle while we wait: recent groups were
    /// smaller than the cores less one (for the spinner), so fewer threads
    /// run per sync than there are cores. On 2 cores this never holds, which
    /// is what measurement asked for (`bench/results/commit.md`).
    fn cores_idle(&self) -> bool {
        self.metrics.group_ewma.count() < (crate::stats::cores() as f64 - 1.0)
    }

    /// How long a waiter may spin before parking: the expected wait, if it
    /// is no longer than about two wake-ups, else zero.
    fn spin_budget(&self) -> Duration {
        let sync = self.metrics.sync_ewma.get();
        let wake = self.metrics.wake_ewma.get();
        if sync.is_zero() || wake.is_zero() || sync > wake * 2 {
            return Duration::ZERO;
        }
        sync * 2
    }

    /// Block the calling thread until its waiter leaves `WAITING`. With
    /// `may_spin` (cores are idle, so spinning takes no core a woken
    /// committer needs), spin first if the measured latencies say the wait
    /// is short.
    fn wait(&self, w: &Waiter, may_spin: bool) -> u8 {
        static SPINNERS: AtomicUsize = AtomicUsize::new(0);
        let cores = crate::stats::cores();
        let budget = if may_spin {
            self.spin_budget()
        } else {
            Duration::ZERO
        };
        if !budget.is_zero() {
            if SPINNERS.fetch_add(1, Ordering::AcqRel) + 1 < cores {
                self.metrics.spin_waits.incr();
                let t0 = Instant::now();
                while t0.elapsed() < budget {
                    let s = w.state.load(Ordering::Acquire);
                    if s != WAITING {
                        SPINNERS.fetch_sub(1, Ordering::AcqRel);
                        return s;
                    }
                    std::hint::spin_loop();
                }
            }
            SPINNERS.fetch_sub(1, Ordering::AcqRel);
        }
        self.metrics.parks.incr();
        loop {
            let s = w.state.load(Ordering::Acquire);
            if s != WAITING {
                self.note_wake(w);
                return s;
            }
            std::thread::park();
        }
    }

    /// Fold the time from `wake` to now into the wake-latency average.
    fn note_wake(&self, w: &Waiter) {
        let woken = w.woken_at_ns.load(Ordering::Relaxed);
        let now = self.now_ns();
        if woken != 0 && now > woken {
            self.metrics
                .wake_ewma
                .update(Duration::from_nanos(now - woken));
        }
    }

    /// The flush thread's loop: lead while waiters exist, else sleep.
    pub(crate) fn run_flusher(&self) {
        loop {
            while !self.flusher.rung.swap(false, Ordering::AcqRel) {
                if self.shutdown.load(Ordering::Acquire) {
                    return;
                }
                std::thread::park();
            }
            if self.shutdown.load(Ordering::Acquire) {
                return;
            }
            loop {
                let need = {
                    let mut st = self.group.lock();
                    if !st.flusher_owns {
                        // A ring without the role (a spare ring at start-up
                        // or shutdown): the role is someone else's (group I4).
                        break;
                    }
                    if self.failed.load(Ordering::Acquire) || st.waiters.is_empty() {
                        self.set_owner(&mut st, false);
                        break;
                    }
                    st.max_lsn
                };
                self.metrics.flusher_leads.incr();
                match self.lead(need, Role::Flusher) {
                    Ok(Next::Continue) => continue,
                    Ok(Next::Done) | Err(_) => break,
                }
            }
        }
    }
}

/// Future returned by [`crate::Log::commit_async`]: resolves when the LSN is
/// durable to the requested level, without blocking the polling thread on a
/// sync (the flush thread or a waiting thread leads).
#[must_use = "a commit is not waited for unless the future is awaited"]
#[derive(Debug)]
pub struct CommitFuture {
    core: Arc<Core>,
    lsn: u64,
    durability: Durability,
    waiter: Option<Arc<Waiter>>,
    started: Instant,
}

impl CommitFuture {
    pub(crate) fn new(core: Arc<Core>, lsn: u64, durability: Durability) -> Self {
        CommitFuture {
            core,
            lsn,
            durability,
            waiter: None,
            started: Instant::now(),
        }
    }

    fn finish(&self, r: Result<()>) -> Poll<Result<()>> {
        self.core
            .metrics
            .commit_wait
            .record_duration(self.started.elapsed());
        Poll::Ready(r)
    }
}

impl Future for CommitFuture {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let core = self.core.clone();
        if let Some(w) = &self.waiter {
            if let WakeTarget::Task(aw) = &w.target {
                aw.register(cx.waker());
            }
            let state = w.state.load(Ordering::Acquire);
            if state != WAITING {
                core.note_wake(w);
            }
            return match state {
                WAITING => Poll::Pending,
                DONE => self.finish(Ok(())),
                _ => self.finish(Err(core.poisoned())),
            };
        }
        match self.durability {
            Durability::Write | Durability::Lazy => {
                let r = core.commit(self.lsn, self.durability);
                return Poll::Ready(r);
            }
            Durability::Sync => {}
        }
        if let Err(e) = core.check_failed().and_then(|_| core.check_lsn(self.lsn)) {
            return self.finish(Err(e));
        }
        core.metrics.commits_sync.incr();
        if core.durable.load(Ordering::Acquire) >= self.lsn {
            core.metrics.commits_already_durable.incr();
            return self.finish(Ok(()));
        }
        if let Err(e) = core.ensure_flusher() {
            return self.finish(Err(e));
        }
        let (waiter, ring) = {
            let mut st = core.group.lock();
            // Re-check under the lock: `fail` and `close` drain the waiters
            // under it, so a waiter pushed after them would never be woken.
            if let Err(e) = core.check_failed() {
                drop(st);
                return self.finish(Err(e));
            }
            if core.durable.load(Ordering::Acquire) >= self.lsn {
                core.metrics.commits_already_durable.incr();
                drop(st);
                return self.finish(Ok(()));
            }
            if !st.owner && core.opts.mode == CommitMode::Leader && core.inline_sync_is_cheaper() {
                core.set_owner(&mut st, true);
                drop(st);
                // A sync is shorter than the two thread hand-offs the flush
                // thread would cost (measured), so leading here blocks this
                // thread no longer than waiting would delay the commit.
                core.metrics.inline_leads.incr();
                let r = core.lead(self.lsn, Role::Thread).map(|_| ());
                return self.finish(r);
            }
            let w = Waiter::task(cx);
            st.push(self.lsn, w.clone());
            let ring = !st.owner;
            if ring {
                core.give_to_flusher(&mut st);
            }
            (w, ring)
        };
        if ring {
            core.flusher.ring();
        }
        self.waiter = Some(waiter);
        Poll::Pending
    }
}
