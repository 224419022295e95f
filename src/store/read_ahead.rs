//! Read-ahead: the pages a long scan will read next, loaded into the
//! buffer pool by a few threads of their own.
//!
//! Data pages are read with direct I/O, so the kernel reads nothing ahead
//! on Quill's behalf: a scan over leaves that are not in the pool would
//! wait for one read per leaf, one at a time, and use a small part of
//! what the device can do (on the 2-vCPU host of `bench/results/`, 16 KiB
//! reads run at about 160 MB/s one at a time and 400-580 MB/s four to
//! eight at a time). A long range scan (past its first leaf, or bounded
//! where it goes) asks for the next leaves in scan order, under the
//! parent it descends through and then under the next one
//! (`btree::cursor`, "Read-ahead"); the requests queue here, and up to
//! [`THREADS`] threads read them (`BufferPool::read_ahead_run`), so that
//! several reads are in flight while the scan works through the pages
//! already read. Leaves that lie next to each other in the file (a tree
//! loaded in key order, an index built in bulk) are read several to a
//! request, which the device serves at a multiple of the bandwidth of
//! page-sized reads (128 KiB reads at 4-5 times that of 16 KiB ones on
//! the same host).
//!
//! Invariants:
//! * RA1. Read-ahead only reads. A page it loads is the on-disk image,
//!   which is the page's current state whenever the page is not cached
//!   (buffer B1: only a clean frame is evicted; B6: a page stays cached
//!   until its write has landed): the page a demand read would have
//!   loaded. It is published as a demand read publishes a page (one
//!   frame per page, latched exclusively while it is read), then left
//!   unlatched and unpinned at the head of the LRU's old list, not
//!   accessed, as a demand read's page enters it (buffer B12).
//! * RA2. Requests are hints. A full queue drops them, a page cached
//!   meanwhile is skipped, and a failed read is counted and forgotten:
//!   the scan that needs the page reads it itself and meets the error
//!   there. Nothing ever waits for a request, and a request never blocks
//!   its caller beyond one short mutex and the hash lookups of the pages
//!   (the scan's descent holds the leaves' parent latched meanwhile, or,
//!   for the first leaves under the next parent, nothing; the store's
//!   first request also starts the threads).
//! * RA3. The threads are stopped and joined before the store flushes at
//!   close, and when it is dropped (`Store::shutdown`, `Drop`): none
//!   reads into a pool being flushed or torn down. They hold the store's
//!   shared state, never the `Store`.
//! * RA4. Bounded: the queue holds at most [`QUEUE`] pages, and at most
//!   [`THREADS`] reads are in flight.
//! * RA5. One request reads one stretch of adjacent pages, of at most
//!   `BufferPool::max_run` pages, that one call asked for next to each
//!   other (in either order). The pages are published one by one (RA1),
//!   each checked on its own: a corrupt page fails alone, and a stretch
//!   whose request fails is read again a page at a time, so that each
//!   page meets its own error. The frames of a stretch are all taken
//!   before any is published, so a thread never holds a page latched
//!   while it waits for a frame.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::Shared;
use crate::page::PageId;
use crate::stats::Counter;

/// Threads reading ahead (RA4): on the measured host four reads in flight
/// reach about 2.4 times the bandwidth of one, eight about 3.3 times.
pub const THREADS: usize = 4;

/// Pages the queue holds at most (RA4); further requests are dropped.
pub const QUEUE: usize = 256;

/// The read-ahead queue and its threads, in the store's shared state.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    queue: Mutex<Queue>,
    ready: Condvar,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Pages requested that were not cached when asked for.
    requested: Counter,
    /// Requests dropped because the queue was full (RA2, RA4).
    dropped: Counter,
    /// Pages whose read ahead failed (RA2).
    failed: Counter,
}

#[derive(Debug, Default)]
struct Queue {
    /// Stretches of adjacent pages `(first, n)`, each read in one request
    /// (RA5).
    runs: VecDeque<(PageId, usize)>,
    /// Pages in `runs` (RA4).
    pages: usize,
    /// Threads started (they start at the first request).
    started: bool,
    /// Set at shutdown (RA3): no request is taken after it.
    stopped: bool,
}

/// Read-ahead counters, for store statistics.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ReadAheadStats {
    /// Pages asked for that were not cached then.
    pub requested: u64,
    /// Requests dropped because the queue was full.
    pub dropped: u64,
    /// Pages whose read ahead failed (the page's reader meets the error
    /// itself).
    pub failed: u64,
}

impl ReadAhead {
    /// Queue the pages of `ids` that are not cached (RA2), adjacent ones
    /// (in either order) as one stretch of at most
    /// `BufferPool::max_run` pages (RA5); starts the threads at the first
    /// request.
    pub(crate) fn request(&self, shared: &Arc<Shared>, ids: &[PageId]) {
        let max_run = shared.pool.max_run();
        let mut q = None;
        let mut run: Option<(PageId, usize)> = None;
        for &id in ids {
            if shared.pool.is_cached(id) {
                continue;
            }
            let q = q.get_or_insert_with(|| self.queue.lock());
            if q.stopped {
                return;
            }
            if q.pages >= QUEUE {
                self.dropped.incr();
                continue;
            }
            if !q.started {
                q.started = true;
                if self.start(shared) == 0 {
                    // No thread to read them: take no requests at all.
                    q.stopped = true;
                    q.runs.clear();
                    q.pages = 0;
                    return;
                }
            }
            q.pages += 1;
            self.requested.incr();
            run = match run {
                Some((first, n)) if n < max_run && first.0.checked_add(n as u64) == Some(id.0) => {
                    Some((first, n + 1))
                }
                Some((first, n)) if n < max_run && id.0.checked_add(1) == Some(first.0) => {
                    Some((id, n + 1))
                }
                Some(done) => {
                    q.runs.push_back(done);
                    self.ready.notify_one();
                    Some((id, 1))
                }
                None => Some((id, 1)),
            };
        }
        if let (Some(mut q), Some(done)) = (q, run) {
            q.runs.push_back(done);
            self.ready.notify_one();
        }
    }

    /// Start the threads; returns how many started.
    fn start(&self, shared: &Arc<Shared>) -> usize {
        let mut threads = self.threads.lock();
        for i in 0..THREADS {
            let s = shared.clone();
            match std::thread::Builder::new()
                .name(format!("quill-read-ahead-{i}"))
                .spawn(move || {
                    if let Some(r) = &s.read_ahead {
                        r.run(&s);
                    }
                }) {
                Ok(h) => threads.push(h),
                Err(e) => {
                    // Only a speed-up: scans read the pages themselves.
                    tracing::warn!(error = %e, "could not start a read-ahead thread");
                    break;
                }
            }
        }
        threads.len()
    }

    fn run(&self, shared: &Shared) {
        loop {
            let run = {
                let mut q = self.queue.lock();
                loop {
                    if q.stopped {
                        return;
                    }
                    if let Some(run) = q.runs.pop_front() {
                        q.pages -= run.1;
                        break run;
                    }
                    self.ready.wait(&mut q);
                }
            };
            let r = shared.pool.read_ahead_run(run.0, run.1);
            if let Some(e) = r.error {
                self.failed.add(r.failed as u64);
                tracing::debug!(page = run.0.0, pages = run.1, failed = r.failed, error = %e, "read-ahead failed");
            }
        }
    }

    /// Stop and join the threads (RA3); later requests are ignored.
    pub(crate) fn stop(&self) {
        {
            let mut q = self.queue.lock();
            q.stopped = true;
            q.runs.clear();
            q.pages = 0;
            self.ready.notify_all();
        }
        let threads = std::mem::take(&mut *self.threads.lock());
        for h in threads {
            if h.join().is_err() {
                tracing::error!("a read-ahead thread panicked");
            }
        }
    }

    /// Counters so far.
    pub(crate) fn stats(&self) -> ReadAheadStats {
        ReadAheadStats {
            requested: self.requested.get(),
            dropped: self.dropped.get(),
            failed: self.failed.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Bound::Unbounded;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::btree::{Direction, Tree};
    use crate::io::SimFs;
    use crate::page::{PageId, node};
    use crate::store::{DATA_FILE, Store, StoreOptions, test_options};

    fn key(i: usize) -> Vec<u8> {
        format!("key-{i:06}").into_bytes()
    }

    /// A closed store on `fs` holding one tree of `n` entries of 100-byte
    /// values, and the tree's root (each open starts with an empty pool).
    fn big_tree(fs: &Arc<SimFs>, n: usize) -> PageId {
        tree_of(fs, n, key)
    }

    /// [`big_tree`] with the keys `key` gives.
    fn tree_of(fs: &Arc<SimFs>, n: usize, key: impl Fn(usize) -> Vec<u8>) -> PageId {
        let store = Store::create(fs.clone(), Path::new("/db"), test_options()).unwrap();
        let tree = Tree::create(&store).unwrap();
        for i in 0..n {
            tree.put(&key(i), &[(i % 251) as u8; 100]).unwrap();
        }
        let root = tree.root();
        store.close().unwrap();
        root
    }

    fn open(fs: &Arc<SimFs>, read_ahead: bool) -> Store {
        let opts = StoreOptions {
            read_ahead,
            ..test_options()
        };
        Store::open(fs.clone(), Path::new("/db"), opts).unwrap()
    }

    /// The tree's leaves, in key order.
    fn leaves(store: &Store, root: PageId) -> Vec<PageId> {
        let mut level = vec![root];
        loop {
            let mut below = Vec::new();
            for &id in &level {
                let p = store.pool().fetch_read(id).unwrap();
                if node::level(&p) == 0 {
                    return level;
                }
                below.extend((0..node::nslots(&p)).map(|i| PageId(node::child(&p, i).unwrap())));
            }
            level = below;
        }
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let t = Instant::now();
        while !done() {
            assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Pages asked for are read into the pool by the threads and found
    /// there afterwards as hits; pages already cached are not asked for.
    #[test]
    fn requested_pages_are_read_into_the_pool() {
        let fs = Arc::new(SimFs::new(11));
        let root = big_tree(&fs, 8000);
        let store = open(&fs, true);
        let ids: Vec<PageId> = leaves(&store, root).into_iter().skip(1).take(20).collect();
        assert!(ids.iter().all(|&id| !store.pool().is_cached(id)));
        store.read_ahead(&ids);
        wait_until("20 pages read ahead", || {
            store.stats().pool.read_ahead == 20
        });
        let before = store.stats();
        for &id in &ids {
            drop(store.pool().fetch_read(id).unwrap());
        }
        let after = store.stats();
        assert_eq!(after.pool.misses, before.pool.misses, "all hits");
        // B12: that first hit stood for the read, not a second touch; the
        // next one is.
        assert!(
            ids.iter()
                .all(|&id| store.pool().is_accessed(id) == Some(false))
        );
        drop(store.pool().fetch_read(ids[0]).unwrap());
        assert_eq!(store.pool().is_accessed(ids[0]), Some(true));
        assert_eq!(after.read_ahead.requested, 20);
        // Cached now: asking again queues nothing.
        store.read_ahead(&ids);
        assert_eq!(store.stats().read_ahead.requested, 20);
        store.close().unwrap();
    }

    /// A window that reaches the last leaf under one parent goes on
    /// under the next: over a cold pool, a scan asks for every leaf but
    /// the first two (read before it is taken for long), the first leaf
    /// under each parent included, both ways, and returns the tree's
    /// entries. (The requests are the scan's own, so their count does not
    /// depend on how fast the read-ahead threads run.)
    #[test]
    fn a_window_crosses_into_the_next_parent() {
        let fs = Arc::new(SimFs::new(13));
        // Long keys that differ only at their end (separators stay long):
        // few children per inner node, so many parents.
        let long = |i: usize| format!("{}-{i:06}", "k".repeat(200)).into_bytes();
        let n = 4000;
        let root = tree_of(&fs, n, long);
        // Three levels: the root is every parent's grandparent, so every
        // parent's end can be crossed.
        let (parents, leaves) = {
            let store = open(&fs, false);
            let root_page = store.pool().fetch_read(root).unwrap();
            assert_eq!(node::level(&root_page), 2);
            let parents = node::nslots(&root_page);
            drop(root_page);
            let leaves = leaves(&store, root).len() as u64;
            store.close().unwrap();
            (parents, leaves)
        };
        assert!(parents >= 10, "{parents} parents");
        for dir in [Direction::Forward, Direction::Backward] {
            let store = open(&fs, true);
            let tree = Tree::open(&store, root);
            let mut c = tree.range(Unbounded, Unbounded, dir);
            let mut got = 0;
            while let Some(e) = c.next_entry() {
                let (k, _) = e.unwrap();
                let i = match dir {
                    Direction::Forward => got,
                    Direction::Backward => n - 1 - got,
                };
                assert_eq!(k, long(i), "{dir:?}");
                got += 1;
            }
            assert_eq!(got, n, "{dir:?}");
            // Without crossing, the first leaf under each later parent
            // would not be asked for: `parents - 1` fewer.
            let s = store.stats().read_ahead;
            assert_eq!(
                s.requested + s.dropped,
                leaves - 2,
                "{dir:?}: {s:?}, {leaves} leaves under {parents} parents"
            );
            store.close().unwrap();
        }
    }

    /// A long scan over a cold pool asks for read-ahead and returns
    /// exactly what a scan without it returns, both ways; a short
    /// bounded scan asks for no leaf past its range.
    #[test]
    fn scans_read_ahead_and_return_the_same_entries() {
        let fs = Arc::new(SimFs::new(12));
        let n = 8000;
        let root = big_tree(&fs, n);
        for dir in [Direction::Forward, Direction::Backward] {
            let mut got = Vec::new();
            for read_ahead in [true, false] {
                let store = open(&fs, read_ahead);
                let tree = Tree::open(&store, root);
                let mut c = tree.range(Unbounded, Unbounded, dir);
                let mut keys = Vec::new();
                while let Some(e) = c.next_entry() {
                    let (k, v) = e.unwrap();
                    assert_eq!(v.len(), 100);
                    keys.push(k.to_vec());
                }
                let s = store.stats();
                if read_ahead {
                    assert!(s.read_ahead.requested > 0, "{dir:?}: {:?}", s.read_ahead);
                } else {
                    assert_eq!(s.pool.read_ahead + s.read_ahead.requested, 0);
                }
                got.push(keys);
                store.close().unwrap();
            }
            let mut want: Vec<Vec<u8>> = (0..n).map(key).collect();
            if dir == Direction::Backward {
                want.reverse();
            }
            assert_eq!(got[0], want, "{dir:?} with read-ahead");
            assert_eq!(got[1], want, "{dir:?} without");
        }
        // A range over three to four leaves, both ways: no leaf outside
        // it is asked for. (The leaves' first keys are read on an open of
        // their own: reading a leaf caches it.)
        let firsts: Vec<(PageId, Vec<u8>)> = {
            let store = open(&fs, false);
            let v = leaves(&store, root)
                .into_iter()
                .map(|id| {
                    let p = store.pool().fetch_read(id).unwrap();
                    (id, node::key(&p, 0).unwrap().to_vec())
                })
                .collect();
            store.close().unwrap();
            v
        };
        let per_leaf = n / firsts.len();
        let (lo, hi) = (key(1000), key(1000 + 3 * per_leaf));
        for dir in [Direction::Forward, Direction::Backward] {
            let store = open(&fs, true);
            let tree = Tree::open(&store, root);
            let got = tree
                .range(
                    std::ops::Bound::Included(&lo[..]),
                    std::ops::Bound::Excluded(&hi[..]),
                    dir,
                )
                .inspect(|e| assert!(e.is_ok(), "{e:?}"))
                .count();
            assert_eq!(got, 3 * per_leaf, "{dir:?}");
            std::thread::sleep(Duration::from_millis(50));
            // Forward, the first leaf starting at or above `hi`; backward,
            // the leaf before the one holding `lo` (all its keys are below).
            let beyond = match dir {
                Direction::Forward => firsts.iter().find(|(_, k)| *k >= hi).unwrap().0,
                Direction::Backward => {
                    let i = firsts.iter().rposition(|(_, k)| *k <= lo).unwrap();
                    firsts[i - 1].0
                }
            };
            assert!(
                !store.pool().is_cached(beyond),
                "{dir:?}: leaf {beyond:?} read"
            );
            let asked = store.stats().read_ahead.requested;
            assert!(asked <= 3, "{dir:?}: {asked} leaves asked for");
            store.close().unwrap();
        }
    }

    /// `n` leaves not cached that lie next to each other in the file, in
    /// key order (a tree loaded in key order has such stretches).
    fn adjacent_leaves(store: &Store, root: PageId, n: usize) -> Vec<PageId> {
        let all = leaves(store, root);
        let at = all
            .windows(n)
            .position(|w| {
                w.iter()
                    .enumerate()
                    .all(|(k, &id)| id.0 == w[0].0 + k as u64 && !store.pool().is_cached(id))
            })
            .expect("a stretch of adjacent leaves");
        all[at..at + n].to_vec()
    }

    /// RA5: adjacent pages asked for together, in either order, are read
    /// with one request of at most `max_run` pages, and are then found
    /// in the pool as hits, each checked.
    #[test]
    fn adjacent_pages_are_read_in_one_request() {
        let fs = Arc::new(SimFs::new(16));
        let root = big_tree(&fs, 8000);
        for descending in [false, true] {
            let store = open(&fs, true);
            let run = store.pool().max_run();
            assert!(run >= 2, "the test pool reads {run} pages at a time");
            let mut ids = adjacent_leaves(&store, root, run + 1);
            if descending {
                ids.reverse();
            }
            let before = store.stats();
            let sim_reads = fs.stats().reads;
            store.read_ahead(&ids);
            wait_until("the leaves read ahead", || {
                store.stats().pool.read_ahead == ids.len() as u64
            });
            // Each page's latch is held until its read has ended.
            for &id in &ids {
                let p = store.pool().fetch_read(id).unwrap();
                assert_eq!(node::level(&p), 0);
            }
            let after = store.stats();
            assert_eq!(after.pool.misses, before.pool.misses, "all hits");
            // `run` pages in one request, the one left over in another.
            assert_eq!(
                after.pool.data_io.read_requests - before.pool.data_io.read_requests,
                2
            );
            assert_eq!(
                after.pool.data_io.reads - before.pool.data_io.reads,
                ids.len() as u64
            );
            assert_eq!(fs.stats().reads - sim_reads, 2);
            store.close().unwrap();
        }
    }

    /// A page that fails its check is counted as a failed read-ahead and
    /// left out of the pool; the scan that needs it meets the error
    /// itself, as without read-ahead. RA5: in the middle of a stretch it
    /// fails alone, and the pages around it, read in the same request,
    /// are valid.
    #[test]
    fn a_corrupt_page_in_a_stretch_fails_alone() {
        let fs = Arc::new(SimFs::new(17));
        let root = big_tree(&fs, 8000);
        let store = open(&fs, true);
        let ids = adjacent_leaves(&store, root, 3);
        let page = store.pool().page_size() as u64;
        assert!(fs.corrupt(
            &Path::new("/db").join(DATA_FILE),
            ids[1].0 * page + 100,
            &[0xA5; 64]
        ));
        let before = store.stats().pool.data_io.read_requests;
        store.read_ahead(&ids);
        wait_until("the stretch read, one page failed", || {
            let s = store.stats();
            s.pool.read_ahead == 3 && s.read_ahead.failed == 1
        });
        assert_eq!(store.stats().pool.data_io.read_requests - before, 1);
        assert!(store.pool().is_cached(ids[0]) && store.pool().is_cached(ids[2]));
        assert!(!store.pool().is_cached(ids[1]));
        assert!(matches!(
            store.pool().fetch_read(ids[1]),
            Err(crate::Error::CorruptPage { .. })
        ));
        for id in [ids[0], ids[2]] {
            assert_eq!(node::level(&store.pool().fetch_read(id).unwrap()), 0);
        }
        store.close().unwrap();
    }

    /// RA5: a stretch whose request fails is read again page by page, so
    /// a passing fault costs nothing but the retry, and a lasting one
    /// fails the read-ahead (counted) and then the page's own reader.
    #[test]
    fn a_failed_request_is_read_again_page_by_page() {
        let fs = Arc::new(SimFs::new(18));
        let root = big_tree(&fs, 8000);
        let store = open(&fs, true);
        let ids = adjacent_leaves(&store, root, 6);
        let (first, second) = ids.split_at(3);
        fs.fail_read_after(0, false);
        let before = store.stats().pool.data_io.read_requests;
        store.read_ahead(first);
        wait_until("the stretch read again", || {
            store.stats().pool.read_ahead == 3
        });
        let misses = store.stats().pool.misses;
        for &id in first {
            assert_eq!(node::level(&store.pool().fetch_read(id).unwrap()), 0);
        }
        let s = store.stats();
        assert_eq!(s.pool.misses, misses, "all read ahead");
        assert_eq!(s.read_ahead.failed, 0);
        assert_eq!(s.pool.data_io.read_requests - before, 1 + 3);

        fs.fail_read_after(0, true);
        store.read_ahead(second);
        wait_until("the stretch failed", || {
            store.stats().read_ahead.failed == 3
        });
        assert!(second.iter().all(|&id| !store.pool().is_cached(id)));
        assert!(matches!(
            store.pool().fetch_read(second[0]),
            Err(crate::Error::Io(_))
        ));
        fs.fail_read_after(u64::MAX, false);
        assert_eq!(node::level(&store.pool().fetch_read(second[0]).unwrap()), 0);
        drop(store);
    }

    /// W1: a thread that must not block refuses to wait for a latch held
    /// while the page is read from disk (as read-ahead holds it), and
    /// still waits for one held for a page operation; outside
    /// `without_waiting` both are waited for.
    #[test]
    fn a_page_being_read_is_not_waited_for_without_waiting() {
        let fs = Arc::new(SimFs::new(15));
        let root = big_tree(&fs, 8000);
        let store = open(&fs, false);
        let id = leaves(&store, root)[0];
        let pool = store.pool();
        for (reading, inside, refused) in [
            (true, true, true),
            (false, true, false),
            (true, false, false),
        ] {
            let held = std::sync::Barrier::new(2);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let w = pool.fetch_write(id, crate::buffer::Load::Verify).unwrap();
                    pool.set_reading(id, reading);
                    held.wait();
                    std::thread::sleep(Duration::from_millis(30));
                    pool.set_reading(id, false);
                    drop(w);
                });
                held.wait();
                let (r, was_refused) = if inside {
                    crate::wait::without_waiting(|| pool.wait_for_latch(id, false))
                } else {
                    (pool.wait_for_latch(id, false), false)
                };
                assert_eq!(was_refused, refused, "reading {reading}, inside {inside}");
                if refused {
                    assert!(matches!(r, Err(crate::Error::WouldWait { .. })), "{r:?}");
                } else {
                    r.unwrap();
                }
            });
        }
        store.close().unwrap();
    }

    /// Closing (or dropping) a store with requests queued stops the
    /// threads without reading the rest, and later requests are ignored.
    #[test]
    fn close_stops_the_threads_with_requests_queued() {
        let fs = Arc::new(SimFs::new(14));
        let root = big_tree(&fs, 8000);
        for close in [true, false] {
            let store = open(&fs, true);
            let ids = leaves(&store, root);
            assert!(ids.len() > 100);
            store.read_ahead(&ids);
            if close {
                store.close().unwrap();
            } else {
                drop(store);
            }
        }
        // Once stop returns, no page is read ahead any more, queued or
        // asked for later.
        let store = open(&fs, true);
        let ids = leaves(&store, root);
        store.read_ahead(&ids);
        let r = store.shared.read_ahead.as_ref().unwrap();
        r.stop();
        let (read, asked) = (
            store.stats().pool.read_ahead,
            store.stats().read_ahead.requested,
        );
        store.read_ahead(&ids);
        std::thread::sleep(Duration::from_millis(50));
        let s = store.stats();
        assert_eq!((s.pool.read_ahead, s.read_ahead.requested), (read, asked));
        store.close().unwrap();
    }
}
