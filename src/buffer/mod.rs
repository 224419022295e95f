//! The buffer pool: a fixed set of page frames caching the tablespace
//! file, with page latches, a scan-resistant LRU, a flush list ordered by
//! oldest modification, and the write-ahead rule on every page write.
//!
//! Structure:
//! * **Page hash**: sharded maps page id -> frame. The hit path locks one
//!   shard for a lookup and a pin increment, then takes the page latch: no
//!   pool-wide mutex on a hit.
//! * **Page latches**: one reader-writer lock per frame (shared for reads,
//!   exclusive for changes). A latch holder always holds a pin.
//! * **LRU**: two lists, young and old, under one mutex that only misses
//!   and evictions take. A page read from disk enters the *old* list
//!   (midpoint insertion). A hit only sets the frame's `accessed` flag
//!   (no list move, no mutex). When the eviction scan reaches an old page
//!   whose flag is set, the page moves to the head of the young list
//!   instead of leaving (second chance); the young list is capped at 5/8
//!   of the pages and its tail spills into the old list with the flag
//!   cleared. A large scan reads every page once, so its pages never
//!   reach the young list and cannot push the working set out.
//! * **Flush list**: dirty pages ordered by the LSN of their oldest
//!   unflushed change; its minimum bounds the checkpoint.
//!
//! Invariants:
//! * B1. A frame is evicted only with zero pins, checked under its hash
//!   shard's lock held exclusively (pins are taken under the same lock,
//!   shared), and only when clean.
//! * B2. Write-ahead rule: before a page image is written, the log is
//!   durable up to the page's LSN. A flush either syncs the log that far
//!   itself ([`WalRule::Sync`]) or skips pages the log has not made
//!   durable yet ([`WalRule::DurableOnly`]: routine background flushing,
//!   which must not add log syncs of its own).
//! * B3. A page is marked clean only if its LSN still equals the LSN of
//!   the image that was written (checked under a shared latch, which
//!   excludes changes).
//! * B4. Mark-dirty happens under the exclusive latch with the
//!   mini-transaction's lower-bound LSN, *before* its log record is
//!   reserved (see `mtr` M2), so the flush list's minimum never passes a
//!   change that is not yet on a page on disk.
//! * B6. At most one copy of a page is being written at a time: the
//!   frame's `flushing` flag is set from the copy until after the
//!   clean-marking, and a flagged frame is never evicted, so the page
//!   cannot move to another frame (and be flushed from there) while an
//!   older copy is still on its way. Two copies in flight could land out
//!   of order and leave a stale image under a page marked clean.
//! * B7. Flushing never waits for a page latch (only tries): a flusher
//!   holds `flushing` flags on dirty pages, which nobody can evict, and a
//!   latch holder may be waiting for a free frame.
//! * B5. Lock order: LRU mutex, then a hash shard, then a frame latch
//!   (only `try_write` while holding the others); the flush-list mutex is
//!   a leaf.
//! * B8. Pins count holders: an unpin always matches a pin (the count
//!   never goes below zero), and a frame handed out for a new page (free
//!   list or eviction) has no pins, no dirty state and no flush in flight.
//! * B9. A frame is dirty (`oldest != 0`) exactly while `(oldest, page)` is
//!   on the flush list: mark-dirty inserts it under the exclusive latch
//!   when `oldest` leaves 0, and only the flusher holding the page's
//!   `flushing` flag (B6) takes it off, under the shared latch (B3). A
//!   dirty page's `oldest` is a nonzero LSN at or above the page LSN it
//!   was marked at (B4).
//! * B10. No page read from disk carries an LSN beyond the end of the log
//!   (B2 wrote it only after the log was durable to it): one that does is
//!   refused as corrupt, checked in release on every read from disk, so
//!   damaged bytes with a matching checksum can never reach the page-LSN
//!   order assertions (B4, page P3). Before the log is installed, the
//!   ceiling is the end of what recovery may scan.
//! * B11. The tree epoch counts B+tree structure changes: every node
//!   split and every free of a node page. Each is counted before its
//!   mini-transaction changes the node, which it holds latched from then
//!   to its commit, so a thread that latches the node afterwards sees the
//!   epoch moved (latch release and acquire order the two). The pool only
//!   keeps the count; `btree` (AH1, LH1) relies on it. It starts at a
//!   random value, so an epoch read in another pool (another store, or
//!   this store before a reopen) matches this pool's with negligible
//!   chance (wrapping is harmless: epochs are only compared for equality). (A root that takes its
//!   only child's content is rewritten before the child is freed; it is
//!   an internal node before and after, never a leaf a hint names.)
//! * B12. A page read ahead (`BufferPool::read_ahead_run`) enters as a demand
//!   read's page does (old list, not accessed) and is flagged `ahead`; the
//!   first hit on it clears the flag instead of marking it accessed, since
//!   that hit is the read read-ahead stood in for. So a scan's pages stay
//!   in the old list whether they were read ahead or not, and a large scan
//!   still cannot push the working set out.

mod arena;
mod doublewrite;
mod lru;
mod prefault;

use std::collections::{BTreeSet, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use serde::{Deserialize, Serialize};

use arena::{Arena, FrameMem};
pub use doublewrite::{DOUBLEWRITE_FILE, Doublewrite};
use lru::{Lru, NIL};

use crate::io::AlignedBuf;
use crate::log::{Log, Lsn};
use crate::page::space::{DataFile, IoStats};
use crate::page::{self, PageCheck, PageId};
use crate::stats::Counter;
use crate::{Error, Result};

const NO_PAGE: u64 = u64::MAX;

/// Cache lines of a page prefetched when its frame is found: the node
/// header and the first slots (`page::node`'s layout).
const PREFETCH_LINES: usize = 8;

/// Dirty pages an eviction that found no clean victim writes at once.
const LRU_FLUSH_BATCH: usize = 32;

/// Bytes read ahead in one request at most ([`BufferPool::read_ahead_run`]):
/// on the measured host 128 KiB direct reads run at 4-5 times the
/// bandwidth of 16 KiB ones, one at a time.
pub(crate) const MAX_RUN_BYTES: usize = 128 << 10;

/// One shard of the page hash: page id -> frame index.
/// A read-write lock: lookups (every page access, the root's shard on
/// every descent) share it, so a lookup never waits for another lookup,
/// not even one whose thread was preempted holding it; only inserts and
/// evictions take it exclusively. Hashed with foldhash (seeded per map):
/// the default SipHash was 2% of a secondary-index range read, for keys
/// that are page ids, not input an attacker chooses.
type Shard = RwLock<HashMap<u64, u32, foldhash::fast::RandomState>>;

/// How a flush keeps the write-ahead rule (B2) for a page whose changes
/// the log has not yet made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalRule {
    /// Sync the log up to the page's LSN, then write the page (evictions,
    /// urgent flushing, `flush_all`).
    Sync,
    /// Leave such a page dirty for a later round: the flush adds no log
    /// sync (routine background flushing; the next commit's sync makes the
    /// page writable).
    DurableOnly,
}

/// How [`BufferPool::fetch_write`] treats the page's on-disk bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// Read and verify it; a corrupt page is an error.
    Verify,
    /// Do not read it: the caller is about to initialise the page whole
    /// (a freshly allocated page). A cached copy is used as is.
    Fresh,
    /// Read it, and hand a corrupt page over instead of failing (recovery,
    /// when the first redo record for the page rebuilds it whole).
    AllowCorrupt,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum State {
    Empty,
    Valid,
    Failed,
}

#[derive(Debug)]
struct FrameBuf {
    buf: FrameMem,
    id: PageId,
    state: State,
    /// Set when a load found a corrupt page under `Load::AllowCorrupt`.
    corrupt: bool,
}

#[derive(Debug)]
struct Frame {
    latch: RwLock<FrameBuf>,
    page: AtomicU64,
    pins: AtomicU32,
    oldest: AtomicU64,
    accessed: AtomicBool,
    /// Read ahead and not yet asked for (B12).
    ahead: AtomicBool,
    /// Set while the page is being read from disk into the frame, under
    /// its exclusive latch (a demand read or read-ahead): a thread that
    /// must not block refuses to wait for that latch (`wait` W1).
    reading: AtomicBool,
    /// Set while a copy of the page is on its way to disk (B6).
    flushing: AtomicBool,
}

#[derive(Debug, Default)]
struct PoolCounters {
    hits: Counter,
    misses: Counter,
    evictions: Counter,
    lru_flushes: Counter,
    flushed: Counter,
    busy_waits: Counter,
    flushes_deferred: Counter,
    read_ahead: Counter,
}

/// What one [`BufferPool::read_ahead_run`] did.
#[derive(Debug, Default)]
pub(crate) struct RunRead {
    /// Pages that could not be read ahead (a failed read, a corrupt page,
    /// no frame).
    pub(crate) failed: usize,
    /// The first of their errors.
    pub(crate) error: Option<Error>,
}

impl RunRead {
    fn fail(&mut self, pages: usize, e: Error) {
        self.failed += pages;
        self.error.get_or_insert(e);
    }
}

/// A snapshot of the buffer pool's state and counters.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PoolStats {
    /// Frames in the pool.
    pub frames: u64,
    /// Bytes of one page.
    pub page_size: u64,
    /// Page requests served from memory.
    pub hits: u64,
    /// Page requests that read the disk.
    pub misses: u64,
    /// Pages evicted to make room.
    pub evictions: u64,
    /// Dirty pages now.
    pub dirty: u64,
    /// Pages written by evictions that found no clean victim (LRU
    /// flushing, in batches from the cold end).
    pub lru_flushes: u64,
    /// Pages written in total.
    pub pages_flushed: u64,
    /// Times a B+tree descent found a page latched by another thread, let
    /// go of what it held and waited for the page (B+tree BT5).
    #[serde(default)]
    pub busy_waits: u64,
    /// Pages a routine flush left dirty because the log had not yet made
    /// their changes durable ([`WalRule::DurableOnly`]).
    #[serde(default)]
    pub flushes_deferred: u64,
    /// Pages read from disk ahead of a scan (`store::read_ahead`);
    /// not counted in `misses`, which are reads a caller waited for.
    #[serde(default)]
    pub read_ahead: u64,
    /// Data-page file I/O.
    pub data_io: IoStats,
    /// Doublewrite I/O (none when it is off).
    pub doublewrite_io: Option<IoStats>,
}

impl PoolStats {
    /// Hits over all requests (1.0 when there were none).
    pub fn hit_ratio(&self) -> f64 {
        // In floating point: saved statistics may hold any counts.
        let all = self.hits as f64 + self.misses as f64;
        if all == 0.0 {
            1.0
        } else {
            self.hits as f64 / all
        }
    }
}

/// The buffer pool of one database.
#[derive(Debug)]
pub struct BufferPool {
    page_size: usize,
    frames: Box<[Frame]>,
    /// The frames' memory (arena FA2: declared after `frames`, so
    /// dropped after them).
    arena: Arena,
    shards: Box<[CachePadded<Shard>]>,
    lru: Mutex<Lru>,
    flush_list: Mutex<BTreeSet<(u64, u64)>>,
    file: Arc<DataFile>,
    wal: OnceLock<Arc<Log>>,
    /// Before the log is installed (recovery): the highest LSN any page
    /// on disk may carry (B10).
    lsn_ceiling: AtomicU64,
    doublewrite: Option<Doublewrite>,
    counters: PoolCounters,
    poisoned: Mutex<Option<String>>,
    is_poisoned: AtomicBool,
    /// B+tree node splits and node frees since open, counted from a
    /// random start (B11).
    tree_epoch: AtomicU64,
}

/// A pin on a frame, released on drop.
struct Pin<'a> {
    pool: &'a BufferPool,
    idx: u32,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.pool.unpin(self.idx);
    }
}

/// A shared latch on a cached page (pinned while held). Fields drop in
/// order: the latch goes before the pin (B1).
pub struct PageRead<'a> {
    g: RwLockReadGuard<'a, FrameBuf>,
    _pin: Pin<'a>,
}

/// An exclusive latch on a cached page (pinned while held).
pub struct PageWrite<'a> {
    g: RwLockWriteGuard<'a, FrameBuf>,
    pin: Pin<'a>,
}

impl std::fmt::Debug for PageRead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PageRead({})", self.g.id)
    }
}

impl std::fmt::Debug for PageWrite<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PageWrite({})", self.g.id)
    }
}

impl PageRead<'_> {
    /// The page's id.
    pub fn id(&self) -> PageId {
        self.g.id
    }
}

impl PageWrite<'_> {
    /// The page's id.
    pub fn id(&self) -> PageId {
        self.g.id
    }

    /// Whether the load found the page corrupt (only under
    /// [`Load::AllowCorrupt`]); cleared by [`PageWrite::clear_corrupt`].
    pub fn was_corrupt(&self) -> bool {
        self.g.corrupt
    }

    /// The caller rebuilt the page whole.
    pub fn clear_corrupt(&mut self) {
        self.g.corrupt = false;
    }

    /// Record that the page holds changes not yet on disk, the oldest of
    /// them at or after `lsn` (B4). Call with the latch held until the
    /// change's log record is appended.
    pub fn mark_dirty(&self, lsn: u64) {
        // B4/B9: 0 means clean, and the lower bound is not below the
        // changes already on the page (page LSNs only grow, page P3).
        assert!(
            lsn != 0 && page::lsn(&self.g.buf) <= lsn,
            "buffer B4: {} marked dirty at LSN {lsn} below its page LSN {}",
            self.g.id,
            page::lsn(&self.g.buf)
        );
        let f = self.pin.pool.frame(self.pin.idx);
        if f.oldest.load(Ordering::Acquire) == 0 {
            f.oldest.store(lsn, Ordering::Release);
            let fresh = self.pin.pool.flush_list.lock().insert((lsn, self.g.id.0));
            debug_assert!(
                fresh,
                "buffer B9: {} was on the flush list while clean",
                self.g.id
            );
        }
    }
}

impl Deref for PageRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.g.buf
    }
}

impl Deref for PageWrite<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.g.buf
    }
}

impl DerefMut for PageWrite<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.g.buf
    }
}

impl<'a> PageWrite<'a> {
    /// Turn the exclusive latch into a shared one without releasing it.
    pub fn downgrade(self) -> PageRead<'a> {
        let PageWrite { g, pin } = self;
        PageRead {
            g: RwLockWriteGuard::downgrade(g),
            _pin: pin,
        }
    }
}

/// Frames for a pool of `bytes` with pages of `page_size` (at least 32).
pub fn frames_for(bytes: u64, page_size: usize) -> usize {
    ((bytes / page_size as u64) as usize).max(32)
}

impl BufferPool {
    /// A pool of `frames` pages over `file`, with an optional doublewrite
    /// area for torn-page protection.
    pub fn new(file: Arc<DataFile>, frames: usize, doublewrite: Option<Doublewrite>) -> Self {
        let page_size = file.page_size();
        let frames = frames.max(32);
        let (arena, pieces) = Arena::new(frames, page_size);
        let frame_vec: Vec<Frame> = pieces
            .into_iter()
            .map(|buf| Frame {
                latch: RwLock::new(FrameBuf {
                    buf,
                    id: PageId(NO_PAGE),
                    state: State::Empty,
                    corrupt: false,
                }),
                page: AtomicU64::new(NO_PAGE),
                pins: AtomicU32::new(0),
                oldest: AtomicU64::new(0),
                accessed: AtomicBool::new(false),
                ahead: AtomicBool::new(false),
                reading: AtomicBool::new(false),
                flushing: AtomicBool::new(false),
            })
            .collect();
        let nshards = (crate::stats::cores() * 8).next_power_of_two();
        BufferPool {
            page_size,
            frames: frame_vec.into_boxed_slice(),
            arena,
            shards: (0..nshards)
                .map(|_| CachePadded::new(RwLock::new(HashMap::default())))
                .collect(),
            lru: Mutex::new(Lru::new(frames)),
            flush_list: Mutex::new(BTreeSet::new()),
            file,
            wal: OnceLock::new(),
            lsn_ceiling: AtomicU64::new(u64::MAX),
            doublewrite,
            counters: PoolCounters::default(),
            poisoned: Mutex::new(None),
            is_poisoned: AtomicBool::new(false),
            // B11: a random start per pool, so no epoch read from
            // another pool (another open) is ever this pool's.
            tree_epoch: AtomicU64::new(std::hash::BuildHasher::hash_one(
                &std::hash::RandomState::new(),
                0u8,
            )),
        }
    }

    /// Count a B+tree structure change (B11): a node split, or a node
    /// page freed. Called with the node latched, before it changes.
    pub(crate) fn note_tree_change(&self) {
        self.tree_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// B+tree structure changes since open (B11). Read twice with the
    /// same node latched, an unchanged value means no node of any tree
    /// split or was freed in between (B+tree append hints rely on it:
    /// `btree` AH1).
    pub(crate) fn tree_epoch(&self) -> u64 {
        self.tree_epoch.load(Ordering::SeqCst)
    }

    /// Install the log whose durability page writes wait for (B2). Before
    /// this (during recovery, whose records are already durable) page
    /// writes do not wait.
    pub fn set_log(&self, log: Arc<Log>) {
        let _ = self.wal.set(log);
    }

    /// Before the log is installed: no page on disk can carry an LSN
    /// above `lsn` (B10; recovery passes the end of the log it may scan).
    pub fn set_lsn_ceiling(&self, lsn: u64) {
        self.lsn_ceiling.store(lsn, Ordering::Release);
    }

    /// B10 for the pages recovery brought in, once the log's end `end` is
    /// known (they were read against the looser ceiling of one lap): a
    /// page in memory whose LSN is beyond it is damage (a checksum that
    /// happened to match), refused before anything changes it. For a
    /// store's open only, when nothing else uses the pool.
    pub fn check_lsns_below(&self, end: u64) -> Result<()> {
        for f in self.frames.iter() {
            let g = f.latch.read();
            if g.state == State::Valid && !g.corrupt && page::lsn(&g.buf) > end {
                return Err(Error::CorruptPage {
                    file: self.file.path().to_path_buf(),
                    page: g.id.0,
                    reason: format!(
                        "page LSN {} is beyond the end of the log ({end}): no page can be \
                         newer than the log that describes it",
                        page::lsn(&g.buf)
                    ),
                });
            }
        }
        Ok(())
    }

    /// The highest LSN a page read from disk may carry (B10): the log's
    /// end once installed, else the ceiling recovery set.
    fn lsn_ceiling(&self) -> u64 {
        match self.wal.get() {
            Some(log) => log.end_lsn().0,
            None => self.lsn_ceiling.load(Ordering::Acquire),
        }
    }

    /// Refuse every page write from now on (memory holds changes that no
    /// log record describes; see `mtr` M4).
    pub fn poison(&self, why: &str) {
        let mut p = self.poisoned.lock();
        if p.is_none() {
            tracing::error!(reason = why, "buffer pool poisoned; reopen the database");
            *p = Some(why.to_string());
        }
        self.is_poisoned.store(true, Ordering::Release);
    }

    /// The poisoned state as an error, if the pool is poisoned.
    pub fn check_poisoned(&self) -> Result<()> {
        if self.is_poisoned.load(Ordering::Acquire) {
            let cause = self.poisoned.lock().clone();
            // `poison` stores the cause before it sets the flag.
            debug_assert!(cause.is_some(), "buffer: poisoned without a cause");
            return Err(Error::Poisoned {
                cause: cause.unwrap_or_default(),
            });
        }
        Ok(())
    }

    /// The page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The tablespace file.
    pub fn file(&self) -> &Arc<DataFile> {
        &self.file
    }

    #[allow(clippy::indexing_slicing)] // idx always comes from 0..frames.len()
    fn frame(&self, idx: u32) -> &Frame {
        &self.frames[idx as usize]
    }

    #[allow(clippy::indexing_slicing)] // the mask keeps the index in range
    fn shard(&self, id: u64) -> &Shard {
        // Fibonacci hashing spreads consecutive page ids over shards.
        let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        &self.shards[(h as usize) & (self.shards.len() - 1)]
    }

    /// Pin the cached frame of `id`, if any.
    fn pin_cached(&self, id: PageId) -> Option<u32> {
        let map = self.shard(id.0).read();
        let idx = *map.get(&id.0)?;
        // The page's header and slots, fetched while the pin and the latch
        // wait for the frame's own line.
        self.arena.prefetch(idx as usize, PREFETCH_LINES);
        self.frame(idx).pins.fetch_add(1, Ordering::AcqRel);
        Some(idx)
    }

    fn unpin(&self, idx: u32) {
        let before = self.frame(idx).pins.fetch_sub(1, Ordering::AcqRel);
        // B8: a wrapped count would keep the frame from eviction forever,
        // or let it go while still in use.
        assert!(before > 0, "buffer B8: frame {idx} unpinned with no pin");
    }

    /// Shared latch on page `id`, read from disk if needed (verified).
    pub fn fetch_read(&self, id: PageId) -> Result<PageRead<'_>> {
        loop {
            if let Some(p) = self.latch_read(id, true)? {
                return Ok(p);
            }
        }
    }

    /// A shared latch on page `id` only if it is cached and no thread
    /// holds it exclusively: never reads from disk and never waits (not
    /// even for a read in flight), so never refuses a thread that must
    /// not wait (`wait` W1). For hints (a scan's read-ahead planning).
    pub fn try_fetch_read_cached(&self, id: PageId) -> Option<PageRead<'_>> {
        let idx = self.pin_cached(id)?;
        let f = self.frame(idx);
        match f.latch.try_read() {
            Some(g) if g.id == id && g.state == State::Valid => {
                self.note_hit(f);
                Some(PageRead {
                    g,
                    _pin: Pin { pool: self, idx },
                })
            }
            g => {
                drop(g);
                self.unpin(idx);
                None
            }
        }
    }

    /// [`BufferPool::fetch_read`] that does not wait for a latch: `None`
    /// when the page is cached and another thread holds it exclusively.
    /// A descent uses it for the child while it holds the parent, so that
    /// it never queues for a busy child with the parent latched (which
    /// would stall every structure change waiting for the parent).
    pub fn try_fetch_read(&self, id: PageId) -> Result<Option<PageRead<'_>>> {
        self.latch_read(id, false)
    }

    /// Exclusive latch on page `id` (see [`Load`] for how it is read).
    pub fn fetch_write(&self, id: PageId, how: Load) -> Result<PageWrite<'_>> {
        loop {
            if let Some(p) = self.latch_write(id, how, true)? {
                return Ok(p);
            }
        }
    }

    /// [`BufferPool::fetch_write`] that does not wait for a latch: `None`
    /// when the page is cached and another thread holds it (see
    /// [`BufferPool::try_fetch_read`]).
    pub fn try_fetch_write(&self, id: PageId, how: Load) -> Result<Option<PageWrite<'_>>> {
        self.latch_write(id, how, false)
    }

    /// Shared latch on `id`, waiting for it when `wait`; otherwise `None`
    /// if the page is cached and latched exclusively by another thread.
    /// (With `wait`, never `None`.)
    pub(crate) fn latch_read(&self, id: PageId, wait: bool) -> Result<Option<PageRead<'_>>> {
        loop {
            if let Some(idx) = self.pin_cached(id) {
                let f = self.frame(idx);
                let g = match self.take_latch(f, wait, || f.latch.try_read(), || f.latch.read()) {
                    Ok(g) => g,
                    Err(e) => {
                        self.unpin(idx);
                        return Err(e);
                    }
                };
                let Some(g) = g else {
                    self.unpin(idx);
                    return Ok(None);
                };
                if g.id == id && g.state == State::Valid {
                    self.note_hit(f);
                    return Ok(Some(PageRead {
                        g,
                        _pin: Pin { pool: self, idx },
                    }));
                }
                drop(g);
                self.unpin(idx);
                continue;
            }
            if let Some(w) = self.load(id, Load::Verify)? {
                return Ok(Some(w.downgrade()));
            }
        }
    }

    /// [`BufferPool::latch_read`], exclusively.
    pub(crate) fn latch_write(
        &self,
        id: PageId,
        how: Load,
        wait: bool,
    ) -> Result<Option<PageWrite<'_>>> {
        loop {
            if let Some(idx) = self.pin_cached(id) {
                let f = self.frame(idx);
                let g = match self.take_latch(f, wait, || f.latch.try_write(), || f.latch.write()) {
                    Ok(g) => g,
                    Err(e) => {
                        self.unpin(idx);
                        return Err(e);
                    }
                };
                let Some(g) = g else {
                    self.unpin(idx);
                    return Ok(None);
                };
                if g.id == id && g.state == State::Valid {
                    self.note_hit(f);
                    return Ok(Some(PageWrite {
                        g,
                        pin: Pin { pool: self, idx },
                    }));
                }
                drop(g);
                self.unpin(idx);
                continue;
            }
            if let Some(w) = self.load(id, how)? {
                return Ok(Some(w));
            }
        }
    }

    /// Read the `n` adjacent pages from `first` on into the pool where
    /// they are not cached, and let them go at once: pages a scan will
    /// soon ask for (`store::read_ahead`). Each stretch of pages not
    /// cached is read with one request (`DataFile::read_pages`), cut at
    /// [`BufferPool::max_run`] pages and where no further frame is free
    /// at once (only a stretch's first frame is waited for, as a demand
    /// read waits for its one). Each page is published as a demand read
    /// publishes its page and enters the LRU's old list unaccessed,
    /// flagged as read ahead (B12); a page cached meanwhile is left
    /// alone. A page that fails (I/O, a corrupt page) fails alone: its
    /// frame is given back as after a failed demand read, and the caller
    /// that later needs the page reads it and meets the error itself.
    pub(crate) fn read_ahead_run(&self, first: PageId, n: usize) -> RunRead {
        let page = |k: usize| PageId(first.0.saturating_add(k as u64));
        let mut out = RunRead::default();
        let mut pos = 0;
        while pos < n {
            if self.is_cached(page(pos)) {
                pos += 1;
                continue;
            }
            let mut len = 1;
            while pos + len < n && len < self.max_run() && !self.is_cached(page(pos + len)) {
                len += 1;
            }
            // The frames first, with nothing published: a thread never
            // holds a page latched while it waits for a frame, and it
            // waits only for the first.
            let mut spare = Vec::with_capacity(len);
            match self.free_frame() {
                Ok(idx) => spare.push(idx),
                Err(e) => {
                    out.fail(n - pos, e);
                    break;
                }
            }
            while spare.len() < len {
                match self.try_free_frame() {
                    Some(idx) => spare.push(idx),
                    None => break,
                }
            }
            // B8 for every frame before any is published (see `claim`).
            for &idx in &spare {
                self.assert_unused(idx, page(pos));
            }
            let mut claimed = Vec::with_capacity(spare.len());
            let mut frames = spare.into_iter();
            for (k, idx) in frames.by_ref().enumerate() {
                match self.claim(idx, page(pos + k), Load::Verify, true) {
                    Ok(Some(g)) => claimed.push((idx, g)),
                    Ok(None) => break,
                    Err(e) => {
                        out.fail(1, e);
                        break;
                    }
                }
            }
            {
                let mut lru = self.lru.lock();
                for idx in frames {
                    lru.push_free(idx);
                }
            }
            let got = claimed.len();
            let whole = if got > 1 {
                let mut bufs: Vec<&mut [u8]> =
                    claimed.iter_mut().map(|(_, g)| &mut g.buf[..]).collect();
                Some(self.file.read_pages(page(pos), &mut bufs))
            } else {
                None
            };
            for (k, (idx, mut g)) in claimed.into_iter().enumerate() {
                let id = page(pos + k);
                let outcome = match &whole {
                    Some(Ok(())) => self.check_read(id, &mut g, Load::Verify),
                    // One page, or each page of a failed request again on
                    // its own, for its own error.
                    None | Some(Err(_)) => self.read_into(id, &mut g, Load::Verify),
                };
                // A page read is let go at once (its frame unlatched and
                // unpinned); the pool counts it (`read_ahead`).
                if let Err(e) = self.finish(idx, g, outcome) {
                    out.fail(1, e);
                }
            }
            pos += got.max(1);
        }
        out
    }

    /// The most pages [`BufferPool::read_ahead_run`] reads in one
    /// request: [`MAX_RUN_BYTES`], and no more than a 64th of the frames
    /// (read-ahead holds them unpublished while it gathers a stretch).
    pub(crate) fn max_run(&self) -> usize {
        (MAX_RUN_BYTES / self.page_size)
            .min(self.frames.len() / 64)
            .max(1)
    }

    /// Wait until page `id`'s latch could be taken (shared, or exclusive
    /// when `exclusive`), without keeping it: what a descent does, with
    /// nothing latched, after a `try_fetch_*` of the page failed. Returns
    /// at once when the page is not cached.
    ///
    /// A thread that must not block (`wait::without_waiting`) gets
    /// [`Error::WouldWait`] instead when the latch is held for a read of
    /// the page from disk (W1), having waited for nothing.
    pub fn wait_for_latch(&self, id: PageId, exclusive: bool) -> Result<()> {
        self.counters.busy_waits.incr();
        if let Some(idx) = self.pin_cached(id) {
            let f = self.frame(idx);
            if let Err(e) = self.may_wait_for(f) {
                self.unpin(idx);
                return Err(e);
            }
            if exclusive {
                drop(f.latch.write());
            } else {
                drop(f.latch.read());
            }
            self.unpin(idx);
        }
        Ok(())
    }

    /// Frame `f`'s latch, by `try_latch`; when that fails and `wait`, by
    /// `latch` (blocking), unless this thread must not block for a disk
    /// read ([`BufferPool::may_wait_for`]); `None` when busy without
    /// `wait`.
    fn take_latch<G>(
        &self,
        f: &Frame,
        wait: bool,
        try_latch: impl FnOnce() -> Option<G>,
        latch: impl FnOnce() -> G,
    ) -> Result<Option<G>> {
        match try_latch() {
            Some(g) => Ok(Some(g)),
            None if wait => {
                self.may_wait_for(f)?;
                Ok(Some(latch()))
            }
            None => Ok(None),
        }
    }

    /// `Ok` unless this thread must not block and `f`'s latch is held for
    /// a read from disk (W1: a wait for a disk read is refused, whoever
    /// reads; a wait for a page operation is not).
    fn may_wait_for(&self, f: &Frame) -> Result<()> {
        if f.reading.load(Ordering::Acquire) {
            crate::wait::check("a page read")?;
        }
        Ok(())
    }

    fn note_hit(&self, f: &Frame) {
        // A page marked accessed was never flagged `ahead` since its load
        // (B12), so a hot page costs one load here, as before.
        if !f.accessed.load(Ordering::Relaxed) {
            if f.ahead.load(Ordering::Relaxed) {
                // B12: the first request of a page read ahead is the read
                // it stood in for, not a second touch.
                f.ahead.store(false, Ordering::Relaxed);
            } else {
                f.accessed.store(true, Ordering::Relaxed);
            }
        }
        self.counters.hits.incr();
    }

    /// Whether page `id` is cached (or being read into the pool): for
    /// tests, status and read-ahead's hints.
    pub fn is_cached(&self, id: PageId) -> bool {
        self.shard(id.0).read().contains_key(&id.0)
    }

    /// Mark cached page `id` as being read from disk, or not (tests of
    /// `wait` W1: a real read is too quick to catch).
    #[cfg(test)]
    pub(crate) fn set_reading(&self, id: PageId, on: bool) {
        if let Some(&idx) = self.shard(id.0).read().get(&id.0) {
            self.frame(idx).reading.store(on, Ordering::Release);
        }
    }

    /// Whether cached page `id` is marked accessed (a second touch), for
    /// tests of B12.
    #[cfg(test)]
    pub(crate) fn is_accessed(&self, id: PageId) -> Option<bool> {
        let idx = *self.shard(id.0).read().get(&id.0)?;
        Some(self.frame(idx).accessed.load(Ordering::Relaxed))
    }

    /// Bring `id` into a frame and return it exclusively latched; `None`
    /// when another thread cached it first (the caller retries the hit).
    fn load(&self, id: PageId, how: Load) -> Result<Option<PageWrite<'_>>> {
        self.load_as(id, how, false)
    }

    /// [`BufferPool::load`] for a reader (`ahead` false, a miss) or for
    /// read-ahead (B12).
    fn load_as(&self, id: PageId, how: Load, ahead: bool) -> Result<Option<PageWrite<'_>>> {
        // W1: before a frame is taken (an eviction may write, a read
        // waits for the disk), a thread that must not block stops here.
        crate::wait::check("a page read")?;
        let idx = self.free_frame()?;
        let Some(mut g) = self.claim(idx, id, how, ahead)? else {
            return Ok(None);
        };
        let outcome = if how == Load::Fresh {
            g.buf.fill(0);
            Ok(())
        } else {
            self.read_into(id, &mut g, how)
        };
        self.finish(idx, g, outcome).map(Some)
    }

    /// Publish free frame `idx` (from [`BufferPool::free_frame`]) as the
    /// frame of page `id`, latched exclusively and pinned, flagged as
    /// being read unless `how` is `Fresh`; `None`, with the frame given
    /// back to the free list, when another thread cached the page first.
    /// The caller reads the page into it and calls
    /// [`BufferPool::finish`].
    fn claim(
        &self,
        idx: u32,
        id: PageId,
        how: Load,
        ahead: bool,
    ) -> Result<Option<RwLockWriteGuard<'_, FrameBuf>>> {
        let f = self.frame(idx);
        let Some(mut g) = f.latch.try_write() else {
            self.lru.lock().push_free(idx);
            return Err(Error::InvalidArgument {
                what: "buffer pool state",
                reason: "a free frame was latched (bug)".into(),
            });
        };
        self.assert_unused(idx, id);
        {
            let mut map = self.shard(id.0).write();
            if map.contains_key(&id.0) {
                drop(map);
                drop(g);
                self.lru.lock().push_free(idx);
                return Ok(None);
            }
            f.reading.store(how != Load::Fresh, Ordering::Release);
            map.insert(id.0, idx);
            f.pins.fetch_add(1, Ordering::AcqRel);
            f.page.store(id.0, Ordering::Release);
        }
        g.id = id;
        g.state = State::Empty;
        g.corrupt = false;
        f.accessed.store(false, Ordering::Relaxed);
        f.ahead.store(ahead, Ordering::Relaxed);
        self.lru.lock().push_old(idx);
        if ahead {
            self.counters.read_ahead.incr();
        } else {
            self.counters.misses.incr();
        }
        Ok(Some(g))
    }

    /// B8: a frame from the free list or an eviction (handed out for page
    /// `id`) has no pins (B1), and is clean and not being written (B1,
    /// B6). Checked before the frame is published in the hash: a panic
    /// after that would leave the page mapped to a frame that never
    /// becomes valid, and every later access to it would spin.
    fn assert_unused(&self, idx: u32, id: PageId) {
        let f = self.frame(idx);
        let (pins, oldest, flushing) = (
            f.pins.load(Ordering::Acquire),
            f.oldest.load(Ordering::Acquire),
            f.flushing.load(Ordering::Acquire),
        );
        assert!(
            pins == 0 && oldest == 0 && !flushing,
            "buffer B8: frame {idx} handed out for {id} with {pins} pins, oldest {oldest}, flushing {flushing}"
        );
    }

    /// End the load of frame `idx` (claimed by [`BufferPool::claim`]):
    /// valid after `outcome` `Ok`, else unpublished and failed.
    fn finish<'p>(
        &'p self,
        idx: u32,
        mut g: RwLockWriteGuard<'p, FrameBuf>,
        outcome: Result<()>,
    ) -> Result<PageWrite<'p>> {
        let f = self.frame(idx);
        f.reading.store(false, Ordering::Release);
        match outcome {
            Ok(()) => {
                g.state = State::Valid;
                Ok(PageWrite {
                    g,
                    pin: Pin { pool: self, idx },
                })
            }
            Err(e) => {
                // Threads that found the frame in the hash meanwhile hold
                // pins on it and will see `Failed`; the frame stays in the
                // LRU without a page and is reused by eviction once they
                // have let go (never straight from the free list, B1).
                let id = g.id;
                g.state = State::Failed;
                g.id = PageId(NO_PAGE);
                drop(g);
                self.shard(id.0).write().remove(&id.0);
                f.page.store(NO_PAGE, Ordering::Release);
                f.pins.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }

    fn read_into(&self, id: PageId, g: &mut FrameBuf, how: Load) -> Result<()> {
        self.file.read_page(id, &mut g.buf)?;
        self.check_read(id, g, how)
    }

    /// Verify page `id` just read into `g` (B10); a corrupt page is an
    /// error unless `how` is `AllowCorrupt`.
    fn check_read(&self, id: PageId, g: &mut FrameBuf, how: Load) -> Result<()> {
        let check = match self.file.check(id, &g.buf)? {
            // B10: a page is written only after the log is durable to its
            // LSN (B2), so one that claims a later LSN is damage (with a
            // checksum that happens to match), and would break page LSN
            // order (P3) at its next change.
            PageCheck::Valid if page::lsn(&g.buf) > self.lsn_ceiling() => {
                PageCheck::Corrupt(format!(
                    "page LSN {} is beyond the end of the log ({}): no page can be newer \
                     than the log that describes it",
                    page::lsn(&g.buf),
                    self.lsn_ceiling()
                ))
            }
            other => other,
        };
        match check {
            PageCheck::Valid | PageCheck::Zero => Ok(()),
            PageCheck::Corrupt(reason) => {
                if how == Load::AllowCorrupt {
                    g.corrupt = true;
                    Ok(())
                } else {
                    Err(Error::CorruptPage {
                        file: self.file.path().to_path_buf(),
                        page: id.0,
                        reason,
                    })
                }
            }
        }
    }

    /// One pass for a frame with no page: the free list, else a clean
    /// victim evicted from the cold end of the LRU (B1). The dirty pages
    /// met on the way (to be written before a frame can come free) go into
    /// `dirty` when given; without it the pass only looks for a clean
    /// page in the old list ([`BufferPool::try_free_frame`]).
    fn pick_frame(&self, mut dirty: Option<&mut Vec<u32>>) -> Option<u32> {
        let mut lru = self.lru.lock();
        if let Some(idx) = lru.pop_free() {
            // Outside the LRU mutex: the first call starts a thread.
            drop(lru);
            self.arena.note_used(idx as usize);
            return Some(idx);
        }
        let mut cur = lru.tail_for_eviction();
        let mut steps = 0usize;
        while cur != NIL && steps < self.frames.len() * 2 {
            steps += 1;
            let next = lru.prev_for_eviction(cur);
            let f = self.frame(cur);
            if f.pins.load(Ordering::Acquire) > 0 {
                cur = next;
                continue;
            }
            // Write cold dirty pages before touching the young (hot)
            // list; a pass that only looks for a clean frame never
            // touches it.
            if !lru.is_old(cur) && dirty.as_ref().is_none_or(|d| !d.is_empty()) {
                break;
            }
            // Second chance: an old page touched again moves to
            // the young head, a young one back to it.
            if f.accessed.swap(false, Ordering::Relaxed) {
                lru.make_young(cur, |i| {
                    self.frame(i).accessed.store(false, Ordering::Relaxed)
                });
                cur = next;
                continue;
            }
            if f.oldest.load(Ordering::Acquire) != 0 {
                if let Some(d) = dirty.as_deref_mut()
                    && d.len() < LRU_FLUSH_BATCH
                {
                    d.push(cur);
                }
                cur = next;
                continue;
            }
            if self.try_evict(cur) {
                lru.remove(cur);
                self.counters.evictions.incr();
                return Some(cur);
            }
            cur = next;
        }
        None
    }

    /// [`BufferPool::free_frame`] that neither writes nor waits: `None`
    /// when no frame is free and no clean page can be evicted now.
    fn try_free_frame(&self) -> Option<u32> {
        self.pick_frame(None)
    }

    /// A frame with no page: from the free list, or by evicting (B1),
    /// writing a dirty victim first when no clean one is found.
    fn free_frame(&self) -> Result<u32> {
        let mut stuck_since = None;
        loop {
            let mut dirty = Vec::new();
            if let Some(idx) = self.pick_frame(Some(&mut dirty)) {
                return Ok(idx);
            }
            if !dirty.is_empty() {
                // No clean victim: write a batch of dirty pages from the
                // cold end (one doublewrite round for all).
                self.counters.lru_flushes.add(dirty.len() as u64);
                if self.flush_frames(&dirty, WalRule::Sync)? > 0 {
                    stuck_since = None;
                    continue;
                }
            }
            // Every frame is pinned, or dirty and latched or being written
            // by someone else. Wait for one to come free; give up only if
            // none does for seconds (the pool is too small for the
            // concurrent work).
            let waited = stuck_since.get_or_insert_with(std::time::Instant::now);
            if waited.elapsed() > std::time::Duration::from_secs(5) {
                return Err(Error::LimitExceeded {
                    what: "pinned buffer-pool pages (pool too small for the concurrent work)",
                    actual: self.frames.len() as u64,
                    max: self.frames.len() as u64,
                });
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Drop page `id` from the pool if it is cached, unpinned, clean and
    /// not latched, so that its next access reads it from the file (how a
    /// test makes an access need a read); whether it was dropped.
    pub fn evict(&self, id: PageId) -> bool {
        // The LRU's lock before a shard's, as `free_frame` takes them,
        // and held throughout: nobody else detaches a frame meanwhile.
        let mut lru = self.lru.lock();
        let Some(idx) = self.shard(id.0).read().get(&id.0).copied() else {
            return false;
        };
        // Only a frame that holds this page (`try_evict` would free an
        // empty one too, which is not ours to free).
        if self.frame(idx).page.load(Ordering::Acquire) != id.0 || !self.try_evict(idx) {
            return false;
        }
        lru.remove(idx);
        lru.push_free(idx);
        self.counters.evictions.incr();
        true
    }

    /// Detach frame `idx` from its page if it is unpinned and clean (B1).
    fn try_evict(&self, idx: u32) -> bool {
        let f = self.frame(idx);
        let id = f.page.load(Ordering::Acquire);
        if id == NO_PAGE {
            // A frame whose load failed: free once nobody holds it.
            return f.pins.load(Ordering::Acquire) == 0 && f.latch.try_write().is_some();
        }
        let mut map = self.shard(id).write();
        if map.get(&id) != Some(&idx)
            || f.pins.load(Ordering::Acquire) != 0
            || f.oldest.load(Ordering::Acquire) != 0
            || f.flushing.load(Ordering::Acquire)
        {
            return false;
        }
        let Some(mut g) = f.latch.try_write() else {
            return false;
        };
        map.remove(&id);
        f.page.store(NO_PAGE, Ordering::Release);
        g.id = PageId(NO_PAGE);
        g.state = State::Empty;
        true
    }

    /// Pin frame `idx` if it still holds a page.
    fn pin_frame(&self, idx: u32) -> Option<PageId> {
        let f = self.frame(idx);
        let id = f.page.load(Ordering::Acquire);
        if id == NO_PAGE {
            return None;
        }
        let map = self.shard(id).read();
        if map.get(&id) != Some(&idx) {
            return None;
        }
        f.pins.fetch_add(1, Ordering::AcqRel);
        Some(PageId(id))
    }

    /// Write the dirty pages in frames `idxs` (one batch: one log wait,
    /// one doublewrite write and sync, then the home writes). Each page is
    /// copied under a shared latch and unpinned at once, so a batch never
    /// holds frames while it waits for the disk. Returns pages written.
    ///
    /// A page latched exclusively is skipped (B7), and one whose latch is
    /// taken again before it can be marked clean stays dirty; a later
    /// round writes it.
    fn flush_frames(&self, idxs: &[u32], wal: WalRule) -> Result<usize> {
        let mut batch: Vec<(u32, PageId, u64, AlignedBuf)> = Vec::with_capacity(idxs.len());
        // B2 without a sync: pages changed past this are left for later.
        let durable = match (wal, self.wal.get()) {
            (WalRule::DurableOnly, Some(log)) => log.durable_lsn().0,
            _ => u64::MAX,
        };
        for &idx in idxs {
            let Some(id) = self.pin_frame(idx) else {
                continue;
            };
            let f = self.frame(idx);
            if f.flushing.swap(true, Ordering::AcqRel) {
                // Another flusher has it (B6).
                self.unpin(idx);
                continue;
            }
            let copy = {
                // Never wait for a latch while holding flags (B7).
                let g = f.latch.try_read();
                if let Some(g) = g.filter(|g| g.id == id)
                    && g.state == State::Valid
                    && f.oldest.load(Ordering::Acquire) != 0
                {
                    let mut copy = AlignedBuf::new(self.page_size);
                    copy.copy_from_slice(&g.buf);
                    Some(copy)
                } else {
                    None
                }
            };
            let copy = copy.filter(|c| {
                let keep = page::lsn(c) <= durable;
                if !keep {
                    self.counters.flushes_deferred.incr();
                }
                keep
            });
            if let Some(mut copy) = copy {
                let lsn = page::lsn(&copy);
                page::seal(&mut copy);
                batch.push((idx, id, lsn, copy));
            } else {
                f.flushing.store(false, Ordering::Release);
            }
            self.unpin(idx);
        }
        let written = self.write_batch(&batch);
        if let Err(e) = &written {
            // A failed page write is never retried blindly: the state of
            // the data file (and the doublewrite slots) is unknown.
            if !matches!(e, Error::Poisoned { .. }) {
                self.poison(&format!("a page write failed: {e}"));
            }
        }
        // The first B9 violation, reported once every flag is cleared (a
        // panic in this loop would leave frames flagged for good, never
        // evicted or flushed again).
        let mut broken: Option<String> = None;
        for (idx, id, lsn, _) in &batch {
            let f = self.frame(*idx);
            // The frame still holds the page: it is dirty and flagged, and
            // neither kind of frame is evicted (B1, B6).
            if written.is_ok() {
                let g = f.latch.try_read();
                // B3: clean only if nothing changed since the copy (a page
                // we could not latch stays dirty and is written again).
                if let Some(g) = g {
                    debug_assert_eq!(g.id, *id, "buffer B6: a flagged frame changed pages");
                    if page::lsn(&g.buf) == *lsn {
                        // B9: we hold the flag (B6), so nobody cleaned it
                        // since the copy, which saw it dirty.
                        let old = f.oldest.swap(0, Ordering::AcqRel);
                        let listed = old != 0 && self.flush_list.lock().remove(&(old, id.0));
                        if !listed && broken.is_none() {
                            broken = Some(format!(
                                "{id} (oldest {old}) was not dirty on the flush list"
                            ));
                        }
                    }
                }
            }
            f.flushing.store(false, Ordering::Release);
        }
        if let Some(b) = broken {
            #[allow(clippy::panic)] // B9 broken: our bug
            {
                panic!("buffer B9: flushed page {b}; only its flusher cleans it");
            }
        }
        written?;
        self.counters.flushed.add(batch.len() as u64);
        Ok(batch.len())
    }

    fn write_batch(&self, batch: &[(u32, PageId, u64, AlignedBuf)]) -> Result<()> {
        let Some(max_lsn) = batch.iter().map(|b| b.2).max() else {
            return Ok(()); // nothing to write
        };
        self.check_poisoned()?;
        // B2: the log first.
        if let Some(log) = self.wal.get() {
            log.make_durable(Lsn(max_lsn))?;
            // What `make_durable` promises, in the part this module can see
            // without a race (`durable_lsn` may trail a finished sync for a
            // moment; `written` never trails `durable`, log core I1).
            debug_assert!(
                log.written_lsn().0 >= max_lsn,
                "buffer B2: a page at LSN {max_lsn} would reach disk before its log"
            );
        }
        let pages: Vec<(PageId, &[u8])> = batch.iter().map(|b| (b.1, &b.3[..])).collect();
        match &self.doublewrite {
            Some(dw) => dw.write_through(&pages, &self.file),
            None => {
                for (id, p) in &pages {
                    self.file.write_page(*id, p)?;
                }
                Ok(())
            }
        }
    }

    /// Write up to `max` of the oldest dirty pages whose oldest change is
    /// below `below` (all when `u64::MAX`), following `wal` (B2). Returns
    /// pages written.
    pub fn flush_oldest(&self, max: usize, below: u64, wal: WalRule) -> Result<usize> {
        let ids: Vec<u64> = {
            let fl = self.flush_list.lock();
            fl.iter()
                .take_while(|(lsn, _)| *lsn < below)
                .take(max)
                .map(|&(_, id)| id)
                .collect()
        };
        let idxs: Vec<u32> = ids
            .iter()
            .filter_map(|&id| self.shard(id).read().get(&id).copied())
            .collect();
        self.flush_frames(&idxs, wal)
    }

    /// Write up to `max` dirty pages from the cold end of the LRU (the
    /// cleaner calls this so evictions find clean victims), following `wal`
    /// (B2). Returns pages written.
    pub fn flush_lru_tail(&self, max: usize, wal: WalRule) -> Result<usize> {
        let mut dirty = Vec::new();
        {
            let lru = self.lru.lock();
            let mut cur = lru.tail_for_eviction();
            let mut steps = 0;
            while cur != NIL && steps < max * 2 && dirty.len() < max && lru.is_old(cur) {
                steps += 1;
                let f = self.frame(cur);
                if f.pins.load(Ordering::Acquire) == 0 && f.oldest.load(Ordering::Acquire) != 0 {
                    dirty.push(cur);
                }
                cur = lru.prev_for_eviction(cur);
            }
        }
        if dirty.is_empty() {
            return Ok(0);
        }
        self.counters.lru_flushes.add(dirty.len() as u64);
        self.flush_frames(&dirty, wal)
    }

    /// Write every dirty page (in batches).
    pub fn flush_all(&self) -> Result<()> {
        loop {
            let before = self.dirty_pages();
            if before == 0 {
                return Ok(());
            }
            self.flush_oldest(64, u64::MAX, WalRule::Sync)?;
            if self.dirty_pages() >= before {
                // Pages kept changing under us; a later call finishes.
                std::thread::yield_now();
            }
        }
    }

    /// The oldest unflushed change's lower-bound LSN, if any page is dirty.
    pub fn oldest_dirty_lsn(&self) -> Option<u64> {
        self.flush_list.lock().first().map(|&(lsn, _)| lsn)
    }

    /// Number of dirty pages.
    pub fn dirty_pages(&self) -> usize {
        self.flush_list.lock().len()
    }

    /// Number of frames.
    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// Frames holding no page (taken before any eviction).
    pub fn free_frames(&self) -> usize {
        self.lru.lock().free_count()
    }

    /// A snapshot of state and counters.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            frames: self.frames.len() as u64,
            page_size: self.page_size as u64,
            hits: self.counters.hits.get(),
            misses: self.counters.misses.get(),
            evictions: self.counters.evictions.get(),
            dirty: self.dirty_pages() as u64,
            lru_flushes: self.counters.lru_flushes.get(),
            pages_flushed: self.counters.flushed.get(),
            busy_waits: self.counters.busy_waits.get(),
            flushes_deferred: self.counters.flushes_deferred.get(),
            read_ahead: self.counters.read_ahead.get(),
            data_io: self.file.counters.snapshot(),
            doublewrite_io: self.doublewrite.as_ref().map(|d| d.counters.snapshot()),
        }
    }
}
