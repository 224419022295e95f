//! The circle of preallocated log files: creation, validation at open, the
//! LSN-to-(file, offset) map, and positional reads and writes that split at
//! file boundaries.
//!
//! Lifecycle of the set of files:
//! `create` (write every file full-size with zeros, headers, sync each file,
//! write the first checkpoint slot into file 0, sync, sync the directory)
//! -> in use (overwritten in a circle; never grown, renamed or re-zeroed)
//! -> `open` (validate; a writer upgrades version 1 headers).
//! A log whose creation was cut short has no valid checkpoint slot and is
//! rejected at open with a clear error.
//!
//! Invariants:
//! * F1. A read or write of the stream is split at file ends into pieces,
//!   each non-empty and within the caller's buffer; together they cover
//!   the buffer exactly, in order.
//! * F2. `locate` maps an LSN to the file `(lsn / cap) % count` at offset
//!   `HEADER_AREA + lsn % cap`: inside the file's data area, never in its
//!   header area.
//!
//! Because every file is allocated and zero-filled once at creation (the
//! fastest preparation measured by `quill bench fsync`), moving to the next
//! file needs no allocation, no directory sync and no metadata journal
//! commit: the "next file" is always already prepared.

use std::path::{Path, PathBuf};

use super::format::{self, BLOCK, CheckpointSlot, DecodeError, FileHeader, HEADER_AREA};
use crate::io::{AlignedBuf, File, OpenOptions, Vfs};
use crate::{Error, Result};

/// Name of log file `index`.
pub(crate) fn file_name(index: u32) -> String {
    format!("log.{index:03}")
}

/// Byte offset in a file of checkpoint slot 0 or 1.
fn slot_offset(slot: u64) -> u64 {
    BLOCK * (1 + slot)
}

/// The open log files.
#[derive(Debug)]
pub(crate) struct LogFiles {
    pub(crate) dir: PathBuf,
    pub(crate) files: Vec<Box<dyn File>>,
    pub(crate) header: FileHeader,
    /// Data bytes per file.
    pub(crate) cap: u64,
    /// Some file's header is older than [`format::FORMAT_VERSION`].
    old_headers: bool,
}

impl LogFiles {
    /// Create a new log in `dir` (which may exist but must hold no log).
    pub(crate) fn create(
        vfs: &dyn Vfs,
        dir: &Path,
        file_count: u32,
        file_size: u64,
        direct: bool,
        log_id: u128,
    ) -> Result<(LogFiles, CheckpointSlot)> {
        if vfs.exists(&dir.join(file_name(0)))? {
            return Err(Error::AlreadyExists {
                path: dir.join(file_name(0)),
            });
        }
        let created_unix = crate::stats::unix_now();
        let zeros = AlignedBuf::new(1 << 20);
        let mut files = Vec::with_capacity(file_count as usize);
        let mut header = None;
        for index in 0..file_count {
            let path = dir.join(file_name(index));
            let f = vfs.open(
                &path,
                OpenOptions {
                    create: true,
                    write: true,
                    direct,
                    ..OpenOptions::default()
                },
            )?;
            f.preallocate(0, file_size)?;
            let mut at = 0;
            while at < file_size {
                let n = (file_size - at).min(zeros.len() as u64) as usize;
                #[allow(clippy::indexing_slicing)] // n <= zeros.len() by the min above
                f.write_all_at(&zeros[..n], at)?;
                at += n as u64;
            }
            let h = FileHeader {
                version: format::FORMAT_VERSION,
                log_id,
                file_index: index,
                file_count,
                file_size,
                created_unix,
            };
            let mut block = AlignedBuf::new(BLOCK as usize);
            block.copy_from_slice(&h.encode());
            f.write_all_at(&block, 0)?;
            f.sync_all()?;
            header.get_or_insert(h);
            files.push(f);
        }
        let Some(header) = header else {
            return Err(Error::InvalidArgument {
                what: "file_count",
                reason: "must be at least 1".into(),
            });
        };
        let lf = LogFiles {
            dir: dir.to_path_buf(),
            files,
            header,
            cap: file_size - HEADER_AREA,
            old_headers: false,
        };
        let slot = CheckpointSlot {
            log_id,
            seq: 1,
            checkpoint_lsn: format::INITIAL_LSN,
            epoch: 1,
            durable_lsn: format::INITIAL_LSN,
        };
        lf.write_slot(&slot, 0)?;
        lf.sync(0)?;
        vfs.sync_dir(dir)?;
        Ok((lf, slot))
    }

    /// Open and validate an existing log; return it with the newest valid
    /// checkpoint slot.
    pub(crate) fn open(
        vfs: &dyn Vfs,
        dir: &Path,
        direct: bool,
        write: bool,
    ) -> Result<(LogFiles, CheckpointSlot)> {
        let first = dir.join(file_name(0));
        if !vfs.exists(&first)? {
            return Err(Error::NotFound { path: first });
        }
        let opts = OpenOptions {
            write,
            direct,
            ..OpenOptions::default()
        };
        let f0 = vfs.open(&first, opts)?;
        let h0 = read_header(f0.as_ref())?;
        let mut old_headers = h0.version < format::FORMAT_VERSION;
        let mut files = vec![f0];
        for index in 1..h0.file_count {
            let path = dir.join(file_name(index));
            if !vfs.exists(&path)? {
                return Err(Error::corrupt(
                    &path,
                    0,
                    format!("log file {index} of {} is missing", h0.file_count),
                ));
            }
            let f = vfs.open(&path, opts)?;
            let h = read_header(f.as_ref())?;
            old_headers |= h.version < format::FORMAT_VERSION;
            if h.log_id != h0.log_id {
                return Err(Error::corrupt(
                    &path,
                    16,
                    "file belongs to a different log (log id differs from log.000)",
                ));
            }
            if h.file_index != index || h.file_count != h0.file_count || h.file_size != h0.file_size
            {
                return Err(Error::corrupt(
                    &path,
                    32,
                    format!(
                        "header says file {} of {} ({} bytes), expected file {index} of {} ({} bytes)",
                        h.file_index, h.file_count, h.file_size, h0.file_count, h0.file_size
                    ),
                ));
            }
            files.push(f);
        }
        for f in &files {
            let len = f.size()?;
            if len < h0.file_size {
                return Err(Error::corrupt(
                    f.path(),
                    len,
                    format!("file is {len} bytes, header says {}", h0.file_size),
                ));
            }
        }
        let lf = LogFiles {
            dir: dir.to_path_buf(),
            files,
            header: h0,
            cap: h0.file_size - HEADER_AREA,
            old_headers,
        };
        let slot = lf.read_newest_slot()?;
        Ok((lf, slot))
    }

    /// Data capacity of the whole circle in bytes.
    pub(crate) fn capacity(&self) -> u64 {
        self.cap * self.files.len() as u64
    }

    /// File index and offset of the byte at `lsn`.
    pub(crate) fn locate(&self, lsn: u64) -> (usize, u64) {
        debug_assert!(!self.files.is_empty() && self.cap > 0, "log files F2");
        let n = self.files.len().max(1) as u64;
        let off = HEADER_AREA + lsn % self.cap;
        debug_assert!(off < self.header.file_size, "log files F2");
        (((lsn / self.cap) % n) as usize, off)
    }

    fn file(&self, index: usize) -> Result<&dyn File> {
        self.files
            .get(index)
            .map(|f| f.as_ref())
            .ok_or_else(|| Error::corrupt(&self.dir, 0, format!("no log file {index}")))
    }

    /// Write `data` (whole blocks) at block-aligned `lsn`, splitting at file
    /// ends; with `dsync` each piece is durable on return (`RWF_DSYNC`).
    /// Returns the number of write calls made.
    pub(crate) fn write(&self, lsn: u64, data: &[u8], dsync: bool) -> Result<u64> {
        assert!(
            lsn.is_multiple_of(BLOCK) && (data.len() as u64).is_multiple_of(BLOCK),
            "log writer: whole aligned blocks only"
        );
        let mut done = 0usize;
        let mut calls = 0;
        while done < data.len() {
            let at = lsn + done as u64;
            let (fi, off) = self.locate(at);
            let room = (self.cap - at % self.cap) as usize;
            let n = room.min(data.len() - done);
            // Files F1: a piece ends at the buffer's end or the file's,
            // whichever comes first, and is never empty; slicing past the
            // buffer would be our bug, so it stops loudly (it used to
            // write nothing for such a piece and lose the commit).
            assert!(n > 0 && done + n <= data.len(), "log files F1");
            #[allow(clippy::indexing_slicing)] // F1, asserted above
            let piece = &data[done..done + n];
            let f = self.file(fi)?;
            if dsync {
                f.write_all_at_dsync(piece, off)?;
            } else {
                f.write_all_at(piece, off)?;
            }
            calls += 1;
            done += n;
        }
        Ok(calls)
    }

    /// Read `buf.len()` bytes of the stream starting at `lsn` (block-aligned
    /// positions and lengths when direct I/O is on).
    pub(crate) fn read(&self, lsn: u64, buf: &mut [u8]) -> Result<()> {
        let mut done = 0usize;
        while done < buf.len() {
            let at = lsn + done as u64;
            let (fi, off) = self.locate(at);
            let room = (self.cap - at % self.cap) as usize;
            let n = room.min(buf.len() - done);
            assert!(n > 0 && done + n <= buf.len(), "log files F1");
            #[allow(clippy::indexing_slicing)] // F1, asserted above
            let piece = &mut buf[done..done + n];
            self.file(fi)?.read_exact_at(piece, off)?;
            done += n;
        }
        Ok(())
    }

    /// Indexes of the files holding bytes `[from, to)`, in order, each once.
    pub(crate) fn files_between(&self, from: u64, to: u64) -> Vec<usize> {
        let mut out = Vec::new();
        let mut at = from;
        while at < to {
            let (fi, _) = self.locate(at);
            if out.contains(&fi) {
                break;
            }
            out.push(fi);
            at = (at / self.cap + 1) * self.cap;
        }
        out
    }

    /// Number of files in the circle.
    pub(crate) fn count(&self) -> usize {
        self.files.len()
    }

    /// Make the file `index` durable.
    pub(crate) fn sync(&self, index: usize) -> Result<()> {
        Ok(self.file(index)?.sync_data()?)
    }

    /// Write a checkpoint slot (slot `seq % 2`) into file `index`, without
    /// syncing: the caller makes it durable with [`LogFiles::sync`] of the
    /// same file.
    pub(crate) fn write_slot(&self, slot: &CheckpointSlot, index: usize) -> Result<()> {
        let mut block = AlignedBuf::new(BLOCK as usize);
        block.copy_from_slice(&slot.encode());
        self.file(index)?
            .write_all_at(&block, slot_offset(slot.seq % 2))?;
        Ok(())
    }

    /// Rewrite every file header of a version 1 log with the current
    /// version, each synced, so that slots may be written into any file
    /// (format.rs). File 0 goes first, so a build that reads only version
    /// 1 refuses the log from the first write on; a crash part-way leaves
    /// later files at version 1, which this build reads and the next open
    /// rewrites. (Like creation, this overwrites headers in place: a torn
    /// header write makes the log unopenable, a risk taken once per log.)
    pub(crate) fn upgrade(&mut self) -> Result<()> {
        if !self.old_headers {
            return Ok(());
        }
        for (index, f) in self.files.iter().enumerate() {
            let h = FileHeader {
                version: format::FORMAT_VERSION,
                file_index: index as u32,
                ..self.header
            };
            let mut block = AlignedBuf::new(BLOCK as usize);
            block.copy_from_slice(&h.encode());
            f.write_all_at(&block, 0)?;
            f.sync_data()?;
        }
        self.header.version = format::FORMAT_VERSION;
        self.old_headers = false;
        Ok(())
    }

    /// The valid slot with the highest sequence number over every file
    /// (a torn or lost newest slot falls back to the one before it, which
    /// is durable: see `Core::checkpoint`).
    fn read_newest_slot(&self) -> Result<CheckpointSlot> {
        let mut best: Option<CheckpointSlot> = None;
        let mut reasons = Vec::new();
        for (fi, f) in self.files.iter().enumerate() {
            for index in 0..2 {
                let mut block = AlignedBuf::new(BLOCK as usize);
                f.read_exact_at(&mut block, slot_offset(index))?;
                match CheckpointSlot::decode(&block) {
                    Ok(s) if s.log_id != self.header.log_id => {
                        reasons.push(format!("file {fi} slot {index}: belongs to another log"));
                    }
                    Ok(s) if s.seq % 2 != index => {
                        reasons.push(format!(
                            "file {fi} slot {index}: sequence {} in the wrong slot",
                            s.seq
                        ));
                    }
                    Ok(slot) => {
                        if best.is_none_or(|b| slot.seq > b.seq) {
                            best = Some(slot);
                        }
                    }
                    // Never written: normal outside file 0.
                    Err(DecodeError::Magic(m)) if m.iter().all(|&b| b == 0) => {}
                    Err(e) => reasons.push(format!("file {fi} slot {index}: {e}")),
                }
            }
        }
        if reasons.is_empty() {
            reasons.push("no slot was ever written".into());
        }
        best.ok_or_else(|| {
            Error::corrupt(
                self.dir.join(file_name(0)),
                slot_offset(0),
                format!(
                    "no valid checkpoint slot ({}); the log was never completely created or is damaged",
                    reasons.join("; ")
                ),
            )
        })
    }
}

fn read_header(f: &dyn File) -> Result<FileHeader> {
    let mut block = AlignedBuf::new(BLOCK as usize);
    f.read_exact_at(&mut block, 0).map_err(|e| match e {
        crate::io::IoError::ShortRead { .. } => Error::Foreign {
            file: f.path().to_path_buf(),
            expected: "log file",
            found: Vec::new(),
        },
        other => Error::Io(other),
    })?;
    FileHeader::decode(&block).map_err(|e| match e {
        DecodeError::Magic(found) => Error::Foreign {
            file: f.path().to_path_buf(),
            expected: "log file",
            found,
        },
        DecodeError::Version(found) => Error::UnsupportedVersion {
            file: f.path().to_path_buf(),
            found,
            supported: format::FORMAT_VERSION,
        },
        other => Error::corrupt(f.path(), 0, format!("log file header: {other}")),
    })
}
