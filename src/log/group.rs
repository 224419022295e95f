//! Group commit: making LSNs durable for waiting committers.
//!
//! **Leader mode** (default, no dedicated thread). A committer whose LSN is
//! not durable takes the *sync role* if nobody holds it: it writes
//! everything published so far and syncs it (it is the leader). Committers
//! arriving during that sync wait; the first of them writes its group's
//! bytes at once (the *pre-write*), so the next group's write overlaps the
//! current sync. When the sync completes, the leader removes exactly the
//! waiters it covered (a min-heap by LSN), hands the sync role to one waiter
//! that is left (no broadcast, no timer: the next sync starts the instant
//! this one ends), and wakes the covered ones. A sync therefore happens only
//! when someone waits for it and covers everything written before it, so
//! syncs per commit never exceed one and fall as concurrency rises.
//!
//! **Flusher mode**: the same role is held by a dedicated, demand-driven
//! thread, woken only when a committer waits and nobody holds the role. In
//! leader mode the flusher leads only for async committers (which must not
//! block an executor thread) when no thread is waiting.
//!
//! **Naive mode**: a mutex around write + sync for every commit; the baseline.
//!
//! Waiting: a waiter spins instead of parking only when the measured sync
//! latency says the wait is about as short as a wake-up (so never on a slow
//! device), and only while fewer than `cores - 1` others spin.
//!
//! Invariants (group In):
//! 1. At most one holder of the sync role at a time (`sync_owner`); only it
//!    (or a naive committer under the naive mutex, or a checkpoint) syncs.
//! 2. A waiter is woken `DONE` only after `durable >= its LSN`.
//! 3. While waiters exist, someone holds the sync role (no waiter is
//!    stranded): a completing holder either hands it to a waiter or the
//!    flusher, or clears it only when the heap is empty.
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
    /// Someone holds the sync role (group I1).
    sync_owner: bool,
    /// A waiter is writing its group's bytes during the current sync.
    prewriting: bool,
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

    fn check_lsn(&self, lsn: u64) -> Result<()> {
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
            self.write_up_to(lsn)?;
        }
        self.lazy_lsn.fetch_max(lsn, Ordering::AcqRel);
        self.ensure_timer()
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
        let target = self.write_up_to(lsn)?;
        // Always sync at least the commit's own last byte: this mode is the
        // one-sync-per-commit baseline, so it never skips.
        self.sync_range(from.min(lsn.saturating_sub(1)), target)?;
        self.durable.fetch_max(target, Ordering::AcqRel);
        self.metrics.group_size.record(1);
        Ok(())
    }

    fn commit_leader(&self, lsn: u64) -> Result<()> {
        let mut st = self.group.lock();
        loop {
            self.check_failed()?;
            if self.durable.load(Ordering::Acquire) >= lsn {
                self.metrics.commits_already_durable.incr();
                return Ok(());
            }
            if !st.sync_owner {
                st.sync_owner = true;
                drop(st);
                return self.lead(lsn, Role::Thread).map(|_| ());
            }
            if !st.prewriting && self.written.load(Ordering::Acquire) < lsn {
                // Overlap this group's write with the sync in flight.
                st.prewriting = true;
                drop(st);
                self.metrics.prewrites.incr();
                let r = self.write_up_to(lsn);
                st = self.group.lock();
                st.prewriting = false;
                r?;
                continue;
            }
            let w = Waiter::thread();
            st.push(lsn, w.clone());
            drop(st);
            return match self.wait(&w) {
                DONE => Ok(()),
                LEAD => self.lead(lsn, Role::Thread).map(|_| ()),
                _ => Err(self.poisoned()),
            };
        }
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
            !std::mem::replace(&mut st.sync_owner, true)
        };
        if ring {
            self.flusher.ring();
        }
        match self.wait(&w) {
            DONE => Ok(()),
            LEAD => self.lead(lsn, Role::Thread).map(|_| ()),
            _ => Err(self.poisoned()),
        }
    }

    /// Holding the sync role: write everything published (at least to
    /// `need`), sync it, publish `durable`, and complete the covered waiters.
    fn lead(&self, need: u64, role: Role) -> Result<Next> {
        let from = self.durable.load(Ordering::Acquire);
        let target = self.write_up_to(need)?;
        self.sync_range(from, target)?;
        self.durable.fetch_max(target, Ordering::AcqRel);
        Ok(self.complete(target, role))
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
            let own = u64::from(role == Role::Thread);
            self.metrics.group_size.record(done.len() as u64 + own);
            if st.waiters.is_empty() {
                st.sync_owner = false;
            } else if self.opts.mode == CommitMode::Flusher {
                ring_flusher = role == Role::Thread;
            } else if let Some(e) = st.take_thread_waiter() {
                next_leader = Some(e.waiter);
            } else {
                ring_flusher = role == Role::Thread;
            }
            if st.sync_owner && next_leader.is_none() && role == Role::Flusher {
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
        let all: Vec<Arc<Waiter>> = {
            let mut st = self.group.lock();
            st.sync_owner = false;
            let mut v = Vec::new();
            while let Some(e) = st.pop() {
                v.push(e.waiter);
            }
            v
        };
        let now = self.now_ns();
        for w in all {
            w.wake(FAILED, now);
        }
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

    /// Block the calling thread until its waiter leaves `WAITING`.
    fn wait(&self, w: &Waiter) -> u8 {
        static SPINNERS: AtomicUsize = AtomicUsize::new(0);
        let budget = self.spin_budget();
        if !budget.is_zero() {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
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
                let woken = w.woken_at_ns.load(Ordering::Relaxed);
                let now = self.now_ns();
                if woken != 0 && now > woken {
                    self.metrics
                        .wake_ewma
                        .update(Duration::from_nanos(now - woken));
                }
                return s;
            }
            std::thread::park();
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
                    if self.failed.load(Ordering::Acquire) || st.waiters.is_empty() {
                        if st.waiters.is_empty() {
                            st.sync_owner = false;
                        }
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
            return match w.state.load(Ordering::Acquire) {
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
        let w = Waiter::task(cx);
        let ring = {
            let mut st = core.group.lock();
            if core.durable.load(Ordering::Acquire) >= self.lsn {
                core.metrics.commits_already_durable.incr();
                drop(st);
                return self.finish(Ok(()));
            }
            st.push(self.lsn, w.clone());
            !std::mem::replace(&mut st.sync_owner, true)
        };
        if ring {
            core.flusher.ring();
        }
        self.waiter = Some(w);
        Poll::Pending
    }
}
