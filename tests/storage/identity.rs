//! A database directory is one database, opened once at a time (issue 13
//! items 2 and 4): the directory lock, the database id that binds the
//! tablespace to its log, and creation that is all or nothing.

use std::path::Path;

use quill::Error;
use quill::io::{CrashMode, IoError, SimFs, Vfs};
use quill::store::Store;

use crate::common::*;

fn made(fs: &SimFs, d: &Path) {
    let s = Store::create(vfs(fs), d, opts(64)).unwrap();
    let t = quill::btree::Tree::create(&s).unwrap();
    for i in 0..100u32 {
        t.put(&i.to_be_bytes(), &bytes(u64::from(i), 40)).unwrap();
    }
    s.close().unwrap();
}

fn is_locked(r: quill::Result<Store>) -> bool {
    matches!(r, Err(Error::Io(IoError::Locked { .. })))
}

/// Item 2: two opens of one directory both succeeded, and the second's
/// acknowledged writes were lost when both closed.
#[test]
fn a_second_open_of_a_directory_is_refused_until_the_first_ends() {
    let fs = SimFs::new(80);
    made(&fs, dir());
    let first = open(&fs, opts(64));
    assert!(is_locked(Store::open(vfs(&fs), dir(), opts(64))));
    assert!(is_locked(Store::open_or_create(vfs(&fs), dir(), opts(64))));
    assert!(is_locked(Store::create(vfs(&fs), dir(), opts(64))));
    // The log alone is locked too (a benchmark or tool opening it).
    let log = quill::log::Log::open(vfs(&fs), &dir().join("log"), opts(64).log, |_| Ok(()));
    assert!(matches!(log, Err(Error::Io(IoError::Locked { .. }))));
    first.close().unwrap();
    let second = open(&fs, opts(64));
    // A power loss ends every holder.
    let after = fs.crash(CrashMode::DropUnsynced);
    drop(second);
    open(&after, opts(64)).close().unwrap();
}

/// The same through the real file system: `flock` conflicts between two
/// opens in one process as it does between processes.
#[test]
fn a_second_open_on_the_real_file_system_names_the_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let real: std::sync::Arc<dyn Vfs> = std::sync::Arc::new(quill::io::RealFs::new());
    let first = Store::create(real.clone(), tmp.path(), opts(64)).unwrap();
    match Store::open(real.clone(), tmp.path(), opts(64)) {
        Err(e @ Error::Io(IoError::Locked { holder, .. })) => {
            assert_eq!(holder, Some(std::process::id()));
            let text = e.to_string();
            assert!(
                text.contains(&format!("process {}", std::process::id())),
                "{text}"
            );
            assert!(text.contains("LOCK"), "{text}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    first.close().unwrap();
    Store::open(real, tmp.path(), opts(64))
        .unwrap()
        .close()
        .unwrap();
}

/// Move every file of `from`'s log over `to`'s.
fn swap_log(fs: &SimFs, from: &Path, to: &Path) {
    for name in fs.list_dir(&from.join("log")).unwrap() {
        if name.starts_with("log.") && !name.ends_with(".json") {
            fs.rename(&from.join("log").join(&name), &to.join("log").join(&name))
                .unwrap();
        }
    }
}

/// Item 4: a log from another database was accepted (or reported as a
/// corrupt page).
#[test]
fn a_log_from_another_database_is_refused_by_name() {
    let fs = SimFs::new(81);
    let (a, b) = (Path::new("/a"), Path::new("/b"));
    made(&fs, a);
    made(&fs, b);
    swap_log(&fs, b, a);
    match Store::open(vfs(&fs), a, opts(64)) {
        Err(e @ Error::ForeignLog { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("/a/log") && text.contains("/a/data.qdb"),
                "{text}"
            );
        }
        other => panic!("expected ForeignLog, got {other:?}"),
    }
}

/// Item 4: a benchmark recreated a database's `log/`, and everything was
/// gone with no word. A tablespace without its log, or a log without its
/// tablespace, is an error naming the missing file; nothing is created.
#[test]
fn half_a_database_is_reported_missing_never_recreated() {
    let fs = SimFs::new(82);
    made(&fs, dir());
    fs.remove_dir_all(&dir().join("log")).unwrap();
    for r in [
        Store::open(vfs(&fs), dir(), opts(64)),
        Store::open_or_create(vfs(&fs), dir(), opts(64)),
    ] {
        match r {
            Err(e @ Error::Incomplete { .. }) => {
                assert!(e.to_string().contains("log.000 is missing"), "{e}")
            }
            other => panic!("expected Incomplete, got {other:?}"),
        }
    }
    assert!(matches!(
        Store::create(vfs(&fs), dir(), opts(64)),
        Err(Error::AlreadyExists { .. })
    ));
    let fs = SimFs::new(83);
    made(&fs, dir());
    fs.remove_file(&dir().join("data.qdb")).unwrap();
    for r in [
        Store::open(vfs(&fs), dir(), opts(64)),
        Store::open_or_create(vfs(&fs), dir(), opts(64)),
    ] {
        match r {
            Err(e @ Error::Incomplete { .. }) => {
                assert!(e.to_string().contains("data.qdb is missing"), "{e}")
            }
            other => panic!("expected Incomplete, got {other:?}"),
        }
    }
    assert!(matches!(
        Store::open(vfs(&fs), Path::new("/nothing"), opts(64)),
        Err(Error::NoDatabase { .. })
    ));
}

/// Item 9 and store T6: a creation cut short at any write, by power loss
/// in any mode, leaves a directory that opens as a new empty database
/// (never "log.000 already exists" nor "data.qdb does not exist").
#[test]
fn creation_cut_short_at_any_write_is_created_again() {
    for mode in [
        CrashMode::DropUnsynced,
        CrashMode::KeepUnsynced,
        CrashMode::Random,
    ] {
        let mut completed = false;
        for n in 0..200u64 {
            let fs = SimFs::new(84 + n);
            fs.fail_write_after(n, true);
            let created = Store::create(vfs(&fs), dir(), opts(64));
            if let Ok(s) = created {
                drop(s);
                completed = true;
                break;
            }
            let after = fs.crash(mode);
            match Store::open(vfs(&after), dir(), opts(64)) {
                Err(Error::NoDatabase { .. } | Error::Incomplete { .. }) => {}
                Ok(s) => drop(s), // the marker's removal was durable
                Err(e) => panic!("write {n}, {mode:?}: unexpected {e}"),
            }
            let s = Store::open_or_create(vfs(&after), dir(), opts(64))
                .unwrap_or_else(|e| panic!("write {n}, {mode:?}: {e}"));
            let root = {
                let t = quill::btree::Tree::create(&s).unwrap();
                t.put(b"k", b"v").unwrap();
                t.root()
            };
            s.close().unwrap();
            let s = open(&after, opts(64));
            assert_eq!(
                quill::btree::Tree::open(&s, root).get(b"k").unwrap(),
                Some(b"v".to_vec())
            );
            s.close().unwrap();
        }
        assert!(completed, "creation never completed within 200 writes");
    }
}

/// Rewrite the first `len` bytes of `data`'s superblock through `f` and
/// reseal them, as another build would have written them; returns them.
fn rewrite_superblock(fs: &SimFs, data: &Path, len: usize, f: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut sb = fs.current_bytes(data).unwrap()[..len].to_vec();
    f(&mut sb);
    quill::page::seal(&mut sb);
    assert!(fs.corrupt(data, 0, &sb));
    sb
}

/// A format 1 tablespace (no database id) is bound to its log at its first
/// open by this build, and from then on refuses other logs.
#[test]
fn a_format_1_tablespace_is_bound_to_its_log_at_first_open() {
    use quill::page::space::{SB_DB_ID, SB_VERSION, SPACE_FORMAT_VERSION};
    let fs = SimFs::new(85);
    let (a, b) = (Path::new("/a"), Path::new("/b"));
    made(&fs, a);
    made(&fs, b);
    // Rewrite /a's superblock as format 1 wrote it.
    let data = a.join("data.qdb");
    rewrite_superblock(&fs, &data, 4096, |sb| {
        sb[SB_VERSION..SB_VERSION + 4].copy_from_slice(&1u32.to_le_bytes());
        sb[SB_DB_ID..SB_DB_ID + 16].fill(0);
    });
    let s = Store::open(vfs(&fs), a, opts(64)).unwrap();
    let id = s.log().id();
    s.close().unwrap();
    let sb = fs.current_bytes(&data).unwrap();
    assert_eq!(
        sb[SB_VERSION..SB_VERSION + 4],
        SPACE_FORMAT_VERSION.to_le_bytes()
    );
    assert_eq!(sb[SB_DB_ID..SB_DB_ID + 16], id.to_le_bytes());
    swap_log(&fs, b, a);
    assert!(matches!(
        Store::open(vfs(&fs), a, opts(64)),
        Err(Error::ForeignLog { .. })
    ));
}

/// A format 2 tablespace (no table id floor, no pending drops: zeros
/// there) opens as format 3 with neither, and is marked with this build's
/// format (4: undo records of either version, undo U5).
#[test]
fn a_format_2_tablespace_is_migrated_to_this_builds_format() {
    use quill::page::space::{SB_DB_ID, SB_DROP_COUNT, SB_VERSION, SPACE_FORMAT_VERSION};
    let fs = SimFs::new(86);
    let a = Path::new("/a");
    made(&fs, a);
    let data = a.join("data.qdb");
    let sb = rewrite_superblock(&fs, &data, 4096, |sb| {
        sb[SB_VERSION..SB_VERSION + 4].copy_from_slice(&2u32.to_le_bytes());
    });
    let id = sb[SB_DB_ID..SB_DB_ID + 16].to_vec();
    let s = Store::open(vfs(&fs), a, opts(64)).unwrap();
    s.close().unwrap();
    let sb = fs.current_bytes(&data).unwrap();
    assert_eq!(
        sb[SB_VERSION..SB_VERSION + 4],
        SPACE_FORMAT_VERSION.to_le_bytes()
    );
    assert_eq!(sb[SB_DB_ID..SB_DB_ID + 16], id[..]);
    assert_eq!(sb[SB_DROP_COUNT..SB_DROP_COUNT + 4], [0; 4]);
}

/// A format 3 tablespace (whose undo log holds version 1 undo records,
/// which this build still reads: undo U5) opens and is marked format 8
/// (the database layer adds format 5's insert undo directory at open;
/// formats 6 to 8 only let its entries hold cached pages and update
/// undo, and its records be deltas).
#[test]
fn a_format_3_tablespace_is_migrated_to_this_builds_format() {
    use quill::page::space::{SB_VERSION, SPACE_FORMAT_VERSION};
    assert_eq!(SPACE_FORMAT_VERSION, 8);
    let fs = SimFs::new(88);
    let a = Path::new("/a");
    made(&fs, a);
    let data = a.join("data.qdb");
    rewrite_superblock(&fs, &data, 4096, |sb| {
        sb[SB_VERSION..SB_VERSION + 4].copy_from_slice(&3u32.to_le_bytes());
    });
    let s = Store::open(vfs(&fs), a, opts(64)).unwrap();
    s.close().unwrap();
    let sb = fs.current_bytes(&data).unwrap();
    assert_eq!(sb[SB_VERSION..SB_VERSION + 4], 8u32.to_le_bytes());
}

/// An intact superblock of a later format is a newer build's database:
/// refused as an unsupported version (not reported as damage), unchanged.
#[test]
fn a_newer_format_is_refused_as_unsupported() {
    use quill::page::space::{SB_VERSION, SPACE_FORMAT_VERSION};
    let fs = SimFs::new(87);
    let a = Path::new("/a");
    made(&fs, a);
    let data = a.join("data.qdb");
    let page_size = quill::page::space::DataFile::open(vfs(&fs).as_ref(), &data, false, false)
        .unwrap()
        .page_size();
    let newer = SPACE_FORMAT_VERSION + 1;
    let sb = rewrite_superblock(&fs, &data, page_size, |sb| {
        sb[SB_VERSION..SB_VERSION + 4].copy_from_slice(&newer.to_le_bytes());
    });
    match Store::open(vfs(&fs), a, opts(64)) {
        Err(Error::UnsupportedVersion {
            found, supported, ..
        }) => {
            assert_eq!((found, supported), (newer, SPACE_FORMAT_VERSION));
        }
        other => panic!("expected UnsupportedVersion, got {:?}", other.err()),
    }
    assert_eq!(fs.current_bytes(&data).unwrap()[..page_size], sb[..]);
}
