//! Fuzz targets: one entry function per decoder of bytes read from disk.
//!
//! Compiled with the `fuzzing` feature (for the cargo-fuzz project in
//! `fuzz/`) and in the crate's own tests (the stable engine CI runs: see
//! `tests.rs`). Each entry function takes arbitrary bytes, hands them to
//! the real decoder (and, where one exists, to the code that opens a
//! database holding them), and must not panic, hang or allocate without
//! bound for any input; errors are the expected outcome. The few
//! assertions inside are properties the decoders document (a decoder
//! that accepts exactly what its encoder writes gives the same bytes
//! back), so a failed one is a bug too.
//!
//! Inputs that must pass a checksum to reach anything interesting start
//! with a flags byte whose bit 0 asks the harness to recompute the
//! checksums after placing the bytes (a fuzzer cannot guess a CRC-32C).
//! Disk images come from `image.rs`: built once per process, identical in
//! every process.

mod image;
mod seeds;
#[cfg(test)]
mod tests;

use std::ops::Bound::Unbounded;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::btree::{Direction, Tree};
use crate::buffer::BufferPool;
use crate::catalog::schema::{CATALOG_ROOT_SLOT, TableSchema};
use crate::catalog::{Column, ColumnType, RowRef, Value, decode_row, encode_row, keycode};
use crate::db::{Db, KeyBound};
use crate::io::Vfs;
use crate::log::format::{self, BLOCK, CheckpointSlot, FileHeader};
use crate::log::{Durability, Log, Lsn};
use crate::mtr::{self, redo};
use crate::page::node;
use crate::page::space::DataFile;
use crate::page::{self, PageId};
use crate::store::{Store, StoreOptions};
use crate::txn::undo_log::UndoLog;
use crate::txn::{RecHeader, RollPtr, UndoRecord};

use image::{DB_DIR, Files, LOG_DIR, PAGE};

pub use seeds::seeds;

/// A fuzz target's entry function.
pub type Target = fn(&[u8]);

/// Every target: its name (the file name in `fuzz/fuzz_targets/`) and its
/// entry function.
pub const TARGETS: &[(&str, Target)] = &[
    ("log_file_header", log_file_header),
    ("checkpoint_slot", checkpoint_slot),
    ("log_record_stream", log_record_stream),
    ("redo_record", redo_record),
    ("page", page),
    ("superblock", superblock),
    ("doublewrite", doublewrite),
    ("catalog_entry", catalog_entry),
    ("row_and_key", row_and_key),
    ("undo_record", undo_record),
    ("stats_files", stats_files),
    ("open_mutated_db", open_mutated_db),
];

/// Page slots of the doublewrite area (`buffer::doublewrite::SLOTS`).
const DOUBLEWRITE_SLOTS: usize = 64;

/// Most rows a target reads from one scan (inputs are small; this only
/// keeps a run short whatever a damaged tree claims).
const SCAN_LIMIT: usize = 20_000;

fn split_flags(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((f, rest)) => (*f, rest),
        None => (0, &[]),
    }
}

/// `bytes` cut or zero-padded to `len`.
fn sized(bytes: &[u8], len: usize) -> Vec<u8> {
    let mut v = bytes.get(..len).unwrap_or(bytes).to_vec();
    v.resize(len, 0);
    v
}

fn overwrite(dst: &mut [u8], at: usize, src: &[u8]) {
    if let Some(d) = dst.get_mut(at..at + src.len()) {
        d.copy_from_slice(src);
    }
}

fn log_path(name: &str) -> PathBuf {
    Path::new(LOG_DIR).join(name)
}

fn db_path(name: &str) -> PathBuf {
    Path::new(DB_DIR).join(name)
}

// ---------------------------------------------------------------------------
// The log.

/// Block 0 of a log file ([`FileHeader::decode`]), alone and as the
/// header of `log.000` (flags bit 1: of `log.001`) of a log that is then
/// inspected, scanned, opened, appended to and reopened. Flags bit 0:
/// recompute the header's CRC; bit 2: cut the file right after the block.
pub fn log_file_header(data: &[u8]) {
    let (flags, block) = split_flags(data);
    if let Ok(h) = FileHeader::decode(block) {
        assert_eq!(FileHeader::decode(&h.encode()), Ok(h), "header round trip");
    }
    let mut files = image::log_image().clone();
    let name = if flags & 2 != 0 { "log.001" } else { "log.000" };
    let Some(f) = files.get_mut(&log_path(name)) else {
        return;
    };
    let b = sized(block, BLOCK as usize);
    overwrite(f, 0, &b);
    if flags & 1 != 0 {
        image::reseal_log_blocks(f, 0, BLOCK as usize);
    }
    if flags & 4 != 0 {
        f.truncate(block.len().min(BLOCK as usize));
    }
    exercise_log(&files);
}

/// A checkpoint slot ([`CheckpointSlot::decode`]), alone and written over
/// one of the four slots of the two-file log (flags bit 1: file, bit 2:
/// slot), which is then used as in [`log_file_header`]. Flags bit 0:
/// recompute the slot's CRC.
pub fn checkpoint_slot(data: &[u8]) {
    let (flags, block) = split_flags(data);
    if let Ok(s) = CheckpointSlot::decode(block) {
        assert_eq!(
            CheckpointSlot::decode(&s.encode()),
            Ok(s),
            "slot round trip"
        );
    }
    let mut files = image::log_image().clone();
    let name = if flags & 2 != 0 { "log.001" } else { "log.000" };
    let at = BLOCK as usize * (1 + usize::from(flags & 4 != 0));
    let Some(f) = files.get_mut(&log_path(name)) else {
        return;
    };
    overwrite(f, at, &sized(block, BLOCK as usize));
    if flags & 1 != 0 {
        image::reseal_log_blocks(f, at, at + BLOCK as usize);
    }
    exercise_log(&files);
}

/// The bytes from the checkpoint on (LSN 4096, epoch 1) of a log of two
/// 16 KiB files, scanned by recovery as in [`log_file_header`]; every
/// complete record of type 1 is decoded as a mini-transaction. Flags bit
/// 0: recompute the CRC of every record the scan would reach.
pub fn log_record_stream(data: &[u8]) {
    exercise_log(&stream_image(data));
}

/// The log image with the stream of a [`log_record_stream`] input laid
/// out from its checkpoint.
fn stream_image(data: &[u8]) -> Files {
    let (flags, stream) = split_flags(data);
    let mut files = image::log_image().clone();
    let capacity = {
        let opts = image::log_options();
        (opts.file_size - format::HEADER_AREA) * u64::from(opts.file_count)
    };
    let cap = capacity / 2;
    for (index, name) in ["log.000", "log.001"].into_iter().enumerate() {
        let Some(f) = files.get_mut(&log_path(name)) else {
            continue;
        };
        for (i, &b) in stream.iter().take(capacity as usize).enumerate() {
            let lsn = format::INITIAL_LSN.0 + i as u64;
            if (lsn / cap) % 2 != index as u64 {
                continue;
            }
            if let Some(x) = f.get_mut((format::HEADER_AREA + lsn % cap) as usize) {
                *x = b;
            }
        }
    }
    if flags & 1 != 0 {
        image::reseal_log_records(&mut files, Path::new(LOG_DIR));
    }
    files
}

fn decode_mtr(payload: &[u8]) {
    for op in redo::decode(payload) {
        let _ = op.map(|(id, op)| (id, op.initialises()));
    }
}

/// Everything that reads the log in `/log`: the read-only paths of
/// `quill status` and `quill dump`, then an open for writing, one record
/// appended and committed, a clean close, and a reopen that must find
/// that record.
fn exercise_log(files: &Files) {
    let Ok(vfs) = image::materialize(files) else {
        return;
    };
    let dir = Path::new(LOG_DIR);
    let _ = crate::log::peek(vfs.as_ref(), dir);
    if let Ok(info) = crate::log::inspect(vfs.as_ref(), dir) {
        let _ = serde_json::to_string(&info);
    }
    let mut on_record = |r: &crate::log::RecoveredRecord<'_>| {
        if r.rtype == mtr::RTYPE_MTR {
            decode_mtr(r.payload);
        }
        Ok(())
    };
    let _ = crate::log::scan_read_only(vfs.as_ref(), dir, &mut on_record);
    let Ok((log, _)) = Log::open(vfs.clone(), dir, image::log_options(), &mut on_record) else {
        return;
    };
    // Free the log first: a log recovered full would make the append wait
    // for a checkpoint nobody else writes.
    if log.checkpoint(log.durable_lsn()).is_err() {
        return;
    }
    let Ok(end) = log.append(7, b"fuzz") else {
        return;
    };
    if log.commit(end, Durability::Sync).is_err() || log.close().is_err() {
        return;
    }
    let mut found = false;
    let reopened = Log::open(vfs, dir, image::log_options(), |r| {
        found |= r.end == end && r.rtype == 7 && r.payload == b"fuzz";
        Ok(())
    });
    if let Ok((log, _)) = reopened {
        drop(log.close());
        assert!(found, "a committed record was not recovered");
    }
}

/// The operations of one mini-transaction record ([`redo::decode`]),
/// applied to scratch pages ([`redo::apply`]) and replayed
/// ([`mtr::replay`]) into a buffer pool over the tablespace of a small
/// database, then written back (`flush_all`).
pub fn redo_record(data: &[u8]) {
    let space = image::FUZZ_SPACE_ID;
    let mut scratch = vec![0u8; PAGE];
    let mut ids = std::collections::BTreeSet::new();
    for item in redo::decode(data) {
        let Ok((id, op)) = item else {
            break;
        };
        ids.insert(id);
        let _ = redo::apply(&mut scratch, id, space, &op);
    }
    // A record names only the pages of one mini-transaction; more than
    // the pool holds would only wait for frames.
    if ids.len() > 16 {
        return;
    }
    let files: Files = image::clean_db_image()
        .iter()
        .filter(|(p, _)| p.file_name().is_some_and(|n| n == crate::store::DATA_FILE))
        .map(|(p, b)| (p.clone(), b.clone()))
        .collect();
    let Ok(vfs) = image::materialize(&files) else {
        return;
    };
    let Ok(file) = DataFile::open(vfs.as_ref(), &db_path(crate::store::DATA_FILE), true, true)
    else {
        return;
    };
    let pool = BufferPool::new(Arc::new(file), 32, None);
    let start = Lsn(1 << 30);
    let end = Lsn(start.0 + format::fragment_size(data.len() as u64));
    if mtr::replay(&pool, start, end, data).is_ok() {
        let _ = pool.flush_all();
    }
}

// ---------------------------------------------------------------------------
// Pages.

/// Up to 16 pages of 4 KiB after a flags byte: each alone through the
/// page header check ([`page::verify`]) and every B+tree node function
/// ([`node`]: accessors, cell decoding, searches, split point,
/// validation, and every mutation on a copy), then all of them as pages
/// 1.. of a tablespace holding a B+tree rooted at page 1 (verified,
/// scanned both ways, searched; values in overflow chains are read), and
/// with flags bit 1 changed by one insert and one delete. Unless flags
/// bit 0 is set, the harness gives each page its id, the space id and a
/// valid checksum first.
pub fn page(data: &[u8]) {
    let (flags, body) = split_flags(data);
    let raw = flags & 1 != 0;
    let mut pages: Vec<Vec<u8>> = body.chunks(PAGE).take(16).map(|c| sized(c, PAGE)).collect();
    for (i, p) in pages.iter_mut().enumerate() {
        let id = PageId(1 + i as u64);
        if !raw {
            seal_as(p, id);
        }
        let _ = page::verify(p, id, image::FUZZ_SPACE_ID);
        let _ = (
            page::lsn(p),
            page::id(p),
            page::page_type(p),
            page::space_id(p),
        );
        exercise_node(p);
    }
    let Some(store) = tree_store(&pages) else {
        return;
    };
    let tree = Tree::open(&store, PageId(1));
    let _ = tree.verify();
    let mut keys = Vec::new();
    for item in tree
        .range(Unbounded, Unbounded, Direction::Forward)
        .take(SCAN_LIMIT)
    {
        let Ok((k, _)) = item else {
            break;
        };
        if keys.len() < 8 {
            keys.push(k);
        }
    }
    for item in tree
        .range(Unbounded, Unbounded, Direction::Backward)
        .take(SCAN_LIMIT)
    {
        if item.is_err() {
            break;
        }
    }
    keys.push(b"zz-probe".to_vec());
    for k in &keys {
        let _ = tree.get(k);
        let lo = std::ops::Bound::Included(k.as_slice());
        let _ = tree
            .range(lo, Unbounded, Direction::Forward)
            .take(4)
            .count();
        let _ = tree
            .range(Unbounded, lo, Direction::Backward)
            .take(4)
            .count();
    }
    if flags & 2 != 0 {
        let _ = tree.put(b"fuzz-key", &[7u8; 100]);
        if let Some(k) = keys.first() {
            let _ = tree.delete(k);
        }
        let _ = tree.verify();
    }
}

/// A store whose pages 1.. are `pages` (the rest of the clean database
/// image, whose trees they overwrite, does not matter).
fn tree_store(pages: &[Vec<u8>]) -> Option<Store> {
    if pages.is_empty() {
        return None;
    }
    let mut files = image::clean_db_image().clone();
    files.remove(&db_path(crate::buffer::DOUBLEWRITE_FILE));
    let f = files.get_mut(&db_path(crate::store::DATA_FILE))?;
    let need = (1 + pages.len()) * PAGE;
    if f.len() < need {
        f.resize(need, 0);
    }
    for (i, p) in pages.iter().enumerate() {
        overwrite(f, (1 + i) * PAGE, p);
    }
    let vfs = image::materialize(&files).ok()?;
    let opts = StoreOptions {
        doublewrite: false,
        ..image::db_options().store
    };
    Store::open(vfs, Path::new(DB_DIR), opts).ok()
}

/// Give `p` the header of a valid page `id` of the fuzz space (keeping
/// its type and LSN) and seal it.
fn seal_as(p: &mut [u8], id: PageId) {
    page::put(p, 4, &page::PAGE_FORMAT_VERSION.to_le_bytes());
    page::put(p, 8, &id.0.to_le_bytes());
    page::put(p, 24, &image::FUZZ_SPACE_ID.to_le_bytes());
    page::seal(p);
}

/// Every function of [`node`] on `page`. What the module documents is
/// checked: a page that validates reads without errors and stays valid
/// through every mutation; a mutation that fails leaves the page as it
/// was.
fn exercise_node(page: &[u8]) {
    let valid = node::validate(page).is_ok();
    let _ = (node::level(page), node::is_leaf(page), node::nslots(page));
    let _ = (node::left(page), node::right(page));
    let _ = (node::free_space(page), node::used_bytes(page));
    let n = node::nslots(page);
    let mut probes: Vec<Vec<u8>> = vec![Vec::new(), vec![0xFF; 3]];
    for i in 0..=n.min(64) {
        let c = node::cell(page, i);
        let k = node::key(page, i);
        if valid && i < n {
            assert!(
                c.is_ok() && k.is_ok(),
                "a valid node's cell {i} does not read"
            );
        }
        if let Ok(c) = c {
            let _ = node::decode_leaf(c);
            let _ = node::decode_internal(c);
        }
        if let Ok(k) = k
            && probes.len() < 6
        {
            let mut after = k.to_vec();
            after.push(0);
            probes.push(k.to_vec());
            probes.push(after);
        }
        let _ = node::child(page, i);
    }
    let cells = node::cells(page);
    let _ = node::split_point(page);
    if let Ok(view) = node::LeafView::new(page) {
        for i in 0..=view.nslots().min(64) {
            view.prefetch(i);
            assert_eq!(
                view.cell(i).ok(),
                node::cell(page, i).and_then(node::decode_leaf).ok(),
                "a leaf view reads cell {i} differently"
            );
            // Where a reader of a copy of the page finds the cell (cursor
            // C3): the key at the offset, an inline value right after it.
            if let Ok((c, at)) = view.cell_at_offset(i) {
                assert_eq!(
                    page.get(at..at + c.key.len()),
                    Some(c.key),
                    "key of cell {i}"
                );
                if let node::LeafValue::Inline(v) = c.value {
                    let v_at = at + c.key.len();
                    assert_eq!(page.get(v_at..v_at + v.len()), Some(v), "value of cell {i}");
                }
            }
        }
        for probe in &probes {
            assert_eq!(view.search(probe).ok(), node::search_leaf(page, probe).ok());
        }
    }
    if valid {
        assert!(cells.is_ok(), "a valid node's cells do not read");
    }
    for probe in &probes {
        let s = node::search_leaf(page, probe);
        let for_insert = node::search_leaf_for_insert(page, probe);
        if valid && node::is_leaf(page) {
            assert_eq!(for_insert.ok(), s.clone().ok(), "search_leaf_for_insert");
        }
        let via_slot = node::search_internal(page, probe).and_then(|i| node::child(page, i));
        assert_eq!(
            node::child_for(page, probe).ok(),
            via_slot.ok(),
            "child_for disagrees with search_internal and child"
        );
        // Where a search starts changes nothing it answers, on any bytes.
        for hint in [0, u32::MAX, 1 << 31] {
            let hinted = node::search_leaf_with_hint(page, probe, Some(hint));
            if valid && node::is_leaf(page) {
                assert_eq!(hinted.ok(), s.clone().ok(), "search from hint {hint}");
            }
        }
        if let Ok((child, _)) = node::child_with_hint(page, probe) {
            assert_eq!(Ok(child), node::child_for(page, probe), "child_with_hint");
        }
        if valid {
            assert!(
                s.is_ok() || !node::is_leaf(page),
                "a valid leaf cannot be searched"
            );
        }
    }
    let Some(probe) = probes.get(2).or_else(|| probes.first()) else {
        return;
    };
    let leaf = node::is_leaf(page);
    let new_cell = if leaf {
        node::encode_leaf_inline(probe, &[1, 2, 3])
    } else {
        node::encode_internal(probe, 5)
    };
    let Ok(new_cell) = new_cell else {
        return;
    };
    let insert_at = match node::search_leaf(page, probe) {
        Ok(Err(at)) if leaf => Some(at),
        _ => None,
    };
    type Mutation<'a> = &'a dyn Fn(&mut [u8]) -> bool;
    let mutations: [(&str, Mutation<'_>); 7] = [
        ("insert", &|p| {
            insert_at.is_some_and(|at| node::insert_cell(p, at, &new_cell).is_ok())
        }),
        ("insert anywhere", &|p| {
            node::insert_cell(p, 0, &new_cell).is_ok()
        }),
        ("delete", &|p| node::delete_cell(p, n / 2).is_ok()),
        ("truncate", &|p| node::truncate(p, n / 2).is_ok()),
        ("compact", &|p| node::compact(p).is_ok()),
        ("set_child", &|p| node::set_child(p, 0, 9).is_ok()),
        ("replace", &|p| {
            let Ok(k) = node::key(p, 0).map(<[u8]>::to_vec) else {
                return node::replace_cell(p, 0, &new_cell).is_ok();
            };
            let c = if node::is_leaf(p) {
                node::encode_leaf_inline(&k, &[7; 40])
            } else {
                node::encode_internal(&k, 8)
            };
            c.is_ok_and(|c| node::replace_cell(p, 0, &c).is_ok())
        }),
    ];
    for (name, f) in mutations {
        let mut copy = page.to_vec();
        let ok = f(&mut copy);
        if !ok {
            assert!(copy == page, "{name} failed but changed the page");
        }
        // Inserting at slot 0 may break the key order; the rest keep it.
        if valid && ok && name != "insert anywhere" {
            assert_eq!(node::validate(&copy), Ok(()), "{name} broke a valid node");
        }
    }
}

/// The first 4 KiB of the tablespace (the superblock) after a flags byte,
/// read the way open and `quill status` read it, then a database holding
/// it is opened, checked and written to (allocation reads the free list
/// and the page count). Flags bit 0: give it page id 0, the space id and
/// a valid checksum first.
pub fn superblock(data: &[u8]) {
    let (flags, block) = split_flags(data);
    let mut files = image::clean_db_image().clone();
    let Some(f) = files.get_mut(&db_path(crate::store::DATA_FILE)) else {
        return;
    };
    let mut b = sized(block, PAGE);
    if flags & 1 != 0 {
        seal_as(&mut b, PageId(0));
    }
    overwrite(f, 0, &b);
    if flags & 2 != 0 {
        f.truncate(block.len());
    }
    let Ok(vfs) = image::materialize(&files) else {
        return;
    };
    let _ = crate::store::inspect(vfs.as_ref(), Path::new(DB_DIR));
    exercise_db(vfs, true);
}

/// The doublewrite area after a flags byte (64 slots of 4 KiB, cut or
/// padded unless flags bit 2), repaired from at the open of a database
/// ([`crate::buffer::Doublewrite::repair`]) that is then checked. Flags
/// bit 0: give every non-zero slot the space id and a valid checksum
/// (keeping the page id it names); bit 1: damage the home page each slot
/// names, so that the repair copies it.
pub fn doublewrite(data: &[u8]) {
    let (flags, area) = split_flags(data);
    let len = DOUBLEWRITE_SLOTS * PAGE;
    let mut area = if flags & 4 != 0 {
        area.get(..len).unwrap_or(area).to_vec()
    } else {
        sized(area, len)
    };
    let mut files = image::clean_db_image().clone();
    let data_path = db_path(crate::store::DATA_FILE);
    for slot in area.chunks_mut(PAGE) {
        // A short last slot (a truncated area) is no page: only open
        // reads it, as the file's bytes.
        if slot.len() != PAGE || slot.iter().all(|&b| b == 0) {
            continue;
        }
        let id = page::id(slot);
        if flags & 1 != 0 {
            seal_as(slot, id);
        }
        if flags & 2 != 0
            && let Some(home) = files.get_mut(&data_path)
            && let Ok(at) = usize::try_from(id.0)
            && let Some(b) = at
                .checked_mul(PAGE)
                .and_then(|o| o.checked_add(100))
                .and_then(|o| home.get_mut(o))
        {
            *b ^= 0x5A;
        }
    }
    files.insert(db_path(crate::buffer::DOUBLEWRITE_FILE), area);
    let Ok(vfs) = image::materialize(&files) else {
        return;
    };
    exercise_db(vfs, false);
}

// ---------------------------------------------------------------------------
// Tables, rows, keys, undo.

/// A catalog entry (the JSON schema `Catalog::open` decodes), checked
/// ([`TableDef::validate`](crate::catalog::schema::TableDef::validate))
/// and used (key types, row and key decoding) the way an open database
/// uses a schema; then stored under its table's name in the catalog of a
/// small database, which is reopened, checked, scanned and written to.
pub fn catalog_entry(data: &[u8]) {
    let Ok(schema) = crate::catalog::schema::decode_entry(Path::new("catalog"), b"t", data) else {
        return;
    };
    let _ = schema.def.validate();
    let types = schema.def.key_types();
    let _ = keycode::decode_key(data, &types);
    let _ = decode_row(&schema.def.columns, data);
    for c in &schema.def.columns {
        let _ = (c.ty.to_string(), c.ty.fixed_size());
    }
    if let Ok(json) = serde_json::to_vec(&schema) {
        let back = crate::catalog::schema::decode_entry(Path::new("catalog"), b"t", &json);
        assert_eq!(back.ok().as_ref(), Some(&schema), "schema round trip");
    }
    let name = schema.def.name.clone();
    with_db_change(|db| {
        let store = db.store();
        let root = store.root(CATALOG_ROOT_SLOT)?;
        let lsn = Tree::open(store, root).put(name.as_bytes(), data)?;
        store.commit(lsn, Durability::Sync)
    });
}

/// Column sets the row and key decoders are run with.
fn row_schemas() -> Vec<Vec<Column>> {
    let all_types = |nullable: bool| {
        vec![
            Column::new("b", ColumnType::Bool, nullable),
            Column::new("i", ColumnType::Int32, nullable),
            Column::new("l", ColumnType::Int64, nullable),
            Column::new("f", ColumnType::Float64, nullable),
            Column::new("t", ColumnType::Text { max_len: 40 }, nullable),
            Column::new("y", ColumnType::Bytes { max_len: 40 }, nullable),
            Column::new("s", ColumnType::Timestamp, nullable),
        ]
    };
    vec![
        image::items_table().columns,
        image::notes_table().columns,
        all_types(true),
        all_types(false),
        (0..9)
            .map(|i| Column::new(format!("c{i}"), ColumnType::Bool, true))
            .collect(),
        vec![Column::new("t", ColumnType::Text { max_len: 3 }, false)],
        vec![Column::new("y", ColumnType::Bytes { max_len: 0 }, true)],
        Vec::new(),
    ]
}

/// The row format ([`decode_row`]) and the key encoding
/// ([`keycode::decode_key`], [`keycode::decode_key_prefix`],
/// [`keycode::key_prefix_len`]) with several
/// column sets. Both decoders accept exactly what their encoders write,
/// so whatever decodes must encode back to the same bytes.
pub fn row_and_key(data: &[u8]) {
    for columns in row_schemas() {
        let decoded = decode_row(&columns, data);
        if let Ok(values) = &decoded {
            let again = encode_row(&columns, values);
            assert_eq!(again.as_deref().ok(), Some(data), "row round trip");
        }
        check_row_ref(&columns, data, decoded.ok());
        let types: Vec<ColumnType> = columns.iter().map(|c| c.ty).collect();
        if let Ok(values) = keycode::decode_key(data, &types) {
            let mut again = Vec::new();
            keycode::encode_key(&values, &mut again);
            assert_eq!(again, data, "key round trip");
        }
        let prefix = keycode::decode_key_prefix(data, &types);
        assert_eq!(
            keycode::key_prefix_len(data, &types).ok(),
            prefix
                .as_ref()
                .ok()
                .map(|(_, rest)| data.len() - rest.len()),
            "key_prefix_len disagrees with decode_key_prefix"
        );
        if let Ok((values, rest)) = prefix {
            let mut again = Vec::new();
            keycode::encode_key(&values, &mut again);
            again.extend_from_slice(rest);
            assert_eq!(again, data, "key prefix round trip");
            let mut borrowed = Vec::new();
            for v in &values {
                keycode::encode_key_refs([v.into()], &mut borrowed);
            }
            borrowed.extend_from_slice(rest);
            assert_eq!(borrowed, data, "borrowed key encoding");
        }
    }
    let _ = keycode::prefix_end(data);
}

/// A row read in place ([`RowRef`]) agrees with [`decode_row`]: a row
/// `decode_row` takes reads in place as the same values (by `get` and by
/// `iter`), and of a row it refuses, either `RowRef::new` refuses it or
/// some text column is not UTF-8 and reading it is an error. Never a
/// wrong value.
pub(crate) fn check_row_ref(columns: &[Column], data: &[u8], decoded: Option<Vec<Value>>) {
    // Catalog RF4: the quick walk agrees with the checked one.
    assert_eq!(
        crate::catalog::row::quick_spans(columns, data),
        crate::catalog::row::checked_spans(columns, data).ok(),
        "RowRef's quick walk and its checked walk disagree"
    );
    let Ok(row) = RowRef::new(columns, data) else {
        assert!(decoded.is_none(), "RowRef refused a row decode_row took");
        return;
    };
    let read: Vec<_> = row.iter().collect();
    for (i, v) in read.iter().enumerate() {
        let by_get = row.get(i).map(|v| v.to_owned());
        let by_iter = v.as_ref().map(|v| v.to_owned());
        assert_eq!(
            format!("{by_iter:?}"),
            format!("{by_get:?}"),
            "get({i}) vs iter"
        );
    }
    let all: Option<Vec<Value>> = read
        .iter()
        .map(|v| v.as_ref().ok().map(|v| v.to_owned()))
        .collect();
    let whole = all.filter(|v| v.len() == columns.len());
    assert_eq!(
        decoded.is_some(),
        whole.is_some(),
        "RowRef and decode_row disagree on whether the row reads"
    );
    match whole {
        Some(values) => {
            assert_eq!(
                encode_row(columns, &values).ok().as_deref(),
                Some(data),
                "RowRef vs decode_row"
            );
            assert_eq!(
                format!("{:?}", row.to_values().ok()),
                format!("{:?}", Some(&values)),
                "to_values vs the columns read one by one"
            );
        }
        None => assert!(row.to_values().is_err()),
    }
    // Into vectors that held other rows (shorter, longer, with text and
    // bytes buffers to reuse): the same values, none of the old ones.
    for len in [3, 40] {
        let mut into: Vec<Value> = (0..len)
            .map(|i| match i % 4 {
                0 => Value::Text("a stale value longer than most".into()),
                1 => Value::Bytes(vec![7; 5]),
                2 => Value::Int64(-1),
                _ => Value::Text(String::new()),
            })
            .collect();
        assert_eq!(
            format!("{:?}", row.values_into(None, &mut into).map(|()| into).ok()),
            format!("{:?}", row.to_values().ok()),
            "values_into over a used vector of {len}"
        );
    }
    // Some columns only (every other, then the first half): the needed
    // ones as `get` reads them, the others NULL; an error only where a
    // needed column's `get` is one.
    for needed in [
        (0..columns.len()).map(|i| i % 2 == 0).collect::<Vec<_>>(),
        (0..columns.len()).map(|i| i < columns.len() / 2).collect(),
    ] {
        let want_err = read.iter().zip(&needed).any(|(v, &n)| n && v.is_err());
        match row.to_values_where(&needed) {
            Ok(values) => {
                assert!(!want_err, "to_values_where read a column get refuses");
                for (i, (v, &n)) in values.iter().zip(&needed).enumerate() {
                    let expect = if n {
                        read.get(i)
                            .and_then(|r| r.as_ref().ok())
                            .map(|r| r.to_owned())
                    } else {
                        Some(Value::Null)
                    };
                    assert_eq!(
                        format!("{:?}", Some(v)),
                        format!("{:?}", expect.as_ref()),
                        "to_values_where column {i}"
                    );
                }
            }
            Err(_) => assert!(want_err, "to_values_where refused columns get reads"),
        }
    }
}

/// An undo record after a flags byte ([`UndoRecord::decode`]) and a
/// clustered record header ([`RecHeader::decode`]); both decoders accept
/// exactly what their encoders write. A record that decodes is then
/// stored in the undo log of a small database as the only record of an
/// uncommitted transaction, which the next open rolls back; with flags
/// bit 0 the clustered record its key names is first made to name it
/// (as if the change had reached the record), so the rollback applies
/// its old value. The same bytes are also read as the records of an
/// insert undo segment page.
pub fn undo_record(data: &[u8]) {
    let (flags, bytes) = split_flags(data);
    if let Ok((h, row)) = RecHeader::decode(bytes) {
        assert_eq!(h.encode(row), bytes, "record header round trip");
    }
    // The input as the record area of an undo segment page
    // (`txn::undo_seg` US5), read as recovery reads one: whatever is
    // accepted is a record of the page's transaction, at the offset
    // given.
    let mut found = Vec::new();
    let trx = u64::from(flags);
    let page = crate::txn::undo_seg::raw_page_image(4096, trx, bytes);
    if crate::txn::undo_seg::parse_records(&page, trx, &mut found).is_ok() {
        for (at, r) in &found {
            let len = usize::from(crate::page::get_u16(&page, *at));
            let again = page.get(at + 2..at + 2 + len).map(UndoRecord::decode);
            assert!(
                r.trx == trx && matches!(again, Some(Ok(ref x)) if x == r),
                "segment records"
            );
        }
    }
    let Ok(rec) = UndoRecord::decode(bytes) else {
        return;
    };
    // This build writes version 3 only; an older record decodes to what
    // its version 3 bytes decode to.
    if bytes.first() == Some(&crate::txn::undo::UNDO_RECORD_VERSION) {
        assert_eq!(rec.encode(), bytes, "undo record round trip");
    } else {
        assert_eq!(
            UndoRecord::decode(&rec.encode()).ok().as_ref(),
            Some(&rec),
            "older record re-encoded"
        );
    }
    for i in 0..70 {
        let _ = rec.may_have_changed(i);
        let _ = rec.delta_key(i);
    }
    match &rec.old {
        Some(crate::txn::OldVersion::Whole(old)) => {
            let _ = RecHeader::decode(old);
        }
        Some(crate::txn::OldVersion::Delta(_)) => {
            // Applied to rows of every length up to past its shared bytes.
            for n in [0, 1, 7, 64] {
                let _ = rec.previous_version(&vec![0xA5; n]);
            }
        }
        None => {}
    }
    let seq = rec.undo_no.clamp(1, u64::MAX - 1);
    with_db_change(|db| {
        let store = db.store();
        let (undo, _) = UndoLog::open(store)?;
        // The bytes as given, so a version 1 record reaches recovery's
        // rollback from disk as an older database would hold it.
        let lsn = undo.put_raw(store, rec.trx, seq, bytes)?;
        if flags & 1 != 0
            && let Some(schema) = db.tables().into_iter().find(|t| t.id == rec.table)
        {
            let tree = Tree::open(store, PageId(schema.clustered_root));
            if let Some(v) = tree.get(&rec.key)?
                && let Ok((h, row)) = RecHeader::decode(&v)
            {
                let named = RecHeader {
                    trx: rec.trx,
                    roll: RollPtr(seq),
                    ..h
                };
                tree.put(&rec.key, &named.encode(row))?;
            }
        }
        store.commit(lsn, Durability::Sync)?;
        let lsn = store.log().end_lsn();
        store.commit(lsn, Durability::Sync)
    });
}

// ---------------------------------------------------------------------------
// Statistics files.

/// The statistics files of the last clean close (`log/log-stats.json`,
/// `store-stats.json`, `txn-stats.json`; the input is written to all
/// three), read and printed the way `quill status` does.
pub fn stats_files(data: &[u8]) {
    let mut files = image::clean_db_image().clone();
    for name in [
        format!("log/{}", crate::log::STATS_FILE),
        crate::store::STORE_STATS_FILE.to_string(),
        crate::db::TXN_STATS_FILE.to_string(),
    ] {
        files.insert(db_path(&name), data.to_vec());
    }
    let Ok(vfs) = image::materialize(&files) else {
        return;
    };
    let dir = Path::new(DB_DIR);
    if let Ok(info) = crate::log::inspect(vfs.as_ref(), &dir.join(crate::store::LOG_DIR)) {
        let _ = serde_json::to_string_pretty(&info);
        if let Some(saved) = &info.last_close {
            let _ = saved.stats.to_string();
        }
    }
    if let Ok(st) = crate::store::inspect(vfs.as_ref(), dir)
        && let Some(s) = &st.last_close
    {
        let _ = s.to_string();
        let _ = serde_json::to_string(s);
    }
    if let Some(s) = crate::db::saved_stats(vfs.as_ref(), dir) {
        let _ = s.to_string();
    }
}

// ---------------------------------------------------------------------------
// Whole databases.

/// Most mutations [`open_mutated_db`] applies.
const MAX_MUTATIONS: usize = 16;

/// A crashed database (two tables with secondary indexes, a few hundred
/// rows, overflow values, one transaction that never committed; see
/// `image.rs`) whose files the input mutates, opened (recovery: the
/// doublewrite repair, redo, the rollback of the open transaction), then
/// checked, scanned through every index, written to and closed.
///
/// The input is a list of mutations, each `selector u8 | offset u32 LE |
/// n u8 | n bytes`. Selector bits 0..4 choose the file (in path order:
/// `data.qdb`, `doublewrite`, `log/log.000`, `log/log.001`), bits 4..6
/// what to do: 0 overwrite at the offset, 1 xor, 2 cut the file at the
/// offset, 3 remove it; bit 6 recomputes the checksums of what changed
/// (pages, log blocks, and every record the log scan would reach). The
/// offset is taken modulo the file's length.
pub fn open_mutated_db(data: &[u8]) {
    let mut files = image::crashed_db_image().clone();
    let paths: Vec<PathBuf> = files.keys().cloned().collect();
    let mut rest = data;
    for _ in 0..MAX_MUTATIONS {
        let Some((head, tail)) = rest.split_at_checked(6) else {
            break;
        };
        let sel = head.first().copied().unwrap_or(0);
        let offset = page::get_u32(head, 1) as usize;
        let n = usize::from(head.get(5).copied().unwrap_or(0)).min(tail.len());
        let (bytes, tail) = tail.split_at(n);
        rest = tail;
        let Some(path) = paths.get(usize::from(sel & 0x0F) % paths.len().max(1)) else {
            break;
        };
        mutate(&mut files, path, sel, offset, bytes);
    }
    let Ok(vfs) = image::materialize(&files) else {
        return;
    };
    exercise_db(vfs, true);
}

fn mutate(files: &mut Files, path: &Path, sel: u8, offset: usize, bytes: &[u8]) {
    let kind = (sel >> 4) & 3;
    if kind == 3 {
        files.remove(path);
        return;
    }
    let Some(f) = files.get_mut(path) else {
        return;
    };
    let at = offset % f.len().max(1);
    let end = (at + bytes.len()).min(f.len());
    match kind {
        0 => overwrite(f, at, bytes.get(..end - at).unwrap_or_default()),
        1 => {
            for (d, s) in f.get_mut(at..end).unwrap_or_default().iter_mut().zip(bytes) {
                *d ^= s;
            }
        }
        _ => f.truncate(at),
    }
    if sel & 0x40 == 0 {
        return;
    }
    if image::is_page_file(path) {
        image::reseal_pages(f, at, end.max(at + 1));
    } else if image::is_log_file(path) {
        image::reseal_log_blocks(f, at, end.max(at + 1));
        if let Some(dir) = path.parent() {
            image::reseal_log_records(files, dir);
        }
    }
}

/// Open the database in `/db` of `vfs` read-only (what `quill check`
/// does) and read it, then open it for writing and use it: check every
/// table, scan every table and index both ways, run one writing
/// transaction (with `write`), purge, and close.
fn exercise_db(vfs: Arc<dyn Vfs>, write: bool) {
    if let Ok(db) = Db::open_read_only_with(vfs.clone(), Path::new(DB_DIR), image::db_options()) {
        use_db(&db, false);
        let _ = db.close();
    }
    let Ok(db) = Db::open_with(vfs, Path::new(DB_DIR), image::db_options()) else {
        return;
    };
    use_db(&db, write);
    let _ = db.purge_now();
    let _ = db.close();
}

fn use_db(db: &Db, write: bool) {
    if let Ok(report) = db.check() {
        let _ = report.is_ok();
    }
    let _ = db.stats().to_string();
    let _ = db.store_stats().to_string();
    for schema in db.tables() {
        let Ok(t) = db.table(&schema.def.name) else {
            continue;
        };
        let Ok(mut tx) = db.begin() else {
            return;
        };
        let mut first: Option<Vec<Value>> = None;
        // Whole scans forward; backward ones share the code below the
        // direction, so a few rows each keep a run short.
        for (dir, limit) in [(Direction::Forward, SCAN_LIMIT), (Direction::Backward, 50)] {
            if let Ok(rows) = tx.scan(&t, Unbounded, Unbounded, dir) {
                for row in rows.take(limit) {
                    match row {
                        Ok(r) => {
                            first.get_or_insert(r);
                        }
                        Err(_) => break,
                    }
                }
            }
            for ix in &schema.def.indexes {
                if let Ok(rows) = tx.index_scan(&t, &ix.name, Unbounded, Unbounded, dir) {
                    for row in rows.take(limit) {
                        if row.is_err() {
                            break;
                        }
                    }
                }
            }
        }
        let key = pk_values(&schema, first.as_deref());
        if let Some(k) = &key {
            let _ = tx.get(&t, k);
        }
        if write {
            write_some(&mut tx, &t, &schema, first.as_deref(), key.as_deref());
        }
        let _ = tx.commit();
    }
}

fn pk_values(schema: &TableSchema, row: Option<&[Value]>) -> Option<Vec<Value>> {
    let row = row?;
    schema
        .def
        .primary_key
        .iter()
        .map(|&k| row.get(k).cloned())
        .collect()
}

/// One insert (the first row seen, with its primary key made new), one
/// update and one delete of the first row.
fn write_some(
    tx: &mut crate::db::Txn<'_>,
    t: &crate::db::Table,
    schema: &TableSchema,
    row: Option<&[Value]>,
    key: Option<&[Value]>,
) {
    let Some(row) = row else {
        return;
    };
    let mut fresh = row.to_vec();
    for &k in &schema.def.primary_key {
        if let Some(v) = fresh.get_mut(k) {
            *v = match v {
                Value::Int64(x) => Value::Int64(x.wrapping_add(1_000_003)),
                Value::Int32(x) => Value::Int32(x.wrapping_add(1_000_003)),
                _ => Value::Null,
            };
        }
    }
    let _ = tx.insert(t, &fresh);
    let Some(key) = key.filter(|k| !k.is_empty()) else {
        return;
    };
    if let Some((i, v)) = row
        .iter()
        .enumerate()
        .find(|(i, _)| !schema.def.primary_key.contains(i))
    {
        let _ = tx.update(t, key, &[(i, v.clone())]);
    }
    let _ = tx.delete(t, key);
    let lo: KeyBound<'_> = std::ops::Bound::Included(key);
    let _ = tx
        .scan(t, lo, Unbounded, Direction::Forward)
        .map(|rows| rows.take(4).count());
}

/// Open the clean database image, apply `change` to it (its redo reaches
/// the log; nothing is flushed), and reopen and use the database as
/// [`exercise_db`] does.
fn with_db_change(change: impl FnOnce(&Db) -> crate::Result<()>) {
    let Ok(vfs) = image::materialize(image::clean_db_image()) else {
        return;
    };
    {
        let Ok(db) = Db::open_with(vfs.clone(), Path::new(DB_DIR), image::db_options()) else {
            return;
        };
        if change(&db).is_err() {
            return;
        }
        // Dropped without closing: the change is in the log only.
    }
    exercise_db(vfs, true);
}
