//! Valid encodings to start fuzzing from: what each target's input looks
//! like when the bytes are what Quill writes. They seed the cargo-fuzz
//! corpora (`fuzz/seeds/<target>/`, written by the ignored test
//! `fuzz::tests::write_seed_corpora`) and the mutation half of the
//! stable engine. Built from the images of `image.rs`, so they are the
//! same bytes in every process.

use std::path::Path;
use std::sync::Arc;

use super::image::{self, DB_DIR, Files, PAGE};
use super::seal_as;
use crate::btree::Tree;
use crate::catalog::{encode_key, encode_row};
use crate::db::Db;
use crate::log::format::{self, BLOCK, CheckpointSlot, FileHeader, FragmentKind, INITIAL_LSN};
use crate::log::{Durability, Lsn};
use crate::mtr::{Op, redo};
use crate::page::node;
use crate::page::{PageId, PageType};
use crate::store::Store;
use crate::txn::{RecHeader, RollPtr, UndoKind, UndoRecord};
use crate::{Error, Result};

/// Seed inputs of the target `name` (empty for an unknown name).
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    let built = match name {
        "log_file_header" => log_file_header(),
        "checkpoint_slot" => checkpoint_slot(),
        "log_record_stream" => log_record_stream(),
        "redo_record" => redo_records(),
        "page" => page(),
        "superblock" => superblock(),
        "doublewrite" => doublewrite(),
        "catalog_entry" => catalog_entry(),
        "row_and_key" => Ok(row_and_key()),
        "undo_record" => undo_record(),
        "stats_files" => stats_files(),
        "open_mutated_db" => Ok(open_mutated_db()),
        _ => Ok(Vec::new()),
    };
    built.unwrap_or_default()
}

fn with_flags(flags: u8, bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + bytes.len());
    v.push(flags);
    v.extend_from_slice(bytes);
    v
}

/// `bytes` without its trailing zeros (the targets pad blocks with zeros).
fn trimmed(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    bytes.get(..end).unwrap_or(bytes)
}

fn file<'a>(files: &'a Files, path: &str) -> Result<&'a Vec<u8>> {
    files
        .get(Path::new(path))
        .ok_or_else(|| image::harness_error(format!("no {path} in the image")))
}

fn block(bytes: &[u8], at: usize) -> Result<&[u8]> {
    bytes
        .get(at..at + BLOCK as usize)
        .ok_or_else(|| image::harness_error("short log file"))
}

fn log_file_header() -> Result<Vec<Vec<u8>>> {
    let files = image::log_image();
    let full0 = block(file(files, "/log/log.000")?, 0)?;
    let h0 = trimmed(full0);
    let h1 = trimmed(block(file(files, "/log/log.001")?, 0)?);
    let v1 = FileHeader::decode(full0)
        .map(|h| FileHeader { version: 1, ..h }.encode())
        .map_err(|e| image::harness_error(e.to_string()))?;
    Ok(vec![
        with_flags(0, h0),
        with_flags(1, h0),
        with_flags(2, h1),
        with_flags(1, trimmed(&v1)),
        with_flags(5, h0),
    ])
}

fn checkpoint_slot() -> Result<Vec<Vec<u8>>> {
    let files = image::log_image();
    // Sequence 1 is odd: slot B, block 2.
    let full = block(file(files, "/log/log.000")?, 2 * BLOCK as usize)?;
    let a = trimmed(full);
    let slot = CheckpointSlot::decode(full).map_err(|e| image::harness_error(e.to_string()))?;
    let next = |seq: u64| {
        CheckpointSlot {
            seq,
            durable_lsn: Lsn(slot.durable_lsn.0 + 64),
            ..slot
        }
        .encode()
        .to_vec()
    };
    // Flags: bit 1 file 1, bit 2 slot B.
    Ok(vec![
        with_flags(4, a),
        with_flags(5, a),
        with_flags(1, trimmed(&next(2))),
        with_flags(7, trimmed(&next(3))),
        with_flags(3, trimmed(&next(4))),
    ])
}

/// Mini-transaction payloads: a hand-made one with every operation, then
/// the first records of the crashed database's log.
fn redo_records() -> Result<Vec<Vec<u8>>> {
    let mut handmade = Vec::new();
    let leaf = node::encode_leaf_inline(b"key", b"value").map_err(node_error)?;
    let other = node::encode_leaf_inline(b"key", b"other value").map_err(node_error)?;
    let id = PageId(5);
    let body = vec![0u8; PAGE - crate::page::PAGE_HEADER];
    for op in [
        Op::Init(PageType::BtreeNode),
        Op::NodeInit(0),
        Op::NodeInsert {
            slot: 0,
            cell: &leaf,
        },
        Op::NodeReplace {
            slot: 0,
            cell: &other,
        },
        Op::Write {
            offset: 60,
            bytes: &[0; 8],
        },
        Op::NodeDelete(0),
        Op::NodeTruncate(0),
    ] {
        redo::encode(&mut handmade, id, &op);
    }
    redo::encode(&mut handmade, PageId(6), &Op::Init(PageType::Overflow));
    redo::encode(&mut handmade, PageId(6), &Op::Image(&body));
    let mut out = vec![handmade];
    let vfs = image::materialize(image::crashed_db_image())?;
    crate::log::scan_read_only(
        vfs.as_ref(),
        &Path::new(DB_DIR).join(crate::store::LOG_DIR),
        &mut |r| {
            if out.len() < 16 && r.payload.len() <= 6000 {
                out.push(r.payload.to_vec());
            }
            Ok(())
        },
    )?;
    Ok(out)
}

fn node_error(e: node::NodeError) -> Error {
    image::harness_error(e.to_string())
}

/// Streams of fragments from the checkpoint of the log-only image
/// (LSN 4096, epoch 1).
fn log_record_stream() -> Result<Vec<Vec<u8>>> {
    let payloads = redo_records()?;
    let cap = {
        let o = image::log_options();
        (o.file_size - format::HEADER_AREA) * u64::from(o.file_count)
    };
    let mut full = Vec::new();
    let mut lsn = INITIAL_LSN.0;
    for p in &payloads {
        if lsn - INITIAL_LSN.0 + format::fragment_size(p.len() as u64) > cap / 2 {
            break;
        }
        let before = full.len();
        format::encode_fragment(&mut full, lsn, 1, FragmentKind::Full, 1, p);
        lsn += (full.len() - before) as u64;
    }
    // One record in three fragments, and a record of another type.
    let mut split = Vec::new();
    let mut lsn = INITIAL_LSN.0;
    for (kind, part) in [
        (FragmentKind::First, &b"first part "[..]),
        (FragmentKind::Middle, b"middle part "),
        (FragmentKind::Last, b"last part"),
    ] {
        let before = split.len();
        format::encode_fragment(&mut split, lsn, 1, kind, 9, part);
        lsn += (split.len() - before) as u64;
    }
    format::encode_fragment(&mut split, lsn, 1, FragmentKind::Full, 3, b"");
    // The log filled to its capacity with small records.
    let mut filled = Vec::new();
    let mut lsn = INITIAL_LSN.0;
    let payload = [0x42u8; 1000];
    while lsn - INITIAL_LSN.0 + format::fragment_size(1000) <= cap {
        let before = filled.len();
        format::encode_fragment(&mut filled, lsn, 1, FragmentKind::Full, 2, &payload);
        lsn += (filled.len() - before) as u64;
    }
    Ok(vec![
        with_flags(0, &full),
        with_flags(1, &full),
        with_flags(0, &split),
        with_flags(0, &filled),
    ])
}

/// Pages of a B+tree of two levels with overflow values, built in a
/// fresh store so that its root is page 1 and its pages follow.
fn page() -> Result<Vec<Vec<u8>>> {
    let fs = crate::io::SimFs::new(4);
    let mut opts = image::db_options().store;
    opts.doublewrite = false;
    let store = Store::create(Arc::new(fs.clone()), Path::new("/s"), opts)?;
    let tree = Tree::create(&store)?;
    let mut lsn = Lsn(0);
    for i in 0..120u32 {
        let key = format!("key-{i:04}");
        let value = match i {
            7 => vec![0xAB; 3000],
            50 => vec![0xCD; 6000],
            _ => vec![(i % 251) as u8; 90],
        };
        lsn = tree.put(key.as_bytes(), &value)?;
    }
    store.commit(lsn, Durability::Sync)?;
    store.flush_all()?;
    let count = crate::page::get_u64(
        &store.pool().fetch_read(PageId(0))?,
        crate::page::space::SB_PAGE_COUNT,
    );
    let data = fs
        .current_bytes(&Path::new("/s").join(crate::store::DATA_FILE))
        .ok_or_else(|| image::harness_error("no data file"))?;
    drop(store);
    let pages: Vec<Vec<u8>> = data
        .chunks(PAGE)
        .enumerate()
        .skip(1)
        .take((count.saturating_sub(1) as usize).min(16))
        .map(|(i, p)| {
            let mut p = p.to_vec();
            seal_as(&mut p, PageId(i as u64));
            p
        })
        .collect();
    let tree_pages = pages.concat();
    let leaf = pages.get(1).cloned().unwrap_or_default();
    let root = pages.first().cloned().unwrap_or_default();
    Ok(vec![
        with_flags(0, &tree_pages),
        with_flags(2, &tree_pages),
        with_flags(0, &leaf),
        with_flags(0, &root),
    ])
}

fn superblock() -> Result<Vec<Vec<u8>>> {
    let data = file(image::clean_db_image(), "/db/data.qdb")?;
    let sb = data
        .get(..PAGE)
        .ok_or_else(|| image::harness_error("short data file"))?;
    Ok(vec![with_flags(1, trimmed(sb)), with_flags(0, sb)])
}

fn doublewrite() -> Result<Vec<Vec<u8>>> {
    let data = file(image::clean_db_image(), "/db/data.qdb")?;
    let pages = data
        .get(PAGE..5 * PAGE)
        .ok_or_else(|| image::harness_error("short data file"))?;
    let one = pages.get(..PAGE).unwrap_or_default();
    Ok(vec![
        with_flags(3, pages),
        with_flags(1, pages),
        with_flags(0, &[]),
        with_flags(5, one),
    ])
}

fn open_clean() -> Result<Db> {
    let vfs = image::materialize(image::clean_db_image())?;
    Db::open_with(vfs, Path::new(DB_DIR), image::db_options())
}

fn catalog_entry() -> Result<Vec<Vec<u8>>> {
    let db = open_clean()?;
    let out = db
        .tables()
        .iter()
        .filter_map(|t| serde_json::to_vec(t.as_ref()).ok())
        .collect();
    drop(db);
    Ok(out)
}

fn row_and_key() -> Vec<Vec<u8>> {
    let columns = image::items_table().columns;
    let mut out = Vec::new();
    for i in [0i64, 4, 7, 13] {
        let row = image::item(i);
        if let Ok(r) = encode_row(&columns, &row) {
            out.push(r);
        }
        let mut key = Vec::new();
        encode_key(&row, &mut key);
        out.push(key);
    }
    out
}

fn undo_record() -> Result<Vec<Vec<u8>>> {
    let db = open_clean()?;
    let items = db
        .tables()
        .into_iter()
        .find(|t| t.def.name == "items")
        .ok_or_else(|| image::harness_error("no items table"))?;
    drop(db);
    let columns = image::items_table().columns;
    let key_of = |i: i64| {
        let mut k = Vec::new();
        encode_key(&[crate::catalog::Value::Int64(i)], &mut k);
        k
    };
    let old = |i: i64| -> Result<Vec<u8>> {
        let row = encode_row(&columns, &image::item(i))?;
        Ok(RecHeader {
            trx: 2,
            roll: RollPtr::NONE,
            deleted: false,
        }
        .encode(&row))
    };
    let rec = |kind, i: i64, old: Option<Vec<u8>>| UndoRecord {
        kind,
        undo_no: 1,
        table: items.id,
        trx: 1 << 20,
        prev_trx: 2,
        prev_roll: RollPtr::NONE,
        key: key_of(i),
        old: old.map(crate::txn::OldVersion::Whole),
        changed: UndoRecord::changed_mask(2, [0]),
    };
    // Version 3's delta (undo U9): row 10 rebuilt from row 11's bytes,
    // with the replaced key of the one changed index.
    let delta = {
        let (a, b) = (
            encode_row(&columns, &image::item(10))?,
            encode_row(&columns, &image::item(11))?,
        );
        let mut r = rec(UndoKind::Update, 10, None);
        r.old = Some(crate::txn::OldVersion::Delta(
            crate::txn::undo::RowDelta::between(&a, &b, false, vec![key_of(10)]),
        ));
        r
    };
    Ok(vec![
        with_flags(1, &delta.encode()),
        with_flags(1, &rec(UndoKind::Update, 10, Some(old(11)?)).encode()),
        with_flags(1, &rec(UndoKind::DeleteMark, 12, Some(old(12)?)).encode()),
        with_flags(1, &rec(UndoKind::Insert, 14, None).encode()),
        with_flags(0, &rec(UndoKind::Insert, 9999, None).encode()),
        // The fixed-width version 1 that older databases hold (undo U5).
        with_flags(1, &rec(UndoKind::Update, 10, Some(old(11)?)).encode_v1()),
        with_flags(0, &rec(UndoKind::Insert, 14, None).encode_v1()),
    ])
}

/// The statistics files of the clean image with every number replaced by
/// a counter (timings differ from run to run; the seeds must not).
fn stats_files() -> Result<Vec<Vec<u8>>> {
    fn renumber(v: &mut serde_json::Value, next: &mut u64) {
        match v {
            serde_json::Value::Number(n) => {
                *next += 1;
                *n = if n.is_f64() {
                    serde_json::Number::from_f64(*next as f64 + 0.5)
                        .unwrap_or_else(|| serde_json::Number::from(*next))
                } else {
                    serde_json::Number::from(*next)
                };
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| renumber(x, next)),
            serde_json::Value::Object(o) => o.values_mut().for_each(|x| renumber(x, next)),
            _ => {}
        }
    }
    let files = image::clean_db_image();
    let mut out = Vec::new();
    for path in [
        "/db/log/log-stats.json",
        "/db/store-stats.json",
        "/db/txn-stats.json",
    ] {
        let mut v: serde_json::Value = serde_json::from_slice(file(files, path)?)
            .map_err(|e| image::harness_error(e.to_string()))?;
        renumber(&mut v, &mut 0);
        out.push(serde_json::to_vec_pretty(&v).map_err(|e| image::harness_error(e.to_string()))?);
    }
    Ok(out)
}

/// Mutation lists for `open_mutated_db` (files in path order: 0
/// `data.qdb`, 1 `doublewrite`, 2 `log/log.000`, 3 `log/log.001`).
fn open_mutated_db() -> Vec<Vec<u8>> {
    let m = |sel: u8, offset: u32, bytes: &[u8]| {
        let mut v = vec![sel];
        v.extend_from_slice(&offset.to_le_bytes());
        v.push(bytes.len() as u8);
        v.extend_from_slice(bytes);
        v
    };
    let page = PAGE as u32;
    vec![
        Vec::new(),
        // A byte of a tree page, checksum recomputed.
        m(0x50, 3 * page + 300, &[0x01]),
        // A slot count of a tree page, checksum recomputed.
        m(0x40, 4 * page + 50, &[0xFF, 0x00]),
        // A page torn (no new checksum): repaired or reported.
        m(0x10, 5 * page + 1000, &[0xFF; 16]),
        // Bytes of the log after its header area, CRCs recomputed.
        m(0x52, 5 * BLOCK as u32 + 40, &[0x07]),
        m(0x12, 6 * BLOCK as u32 + 3, &[0x80]),
        // The log cut short, the doublewrite area removed.
        m(0x22, 8 * BLOCK as u32, &[]),
        m(0x31, 0, &[]),
        // Two at once: a free-list head and a root slot in the superblock.
        [m(0x40, 80, &[3]), m(0x40, 96, &[2])].concat(),
    ]
}
