//! Disk images for the fuzz targets: small databases and logs built once
//! per process on the simulated disk, copied into a fresh simulated disk
//! for every input, and the helpers that mutate them.
//!
//! Every image is normalised after it is built (fixed log id, space id
//! and creation time, checksums recomputed), so it is the same bytes in
//! every process: an input that fails reproduces in the next run, and a
//! seed corpus written once stays valid.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::catalog::schema::{IndexDef, TableDef};
use crate::catalog::{Column, ColumnType, Value};
use crate::db::{Db, Options};
use crate::io::{CrashMode, File, IoError, IoResult, OpenOptions, SimFs, Vfs};
use crate::log::format::{self, BLOCK, CheckpointSlot, FileHeader, HEADER_AREA};
use crate::log::{Durability, LogOptions};
use crate::page::{self, PageCheck, PageId};
use crate::store::StoreOptions;
use crate::{Error, Result};

/// The files of an image: path to contents.
pub(crate) type Files = BTreeMap<PathBuf, Vec<u8>>;

/// Log id every image carries after normalisation.
pub(crate) const FUZZ_LOG_ID: u128 = 0x5155_494c_4c5f_4655_5a5a_5f4c_4f47_0001;
/// Space id every image carries after normalisation.
pub(crate) const FUZZ_SPACE_ID: u64 = 0x5155_494c_4c46_5a01;
/// Page size of every database image.
pub(crate) const PAGE: usize = 4096;
/// Directory of the database images.
pub(crate) const DB_DIR: &str = "/db";
/// Directory of the log-only image.
pub(crate) const LOG_DIR: &str = "/log";
/// Largest file the fuzzed disk lets any file grow to (a real device
/// refuses too, with `EFBIG` or `ENOSPC`); without it, a damaged page
/// id could make the simulated disk allocate without bound.
pub(crate) const MAX_FILE: u64 = 64 << 20;

/// Options of the log-only image: two files of 32 KiB (16 KiB of log
/// each), the smallest the log accepts.
pub(crate) fn log_options() -> LogOptions {
    LogOptions {
        file_size: 32 << 10,
        file_count: 2,
        buffer_size: 16 << 10,
        ..LogOptions::default()
    }
}

/// Options of the database images: 4 KiB pages, a 64-page pool, a log
/// of two 192 KiB files, no background threads (so a run depends on its
/// input only), and never create a missing database.
pub(crate) fn db_options() -> Options {
    Options {
        create_if_missing: false,
        store: StoreOptions {
            page_size: PAGE,
            pool_bytes: 64 * PAGE as u64,
            cleaner: false,
            log: LogOptions {
                file_size: 192 << 10,
                file_count: 2,
                buffer_size: 64 << 10,
                ..LogOptions::default()
            },
            ..StoreOptions::default()
        },
        lock_wait_timeout: std::time::Duration::from_millis(100),
        purge: false,
        ..Options::default()
    }
}

/// Every file under `root` on `fs`, with its current contents.
pub(crate) fn extract(fs: &SimFs, root: &Path) -> Result<Files> {
    let mut out = Files::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for name in fs.list_dir(&dir)? {
            let path = dir.join(name);
            match fs.current_bytes(&path) {
                Some(bytes) => {
                    out.insert(path, bytes);
                }
                None => dirs.push(path),
            }
        }
    }
    Ok(out)
}

/// A fresh simulated disk holding `files`, durable, behind [`Limited`].
pub(crate) fn materialize(files: &Files) -> Result<Arc<dyn Vfs>> {
    let fs = SimFs::new(0x5eed);
    let mut parents = std::collections::BTreeSet::new();
    for (path, bytes) in files {
        let parent = path
            .parent()
            .unwrap_or_else(|| Path::new("/"))
            .to_path_buf();
        fs.create_dir_all(&parent)?;
        let f = fs.open(
            path,
            OpenOptions {
                create: true,
                write: true,
                ..OpenOptions::default()
            },
        )?;
        if !bytes.is_empty() {
            f.write_all_at(bytes, 0)?;
        }
        f.sync_all()?;
        parents.insert(parent);
    }
    for p in parents {
        fs.sync_dir(&p)?;
    }
    Ok(Arc::new(Limited { inner: fs }))
}

/// The simulated disk with a size limit per file ([`MAX_FILE`]).
#[derive(Debug)]
pub(crate) struct Limited {
    inner: SimFs,
}

#[derive(Debug)]
struct LimitedFile {
    inner: Box<dyn File>,
}

fn too_large(op: &'static str, path: &Path) -> IoError {
    IoError::Os {
        op,
        path: path.to_path_buf(),
        error: std::io::ErrorKind::FileTooLarge.into(),
    }
}

fn within(offset: u64, len: u64) -> bool {
    offset.checked_add(len).is_some_and(|end| end <= MAX_FILE)
}

impl Vfs for Limited {
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<Box<dyn File>> {
        Ok(Box::new(LimitedFile {
            inner: self.inner.open(path, options)?,
        }))
    }
    fn exists(&self, path: &Path) -> IoResult<bool> {
        self.inner.exists(path)
    }
    fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        self.inner.create_dir_all(path)
    }
    fn remove_file(&self, path: &Path) -> IoResult<()> {
        self.inner.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, path: &Path) -> IoResult<()> {
        self.inner.sync_dir(path)
    }
    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn remove_dir_all(&self, path: &Path) -> IoResult<()> {
        self.inner.remove_dir_all(path)
    }
    fn lock_dir(&self, dir: &Path, kind: crate::io::LockKind) -> IoResult<crate::io::DirLock> {
        self.inner.lock_dir(dir, kind)
    }
}

impl File for LimitedFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> IoResult<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        if !within(offset, buf.len() as u64) {
            return Err(too_large("write", self.path()));
        }
        self.inner.write_all_at(buf, offset)
    }
    fn write_all_at_dsync(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        if !within(offset, buf.len() as u64) {
            return Err(too_large("write (RWF_DSYNC)", self.path()));
        }
        self.inner.write_all_at_dsync(buf, offset)
    }
    fn sync_data(&self) -> IoResult<()> {
        self.inner.sync_data()
    }
    fn sync_all(&self) -> IoResult<()> {
        self.inner.sync_all()
    }
    fn allocate(&self, offset: u64, len: u64) -> IoResult<()> {
        if !within(offset, len) {
            return Err(too_large("fallocate", self.path()));
        }
        self.inner.allocate(offset, len)
    }
    fn size(&self) -> IoResult<u64> {
        self.inner.size()
    }
    fn set_len(&self, len: u64) -> IoResult<()> {
        if !within(len, 0) {
            return Err(too_large("ftruncate", self.path()));
        }
        self.inner.set_len(len)
    }
    fn is_direct(&self) -> bool {
        self.inner.is_direct()
    }
}

// ---------------------------------------------------------------------------
// Checksums and normalisation.

/// Whether `path` names a log file (`log.NNN`).
pub(crate) fn is_log_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("log.") && !n.ends_with(".json"))
}

/// Whether `path` holds pages (the tablespace or the doublewrite area).
pub(crate) fn is_page_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == crate::store::DATA_FILE || n == crate::buffer::DOUBLEWRITE_FILE)
}

/// Recompute the checksum of every page of `bytes` that `[from, to)`
/// touches (pages of [`PAGE`] bytes; all-zero pages stay zero).
pub(crate) fn reseal_pages(bytes: &mut [u8], from: usize, to: usize) {
    let first = from / PAGE;
    let last = to.saturating_sub(1) / PAGE;
    for (i, chunk) in bytes.chunks_mut(PAGE).enumerate() {
        if i >= first
            && i <= last.max(first)
            && chunk.len() == PAGE
            && chunk.iter().any(|&b| b != 0)
        {
            page::seal(chunk);
        }
    }
}

/// Recompute the checksum of a log file header or checkpoint slot block
/// that `[from, to)` touches.
pub(crate) fn reseal_log_blocks(bytes: &mut [u8], from: usize, to: usize) {
    let blocks = [
        (0usize, 60usize),
        (BLOCK as usize, 64),
        (2 * BLOCK as usize, 64),
    ];
    for (start, covered) in blocks {
        let end = start + BLOCK as usize;
        if from < end && to > start {
            reseal_block(bytes, start, covered);
        }
    }
}

fn reseal_block(bytes: &mut [u8], start: usize, covered: usize) {
    let crc = bytes
        .get(start..start + covered)
        .map(format::crc32c)
        .unwrap_or(0);
    if let Some(d) = bytes.get_mut(start + covered..start + covered + 4) {
        d.copy_from_slice(&crc.to_le_bytes());
    }
}

/// The log files of `files` under `dir`, in index order, as mutable
/// byte vectors.
fn log_files<'a>(files: &'a mut Files, dir: &Path) -> Vec<&'a mut Vec<u8>> {
    files
        .iter_mut()
        .filter(|(p, _)| p.parent() == Some(dir) && is_log_file(p))
        .map(|(_, b)| b)
        .collect()
}

/// The log stream of a set of log files: reads and writes by LSN.
struct Stream<'a> {
    files: Vec<&'a mut Vec<u8>>,
    cap: u64,
}

impl Stream<'_> {
    fn locate(&self, lsn: u64) -> (usize, usize) {
        let n = self.files.len().max(1) as u64;
        (
            ((lsn / self.cap) % n) as usize,
            (HEADER_AREA + lsn % self.cap) as usize,
        )
    }

    fn get(&self, lsn: u64) -> Option<u8> {
        let (f, off) = self.locate(lsn);
        self.files.get(f)?.get(off).copied()
    }

    fn set(&mut self, lsn: u64, v: u8) {
        let (f, off) = self.locate(lsn);
        if let Some(b) = self.files.get_mut(f).and_then(|file| file.get_mut(off)) {
            *b = v;
        }
    }

    fn read(&self, lsn: u64, n: u64) -> Option<Vec<u8>> {
        (0..n).map(|i| self.get(lsn.checked_add(i)?)).collect()
    }
}

/// Recompute the CRC of every record the recovery scan would reach from
/// the newest checkpoint of the log in `dir` if the CRCs were right, so a
/// mutation of a record's fields reaches the code that trusts them.
pub(crate) fn reseal_log_records(files: &mut Files, dir: &Path) {
    let mut logs = log_files(files, dir);
    let Some(h) = logs
        .first()
        .and_then(|f| FileHeader::decode(f.get(..BLOCK as usize)?).ok())
    else {
        return;
    };
    let mut best: Option<CheckpointSlot> = None;
    for f in &logs {
        for b in [BLOCK as usize, 2 * BLOCK as usize] {
            if let Some(Ok(s)) = f
                .get(b..b + BLOCK as usize)
                .map(CheckpointSlot::decode)
                .filter(|s| s.as_ref().is_ok_and(|s| s.log_id == h.log_id))
                && best.is_none_or(|o| s.seq > o.seq)
            {
                best = Some(s);
            }
        }
    }
    let Some(slot) = best else {
        return;
    };
    logs.truncate(h.file_count as usize);
    let s = Stream {
        files: logs,
        cap: h.file_size.saturating_sub(HEADER_AREA).max(1),
    };
    reseal_stream(s, slot.checkpoint_lsn.0);
}

fn reseal_stream(mut s: Stream<'_>, from: u64) {
    let capacity = s.cap.saturating_mul(s.files.len() as u64);
    let limit = from.saturating_add(capacity);
    let mut p = from;
    while p.saturating_add(format::RECORD_HEADER as u64) <= limit {
        let Some(raw) = s.read(p, format::RECORD_HEADER as u64) else {
            return;
        };
        let Ok(arr) = <[u8; format::RECORD_HEADER]>::try_from(raw.as_slice()) else {
            return;
        };
        let h = format::RecordHeader::decode(&arr);
        if h.lsn != p || !h.plausible() {
            return;
        }
        let size = h.size();
        if p.saturating_add(size) > limit {
            return;
        }
        let Some(body) = s.read(p + format::RECORD_HEADER as u64, u64::from(h.len)) else {
            return;
        };
        let mut tail = [0u8; 12];
        tail.copy_from_slice(arr.get(12..).unwrap_or(&[0; 12]));
        // The hint's bytes count as zero in the CRC's first part.
        tail[10] = 0;
        tail[11] = 0;
        let crc = format::crc_finish(format::crc_begin(&tail, &body), p, h.hint);
        for (i, b) in crc.to_le_bytes().into_iter().enumerate() {
            s.set(p + 8 + i as u64, b);
        }
        p += size;
    }
}

/// Give an image fixed ids and times (see the module documentation).
pub(crate) fn normalize(files: &mut Files) {
    for (path, bytes) in files.iter_mut() {
        if is_log_file(path) {
            normalize_log_file(bytes);
        }
    }
    let Some(space) = files
        .iter()
        .find(|(p, _)| p.file_name().is_some_and(|n| n == crate::store::DATA_FILE))
        .map(|(_, b)| page::get_u64(b, crate::page::space::SB_SPACE_ID))
    else {
        return;
    };
    for (path, bytes) in files.iter_mut() {
        if !is_page_file(path) {
            continue;
        }
        let is_data = path
            .file_name()
            .is_some_and(|n| n == crate::store::DATA_FILE);
        for (i, p) in bytes.chunks_mut(PAGE).enumerate() {
            let id = if is_data {
                PageId(i as u64)
            } else {
                page::id(p)
            };
            if page::verify(p, id, space) != PageCheck::Valid {
                continue;
            }
            page::put(p, 24, &FUZZ_SPACE_ID.to_le_bytes());
            if id.0 == 0 {
                page::put(
                    p,
                    crate::page::space::SB_SPACE_ID,
                    &FUZZ_SPACE_ID.to_le_bytes(),
                );
                // The database id is the log's id (store T7).
                page::put(p, crate::page::space::SB_DB_ID, &FUZZ_LOG_ID.to_le_bytes());
            }
            page::seal(p);
        }
    }
}

fn normalize_log_file(bytes: &mut [u8]) {
    if let Some(b) = bytes.get_mut(..BLOCK as usize)
        && let Ok(h) = FileHeader::decode(b)
    {
        let h = FileHeader {
            log_id: FUZZ_LOG_ID,
            created_unix: 0,
            ..h
        };
        b.copy_from_slice(&h.encode());
    }
    for at in [BLOCK as usize, 2 * BLOCK as usize] {
        if let Some(b) = bytes.get_mut(at..at + BLOCK as usize)
            && let Ok(s) = CheckpointSlot::decode(b)
        {
            let s = CheckpointSlot {
                log_id: FUZZ_LOG_ID,
                ..s
            };
            b.copy_from_slice(&s.encode());
        }
    }
}

// ---------------------------------------------------------------------------
// The images.

#[allow(clippy::panic)] // a template that cannot be built is a harness bug: fail loudly
fn template(cell: &'static OnceLock<Files>, build: fn() -> Result<Files>) -> &'static Files {
    cell.get_or_init(|| match build() {
        Ok(mut files) => {
            normalize(&mut files);
            files
        }
        Err(e) => panic!("fuzz harness: building a template image failed: {e}"),
    })
}

/// A log alone (`/log`, [`log_options`]), created and closed: file
/// headers and one checkpoint slot (sequence 1, epoch 1, LSN 4096).
pub(crate) fn log_image() -> &'static Files {
    static CELL: OnceLock<Files> = OnceLock::new();
    template(&CELL, || {
        let fs = SimFs::new(1);
        let log = crate::log::Log::create(Arc::new(fs.clone()), Path::new(LOG_DIR), log_options())?;
        drop(log);
        let mut files = extract(&fs, Path::new(LOG_DIR))?;
        files.remove(&Path::new(LOG_DIR).join(crate::log::STATS_FILE));
        Ok(files)
    })
}

/// The table of the database images: every column type, a primary key,
/// a non-unique secondary index and a unique one.
pub(crate) fn items_table() -> TableDef {
    TableDef {
        name: "items".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("name", ColumnType::Text { max_len: 64 }, true),
            Column::new("qty", ColumnType::Int32, false),
            Column::new("price", ColumnType::Float64, true),
            Column::new("flag", ColumnType::Bool, true),
            Column::new("at", ColumnType::Timestamp, true),
            Column::new("blob", ColumnType::Bytes { max_len: 8192 }, true),
        ],
        primary_key: vec![0],
        indexes: vec![
            IndexDef {
                name: "by_qty".into(),
                columns: vec![2, 4],
                unique: false,
            },
            IndexDef {
                name: "by_name".into(),
                columns: vec![1],
                unique: true,
            },
        ],
    }
}

/// A table with a hidden row id.
pub(crate) fn notes_table() -> TableDef {
    TableDef {
        name: "notes".into(),
        columns: vec![
            Column::new("n", ColumnType::Int64, false),
            Column::new("body", ColumnType::Text { max_len: 200 }, true),
        ],
        primary_key: vec![],
        indexes: vec![IndexDef {
            name: "by_n".into(),
            columns: vec![0],
            unique: false,
        }],
    }
}

/// Row `i` of the `items` table; every 40th row carries a value long
/// enough for an overflow chain.
pub(crate) fn item(i: i64) -> Vec<Value> {
    let blob = match i % 40 {
        0 => Value::Bytes(vec![(i % 251) as u8; 5000]),
        1 | 2 => Value::Null,
        _ => Value::Bytes(vec![(i % 7) as u8; (i % 50) as usize]),
    };
    vec![
        Value::Int64(i),
        if i % 9 == 4 {
            Value::Null
        } else {
            Value::Text(format!("item-{i:05}"))
        },
        Value::Int32((i % 17) as i32),
        Value::Float64(i as f64 * 0.25),
        Value::Bool(i % 2 == 0),
        Value::Timestamp(1_700_000_000_000_000 + i),
        blob,
    ]
}

fn build_db(fs: &SimFs, rows: i64) -> Result<Db> {
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let db = Db::open_with(
        vfs,
        Path::new(DB_DIR),
        Options {
            create_if_missing: true,
            ..db_options()
        },
    )?;
    let items = db.create_table(items_table())?;
    let notes = db.create_table(notes_table())?;
    let mut i = 0;
    while i < rows {
        let mut tx = db.begin()?;
        for _ in 0..25 {
            tx.insert(&items, &item(i))?;
            if i % 5 == 0 {
                tx.insert(&notes, &[Value::Int64(i), Value::Text(format!("note {i}"))])?;
            }
            i += 1;
        }
        tx.commit()?;
    }
    Ok(db)
}

/// A database closed cleanly (`/db`): two tables with a few rows, and
/// the statistics files of the last close.
pub(crate) fn clean_db_image() -> &'static Files {
    static CELL: OnceLock<Files> = OnceLock::new();
    template(&CELL, || {
        let fs = SimFs::new(2);
        let db = build_db(&fs, 50)?;
        db.close()?;
        extract(&fs, Path::new(DB_DIR))
    })
}

/// A database that crashed (`/db`, every unsynced write kept): a few
/// hundred rows in committed transactions, with updates, deletes and
/// overflow values, a checkpoint part way, some pages written through
/// the doublewrite area, and one transaction that never committed.
pub(crate) fn crashed_db_image() -> &'static Files {
    static CELL: OnceLock<Files> = OnceLock::new();
    template(&CELL, build_crashed_db)
}

/// Build (without normalising) the image of [`crashed_db_image`].
pub(crate) fn build_crashed_db() -> Result<Files> {
    {
        let fs = SimFs::new(3);
        let db = build_db(&fs, 300)?;
        let items = db.table("items")?;
        let notes = db.table("notes")?;
        let mut tx = db.begin()?;
        for i in (0..300).step_by(7) {
            tx.update(
                &items,
                &[Value::Int64(i)],
                &[
                    (2, Value::Int32(-(i as i32))),
                    (1, Value::Text(format!("moved-{i}"))),
                ],
            )?;
        }
        tx.commit()?;
        db.store().checkpoint()?;
        let mut tx = db.begin()?;
        for i in (3..300).step_by(11) {
            tx.delete(&items, &[Value::Int64(i)])?;
        }
        tx.commit()?;
        db.store().flush_all()?;
        let mut tx = db.begin()?;
        for i in 300..320 {
            tx.insert(&items, &item(i))?;
        }
        tx.commit()?;
        // Left open: its undo and changes reach the log through the next
        // commit's write, and recovery must roll it back.
        let mut open = db.begin()?;
        for i in 320..330 {
            open.insert(&items, &item(i))?;
        }
        open.update(&items, &[Value::Int64(10)], &[(2, Value::Int32(999))])?;
        open.delete(&items, &[Value::Int64(12)])?;
        let mut tx = db.begin()?;
        tx.insert(&notes, &[Value::Int64(-1), Value::Null])?;
        tx.commit()?;
        let lsn = db.store().log().end_lsn();
        db.store().commit(lsn, Durability::Sync)?;
        let after = fs.crash(CrashMode::KeepUnsynced);
        let files = extract(&after, Path::new(DB_DIR));
        // The rollback of `open` fails against the crashed disk: only
        // memory changes.
        drop(open);
        drop(db);
        files
    }
}

/// A problem of the harness itself (a seed builder that finds an image
/// other than it expects), as an error.
pub(crate) fn harness_error(reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        what: "fuzz harness",
        reason: reason.into(),
    }
}
