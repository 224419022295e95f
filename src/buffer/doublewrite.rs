//! The doublewrite area: torn-page protection for data pages.
//!
//! Before a batch of pages is written to its home locations, the same
//! sealed images are written to a small preallocated file
//! (`doublewrite`, [`SLOTS`] page slots) and synced. A crash can then tear
//! at most one of the two copies of any page. At open, before redo, every
//! valid image in the area whose home page fails its checksum is copied
//! home (the newest image when a page appears more than once).
//!
//! Invariants:
//! * D1. A home write starts only after its doublewrite image is durable.
//! * D2. Slots are reused only after the previous batch's home writes are
//!   durable (the data file is synced at the end of every batch, under
//!   the area's mutex), so the area always covers every home write that
//!   may still be torn.
//! * D3. Only a home page that fails its checksum is replaced: a valid
//!   home page is at least as new as anything recovery needs (redo brings
//!   it forward).
//! * D4. An image older than the log's checkpoint is never used: a home
//!   write that may be torn belongs to a page that was dirty until the
//!   write's batch synced, so the checkpoint cannot have passed its LSN.
//!   Older images are leftovers (for instance from before doublewrite was
//!   turned off), and copying one home would lose the changes between it
//!   and the checkpoint.
//! * D5. Only whole, sealed page images (page P1) go through the area, so
//!   that [`Doublewrite::repair`] can tell a complete image from a torn
//!   one by its checksum alone. Asserted on the way in (the checksum
//!   check only in debug builds: it reads every byte again).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::io::{AlignedBuf, File, OpenOptions, Vfs};
use crate::page::space::{DataFile, IoCounters};
use crate::page::{self, PageCheck, PageId};
use crate::{Error, Result};

/// Name of the doublewrite file in a database directory.
pub const DOUBLEWRITE_FILE: &str = "doublewrite";
/// Page slots in the area (the largest batch).
pub const SLOTS: usize = 64;

/// The doublewrite area of one database.
#[derive(Debug)]
pub struct Doublewrite {
    file: Box<dyn File>,
    page_size: usize,
    area: Mutex<()>,
    /// Doublewrite I/O counters, apart from data-page and log counters.
    pub counters: Arc<IoCounters>,
}

impl Doublewrite {
    /// Open the area at `path`, creating and zero-filling it if missing.
    pub fn open(vfs: &dyn Vfs, path: &Path, page_size: usize, direct: bool) -> Result<Self> {
        let len = (SLOTS * page_size) as u64;
        let file = if vfs.exists(path)? {
            let f = vfs.open(path, OpenOptions::read_write().with_direct(direct))?;
            if f.size()? != len {
                return Err(Error::corrupt(
                    path,
                    0,
                    format!(
                        "doublewrite file is {} bytes, expected {len} for {page_size}-byte pages",
                        f.size()?
                    ),
                ));
            }
            f
        } else {
            let f = vfs.open(
                path,
                OpenOptions {
                    create_new: true,
                    write: true,
                    direct,
                    ..OpenOptions::default()
                },
            )?;
            let zeros = AlignedBuf::new(len as usize);
            f.write_all_at(&zeros, 0)?;
            f.sync_all()?;
            if let Some(dir) = path.parent() {
                vfs.sync_dir(dir)?;
            }
            f
        };
        Ok(Doublewrite {
            file,
            page_size,
            area: Mutex::new(()),
            counters: Arc::default(),
        })
    }

    /// Write `pages` (sealed images) through the area: area write and
    /// sync (D1), home writes, data sync (D2). Batches larger than the
    /// area go in several rounds.
    pub fn write_through(&self, pages: &[(PageId, &[u8])], data: &DataFile) -> Result<()> {
        let _area = self.area.lock();
        for chunk in pages.chunks(SLOTS) {
            let mut buf = AlignedBuf::new(chunk.len() * self.page_size);
            for ((id, img), dst) in chunk.iter().zip(buf.chunks_mut(self.page_size)) {
                assert_eq!(
                    img.len(),
                    self.page_size,
                    "doublewrite D5: the image of {id} is not a whole page"
                );
                debug_assert_eq!(
                    page::verify(img, *id, data.space_id()),
                    PageCheck::Valid,
                    "doublewrite D5: the image of {id} is not sealed"
                );
                dst.copy_from_slice(img);
            }
            let t = Instant::now();
            self.file.write_all_at(&buf, 0)?;
            self.counters.write_latency.record_duration(t.elapsed());
            self.counters.writes.add(chunk.len() as u64);
            self.counters.write_bytes.add(buf.len() as u64);
            let t = Instant::now();
            self.file.sync_data()?;
            self.counters.sync_latency.record_duration(t.elapsed());
            self.counters.syncs.incr();
            for (id, img) in chunk {
                data.write_page(*id, img)?;
            }
            data.sync()?;
        }
        Ok(())
    }

    /// Repair torn home pages from the area (D3). Returns the ids of the
    /// pages repaired; the data file is synced if any were. Images older
    /// than `checkpoint` are ignored (D4).
    pub fn repair(&self, data: &DataFile, checkpoint: u64) -> Result<Vec<PageId>> {
        let _area = self.area.lock();
        let mut buf = AlignedBuf::new(SLOTS * self.page_size);
        self.file.read_exact_at(&mut buf, 0)?;
        // Newest valid image per page.
        let mut best: std::collections::BTreeMap<u64, &[u8]> = Default::default();
        for img in buf.chunks(self.page_size) {
            let id = page::id(img);
            if page::verify(img, id, data.space_id()) != PageCheck::Valid
                || page::lsn(img) < checkpoint
            {
                continue;
            }
            let newer = best
                .get(&id.0)
                .is_none_or(|old| page::lsn(old) < page::lsn(img));
            if newer {
                best.insert(id.0, img);
            }
        }
        let mut repaired = Vec::new();
        let mut home = AlignedBuf::new(self.page_size);
        for (id, img) in best {
            data.read_page(PageId(id), &mut home)?;
            if matches!(data.check(PageId(id), &home)?, PageCheck::Corrupt(_)) {
                data.write_page(PageId(id), img)?;
                repaired.push(PageId(id));
            }
        }
        if !repaired.is_empty() {
            data.sync()?;
        }
        Ok(repaired)
    }
}
