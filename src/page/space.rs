//! The tablespace file (`data.qdb`): an array of pages, page 0 being the
//! superblock, and the counters for data-page I/O.
//!
//! Superblock layout (page 0, after the common header; all of it inside
//! the first 4 KiB so that it can be read before the page size is known):
//!
//! | bytes    | field |
//! | -------- | ----- |
//! | 48..56   | magic `QUILLDAT` |
//! | 56..60   | format version ([`SPACE_FORMAT_VERSION`]) |
//! | 60..64   | page size |
//! | 64..72   | space id (also in every page header) |
//! | 72..80   | page count: pages `0..count` exist (in use or free) |
//! | 80..88   | head of the free-page list (0 = empty) |
//! | 88..96   | number of free pages |
//! | 96..224  | 16 root slots (page ids of the trees a caller registered) |
//! | 224..240 | database id: the id of the redo log this tablespace belongs to (format 2; 0 in format 1) |
//! | 240..248 | table id floor: every table id below it was used (format 3; 0 before) |
//! | 248..252 | number of pending tree drops (format 3; 0 before) |
//! | 256..    | the pending drops, [`DROP_SLOTS`] of 24 bytes: tree root, table id, dropping transaction id |
//!
//! Invariants:
//! * S1. The superblock changes only through mini-transactions, like any
//!   other page, so it is recovered by redo like any other page.
//! * S2. Pages at or beyond the file's end read as zeros (never written,
//!   page P2); the file grows when such a page is first written.
//! * S3. A free page has type `Free` and holds the next free page's id at
//!   bytes 48..56; the list is threaded through the free pages themselves.
//! * S4. The database id is set when the tablespace is created (format 2)
//!   or first opened by a format 2 build (format 1, migrated by the store)
//!   and never changes; it equals the id in every header of the
//!   database's log files, and the store refuses to open a tablespace
//!   with a log whose id differs. Version and id share the first 512-byte
//!   sector, so a torn superblock write cannot separate them.
//! * S5. A tree listed as a pending drop is unreachable from the catalog
//!   (or its table's catalog entry is about to go, `store::drops`) and
//!   is freed, step by step, by deleting its entries; the final step
//!   frees its root page and removes it from the list in one
//!   mini-transaction, so a freed root is never listed. Bytes 240.. are
//!   zero in formats 1 and 2, which reads as no floor and no drops: a
//!   format 2 tablespace is format 3 without drops (migrated by setting
//!   the version at its first writable open).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{PAGE_HEADER, PageCheck, PageId, PageType, get_u32, get_u64, put, valid_page_size};
use crate::io::{AlignedBuf, File, OpenOptions, Vfs};
use crate::stats::{Counter, Histogram, HistogramSnapshot};
use crate::{Error, Result};

/// Magic bytes of a Quill tablespace file.
pub const SPACE_MAGIC: &[u8; 8] = b"QUILLDAT";
/// Tablespace format version this build writes. Version 2 added the
/// database id (S4); version 3 the table id floor and pending drops (S5);
/// version 4 compact undo records (`txn::undo` U5: its undo log may hold
/// records a version 3 build cannot read); version 5 insert undo
/// segments (`txn::undo_seg`, root slot 2, and roll pointers with the
/// insert bit, undo U6: a version 4 build would neither roll back the
/// segments' inserts after a crash nor read those pointers); version 6
/// cached undo segment pages (`txn::undo_seg` US6: a version 5 build
/// would take a cached page for a transaction's segment and fail its
/// recovery); version 7 update undo in segments (`txn::undo_seg` US7 and
/// roll pointers by place, undo U8: a version 6 build would read those
/// pointers as undo-tree keys and take a committed segment for an
/// unfinished transaction's); version 8 undo records of version 3,
/// whose old version may be a delta to the newer one (undo U9: a version
/// 7 build would refuse such a record as an unknown version, at rollback
/// or at the first read of an older version).
pub const SPACE_FORMAT_VERSION: u32 = 8;
/// Oldest tablespace format version this build reads (and migrates).
pub const MIN_SPACE_FORMAT_VERSION: u32 = 1;
/// Number of root slots in the superblock.
pub const ROOT_SLOTS: usize = 16;

/// Offset of the magic.
pub const SB_MAGIC: usize = PAGE_HEADER;
/// Offset of the format version.
pub const SB_VERSION: usize = 56;
/// Offset of the page size.
pub const SB_PAGE_SIZE: usize = 60;
/// Offset of the space id.
pub const SB_SPACE_ID: usize = 64;
/// Offset of the page count.
pub const SB_PAGE_COUNT: usize = 72;
/// Offset of the free-list head.
pub const SB_FREE_HEAD: usize = 80;
/// Offset of the free-page count.
pub const SB_FREE_COUNT: usize = 88;
/// Offset of root slot 0.
pub const SB_ROOTS: usize = 96;
/// Offset of the database id (S4).
pub const SB_DB_ID: usize = 224;
/// Offset of the table id floor (S5).
pub const SB_TABLE_ID_FLOOR: usize = 240;
/// Offset of the number of pending drops (S5).
pub const SB_DROP_COUNT: usize = 248;
/// Offset of the first pending drop (S5).
pub const SB_DROPS: usize = 256;
/// Bytes per pending drop: root page, table id, dropping transaction.
pub const DROP_ENTRY: usize = 24;
/// Room for pending drops (all within the first 4 KiB, the smallest page).
pub const DROP_SLOTS: usize = 128;
const _: () = assert!(SB_DROPS + DROP_SLOTS * DROP_ENTRY <= super::MIN_PAGE_SIZE);
/// Offset, in a free page, of the next free page's id (S3).
pub const FREE_NEXT: usize = PAGE_HEADER;

/// Write the body of a fresh superblock into `page` (already `init`ed).
pub fn init_superblock(page: &mut [u8], page_size: usize, space_id: u64, db_id: u128) {
    put(page, SB_MAGIC, SPACE_MAGIC);
    put(page, SB_VERSION, &SPACE_FORMAT_VERSION.to_le_bytes());
    put(page, SB_PAGE_SIZE, &(page_size as u32).to_le_bytes());
    put(page, SB_SPACE_ID, &space_id.to_le_bytes());
    put(page, SB_PAGE_COUNT, &1u64.to_le_bytes());
    put(page, SB_DB_ID, &db_id.to_le_bytes());
}

/// Whether page 0, whose first 4 KiB are `head`, passes its checksum at
/// the page size `head` names.
fn superblock_verifies(file: &dyn File, head: &[u8], size: u64) -> Result<bool> {
    let page_size = get_u32(head, SB_PAGE_SIZE) as usize;
    if !valid_page_size(page_size) || size < page_size as u64 {
        return Ok(false);
    }
    let mut page = AlignedBuf::new(page_size);
    file.read_exact_at(&mut page, 0)?;
    Ok(super::verify(&page, PageId(0), super::space_id(&page)) == PageCheck::Valid)
}

/// The page size of the Quill tablespace `file` (of `size` bytes) seems
/// to have, judged by its page 1 alone (a valid page whose header names
/// page 1): for telling a damaged superblock from a foreign file.
fn quill_pages_follow(file: &dyn File, size: u64) -> Result<Option<usize>> {
    let mut page_size = super::MIN_PAGE_SIZE;
    while page_size <= super::MAX_PAGE_SIZE {
        if size >= 2 * page_size as u64 {
            let mut page = AlignedBuf::new(page_size);
            file.read_exact_at(&mut page, page_size as u64)?;
            if super::verify(&page, PageId(1), super::space_id(&page)) == PageCheck::Valid {
                return Ok(Some(page_size));
            }
        }
        page_size *= 2;
    }
    Ok(None)
}

/// Counters for data-page I/O, kept apart from log and doublewrite I/O.
#[derive(Debug, Default)]
pub struct IoCounters {
    /// Page reads.
    pub reads: Counter,
    /// Read requests: a read of several adjacent pages is one.
    pub read_requests: Counter,
    /// Page writes.
    pub writes: Counter,
    /// Bytes written.
    pub write_bytes: Counter,
    /// Write latency, nanoseconds.
    pub write_latency: Histogram,
    /// Syncs.
    pub syncs: Counter,
    /// Sync latency, nanoseconds.
    pub sync_latency: Histogram,
}

/// A snapshot of [`IoCounters`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IoStats {
    /// Page reads.
    pub reads: u64,
    /// Read requests: a read of several adjacent pages is one.
    #[serde(default)]
    pub read_requests: u64,
    /// Page writes.
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Write latency (ns).
    pub write_latency: HistogramSnapshot,
    /// Syncs.
    pub syncs: u64,
    /// Sync latency (ns).
    pub sync_latency: HistogramSnapshot,
}

impl IoCounters {
    /// Take a snapshot.
    pub fn snapshot(&self) -> IoStats {
        IoStats {
            reads: self.reads.get(),
            read_requests: self.read_requests.get(),
            writes: self.writes.get(),
            write_bytes: self.write_bytes.get(),
            write_latency: self.write_latency.snapshot(),
            syncs: self.syncs.get(),
            sync_latency: self.sync_latency.snapshot(),
        }
    }
}

/// The open tablespace file.
#[derive(Debug)]
pub struct DataFile {
    file: Box<dyn File>,
    path: PathBuf,
    page_size: usize,
    space_id: u64,
    version: u32,
    db_id: u128,
    /// Allocated file length in bytes (grows in chunks; S2).
    allocated: AtomicU64,
    grow: parking_lot::Mutex<()>,
    /// Data-page I/O counters.
    pub counters: Arc<IoCounters>,
}

impl DataFile {
    /// Create a new tablespace file with a superblock of the given page
    /// size, belonging to database `db_id` (S4), durable (file and
    /// directory entry) on return.
    pub fn create(
        vfs: &dyn Vfs,
        path: &Path,
        page_size: usize,
        direct: bool,
        db_id: u128,
    ) -> Result<DataFile> {
        if !valid_page_size(page_size) {
            return Err(Error::InvalidArgument {
                what: "page size",
                reason: format!("{page_size} is not a power of two between 4 KiB and 64 KiB"),
            });
        }
        if vfs.exists(path)? {
            return Err(Error::AlreadyExists {
                path: path.to_path_buf(),
            });
        }
        let space_id = rand::random::<u64>() | 1;
        let opts = OpenOptions {
            create_new: true,
            write: true,
            direct,
            ..OpenOptions::default()
        };
        let file = vfs.open(path, opts)?;
        let mut page = AlignedBuf::new(page_size);
        super::init(&mut page, PageId(0), PageType::Superblock, space_id);
        init_superblock(&mut page, page_size, space_id, db_id);
        super::seal(&mut page);
        file.write_all_at(&page, 0)?;
        file.sync_all()?;
        if let Some(dir) = path.parent() {
            vfs.sync_dir(dir)?;
        }
        Ok(DataFile {
            file,
            path: path.to_path_buf(),
            page_size,
            space_id,
            version: SPACE_FORMAT_VERSION,
            db_id,
            allocated: AtomicU64::new(page_size as u64),
            grow: parking_lot::Mutex::new(()),
            counters: Arc::default(),
        })
    }

    /// Open an existing tablespace file, for writing or (`write` false)
    /// only for reading: check magic, version and page size from the
    /// superblock's first 4 KiB. The full superblock is checked when the
    /// buffer pool reads it.
    pub fn open(vfs: &dyn Vfs, path: &Path, direct: bool, write: bool) -> Result<DataFile> {
        if !vfs.exists(path)? {
            return Err(Error::NotFound {
                path: path.to_path_buf(),
            });
        }
        let file = vfs.open(
            path,
            OpenOptions {
                write,
                direct,
                ..OpenOptions::default()
            },
        )?;
        let size = file.size()?;
        if size < 4096 {
            return Err(Error::corrupt(
                path,
                size,
                "file is shorter than one 4 KiB superblock",
            ));
        }
        let mut head = AlignedBuf::new(4096);
        file.read_exact_at(&mut head, 0)?;
        #[allow(clippy::indexing_slicing)] // the superblock's fields lie in its first 4 KiB
        let magic = &head[SB_MAGIC..SB_MAGIC + 8];
        let version = get_u32(&head, SB_VERSION);
        let foreign = magic != SPACE_MAGIC;
        if !foreign
            && version > SPACE_FORMAT_VERSION
            && superblock_verifies(file.as_ref(), &head, size)?
        {
            // An intact superblock of a later format: a newer build's.
            return Err(Error::UnsupportedVersion {
                file: path.to_path_buf(),
                found: version,
                supported: SPACE_FORMAT_VERSION,
            });
        }
        if foreign || !(MIN_SPACE_FORMAT_VERSION..=SPACE_FORMAT_VERSION).contains(&version) {
            // A file whose other pages are Quill's has a damaged superblock;
            // anything else is another kind of file or a future format.
            if let Some(page_size) = quill_pages_follow(file.as_ref(), size)? {
                return Err(Error::CorruptPage {
                    file: path.to_path_buf(),
                    page: 0,
                    reason: format!(
                        "the superblock is damaged (magic {magic:02x?}, format version {version}), \
                         though page 1 is a valid page of a {page_size}-byte-page Quill \
                         tablespace; the database cannot be opened without it: restore it from \
                         a backup"
                    ),
                });
            }
            if foreign {
                return Err(Error::Foreign {
                    file: path.to_path_buf(),
                    expected: "tablespace file",
                    found: magic.to_vec(),
                });
            }
            return Err(Error::UnsupportedVersion {
                file: path.to_path_buf(),
                found: version,
                supported: SPACE_FORMAT_VERSION,
            });
        }
        let page_size = get_u32(&head, SB_PAGE_SIZE) as usize;
        if !valid_page_size(page_size) {
            return Err(Error::corrupt(
                path,
                SB_PAGE_SIZE as u64,
                format!("superblock names page size {page_size}"),
            ));
        }
        let space_id = get_u64(&head, SB_SPACE_ID);
        let db_id = if version >= 2 {
            let mut id = [0u8; 16];
            id.copy_from_slice(head.get(SB_DB_ID..SB_DB_ID + 16).ok_or_else(|| {
                Error::corrupt(path, SB_DB_ID as u64, "superblock shorter than its fields")
            })?);
            u128::from_le_bytes(id)
        } else {
            0
        };
        Ok(DataFile {
            file,
            path: path.to_path_buf(),
            page_size,
            space_id,
            version,
            db_id,
            allocated: AtomicU64::new(size),
            grow: parking_lot::Mutex::new(()),
            counters: Arc::default(),
        })
    }

    /// The file's page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The format version read at open (or written at creation).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The database id the superblock held when the file was opened (S4);
    /// 0 for a format 1 tablespace not yet migrated.
    pub fn db_id(&self) -> u128 {
        self.db_id
    }

    /// The random id every page of this file carries.
    pub fn space_id(&self) -> u64 {
        self.space_id
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where page `id` starts in the file; an id whose page would end past
    /// the largest file offset is an error (it comes from damaged bytes).
    fn offset(&self, id: PageId) -> Result<u64> {
        let size = self.page_size as u64;
        id.0.checked_mul(size)
            .filter(|off| off.checked_add(size).is_some())
            .ok_or(Error::LimitExceeded {
                what: "page id",
                actual: id.0,
                max: u64::MAX / size - 1,
            })
    }

    /// Read page `id` into `buf` (zeros beyond the end of the file, S2).
    pub fn read_page(&self, id: PageId, buf: &mut [u8]) -> Result<()> {
        let off = self.offset(id)?;
        self.counters.reads.incr();
        self.counters.read_requests.incr();
        let size = self.file.size()?;
        if off + self.page_size as u64 > size {
            buf.fill(0);
            if off < size {
                // A partial page at the end (a torn extension): read what
                // exists through an aligned buffer, the rest stays zero.
                let mut tmp = AlignedBuf::new(self.page_size);
                let have = (size - off) as usize & !4095;
                // Less than a page remains (off + page_size > size).
                assert!(have < self.page_size && have <= buf.len(), "space S2");
                if have > 0 {
                    #[allow(clippy::indexing_slicing)] // asserted above
                    {
                        self.file.read_exact_at(&mut tmp[..have], off)?;
                        buf[..have].copy_from_slice(&tmp[..have]);
                    }
                }
            }
            return Ok(());
        }
        self.file.read_exact_at(buf, off)?;
        Ok(())
    }

    /// Read the adjacent pages from `first` on into `bufs` (one page
    /// each), in one request when all of them lie within the file; as
    /// [`DataFile::read_page`] reads them otherwise.
    pub fn read_pages(&self, first: PageId, bufs: &mut [&mut [u8]]) -> Result<()> {
        let off = self.offset(first)?;
        let n = bufs.len() as u64;
        let size = self.page_size as u64;
        let file_size = self.file.size()?;
        let within = n
            .checked_mul(size)
            .and_then(|len| off.checked_add(len))
            .is_some_and(|end| end <= file_size);
        if n <= 1 || !within {
            for (i, buf) in bufs.iter_mut().enumerate() {
                self.read_page(PageId(first.0 + i as u64), buf)?;
            }
            return Ok(());
        }
        assert!(
            bufs.iter().all(|b| b.len() == self.page_size),
            "read_pages: one page-sized buffer per page"
        );
        self.counters.reads.add(n);
        self.counters.read_requests.incr();
        self.file.read_vectored_exact_at(bufs, off)?;
        Ok(())
    }

    /// Check a page just read; a corrupt page becomes an error naming it.
    pub fn check(&self, id: PageId, page: &[u8]) -> Result<PageCheck> {
        Ok(super::verify(page, id, self.space_id))
    }

    /// Write a sealed page at its home location.
    pub fn write_page(&self, id: PageId, page: &[u8]) -> Result<()> {
        let off = self.offset(id)?;
        let end = off + self.page_size as u64;
        if end > self.allocated.load(Ordering::Acquire) {
            self.grow_to(end)?;
        }
        let t = Instant::now();
        self.file.write_all_at(page, off)?;
        self.counters.write_latency.record_duration(t.elapsed());
        self.counters.writes.incr();
        self.counters.write_bytes.add(page.len() as u64);
        Ok(())
    }

    fn grow_to(&self, end: u64) -> Result<()> {
        let _g = self.grow.lock();
        let have = self.allocated.load(Ordering::Acquire);
        if end <= have {
            return Ok(());
        }
        // Grow in chunks of an eighth of the file, at least 64 pages, so
        // extension is rare and extents stay contiguous.
        let chunk = (have / 8).max(64 * self.page_size as u64);
        let target = end
            .max(have + chunk)
            .next_multiple_of(self.page_size as u64);
        self.file.preallocate(have, target - have)?;
        self.allocated.store(target, Ordering::Release);
        Ok(())
    }

    /// Make every completed page write durable (with the file size).
    pub fn sync(&self) -> Result<()> {
        let t = Instant::now();
        self.file.sync_all()?;
        self.counters.sync_latency.record_duration(t.elapsed());
        self.counters.syncs.incr();
        Ok(())
    }
}
