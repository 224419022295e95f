//! A missing, foreign, future-version, truncated or damaged log is a clear
//! error at open, never a panic or silently used data.

use proptest::prelude::*;
use quill::Error;
use quill::io::{File, OpenOptions, SimFs, Vfs};
use quill::log::{Log, LogOptions};

use crate::common::*;

fn created() -> SimFs {
    let fs = SimFs::new(1);
    let log = Log::create(vfs(&fs), dir(), small_opts()).unwrap();
    let lsn = log.append(1, b"x").unwrap();
    log.commit(lsn, quill::Durability::Sync).unwrap();
    drop(log);
    fs
}

fn open_err(fs: &SimFs) -> Error {
    match open_collect(fs, small_opts()) {
        Ok(_) => panic!("open succeeded"),
        Err(e) => e,
    }
}

fn file(fs: &SimFs, i: u32) -> Box<dyn File> {
    fs.open(
        &dir().join(format!("log.{i:03}")),
        OpenOptions::read_write(),
    )
    .unwrap()
}

#[test]
fn missing_log_is_not_found() {
    let fs = SimFs::new(1);
    assert!(matches!(open_err(&fs), Error::NotFound { .. }));
}

#[test]
fn foreign_file_is_named_as_foreign() {
    let fs = created();
    file(&fs, 0).write_all_at(b"SQLite format 3\0", 0).unwrap();
    let e = open_err(&fs);
    assert!(matches!(e, Error::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("log.000"));
}

#[test]
fn empty_file_is_foreign() {
    let fs = created();
    file(&fs, 0).set_len(0).unwrap();
    assert!(matches!(open_err(&fs), Error::Foreign { .. }));
}

#[test]
fn future_version_is_refused() {
    let fs = created();
    file(&fs, 1).write_all_at(&[9, 0, 0, 0], 8).unwrap();
    let e = open_err(&fs);
    assert!(
        matches!(e, Error::UnsupportedVersion { found: 9, .. }),
        "{e}"
    );
}

#[test]
fn damaged_header_is_corrupt() {
    let fs = created();
    file(&fs, 2).write_all_at(&[0xFF], 40).unwrap();
    assert!(matches!(open_err(&fs), Error::Corrupt { .. }));
}

#[test]
fn missing_file_is_corrupt() {
    let fs = created();
    fs.remove_file(&dir().join("log.002")).unwrap();
    let e = open_err(&fs);
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
}

#[test]
fn file_from_another_log_is_corrupt() {
    let fs = created();
    let other = SimFs::new(2);
    drop(Log::create(vfs(&other), dir(), small_opts()).unwrap());
    let img = other.current_bytes(&dir().join("log.001")).unwrap();
    file(&fs, 1).write_all_at(&img[..4096], 0).unwrap();
    let e = open_err(&fs);
    assert!(e.to_string().contains("different log"), "{e}");
}

#[test]
fn one_bad_checkpoint_slot_falls_back_to_the_other() {
    let fs = created();
    // The open after creation wrote slot 0 (seq 2); damage it.
    file(&fs, 0).write_all_at(&[0xAA; 16], 4096 + 40).unwrap();
    let (_log, recs, report) = open_collect(&fs, small_opts()).unwrap();
    assert_eq!(recs.len(), 1);
    assert!(report.epoch >= 2);
}

#[test]
fn both_checkpoint_slots_bad_is_corrupt() {
    let fs = created();
    file(&fs, 0).write_all_at(&[0xAA; 16], 4096 + 40).unwrap();
    file(&fs, 0).write_all_at(&[0xAA; 16], 8192 + 40).unwrap();
    let e = open_err(&fs);
    assert!(e.to_string().contains("no valid checkpoint"), "{e}");
}

#[test]
fn create_twice_is_refused() {
    let fs = created();
    let e = Log::create(vfs(&fs), dir(), small_opts()).unwrap_err();
    assert!(matches!(e, Error::AlreadyExists { .. }));
}

#[test]
fn bad_options_are_invalid_arguments() {
    let fs = SimFs::new(3);
    for opts in [
        LogOptions {
            file_count: 0,
            ..small_opts()
        },
        LogOptions {
            file_size: 1000,
            ..small_opts()
        },
        LogOptions {
            buffer_size: 12345,
            ..small_opts()
        },
        LogOptions {
            buffer_size: 1 << 20,
            ..small_opts()
        },
    ] {
        let e = Log::create(vfs(&fs), dir(), opts).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Garbage anywhere in the header area never panics: open either works
    /// (the garbage missed everything that matters) or returns an error.
    #[test]
    fn garbage_in_headers_never_panics(
        file_index in 0u32..3,
        offset in 0u64..12288,
        bytes in proptest::collection::vec(any::<u8>(), 1..64),
    ) {
        let fs = created();
        file(&fs, file_index).write_all_at(&bytes, offset).unwrap();
        let _ = open_collect(&fs, small_opts());
    }

    /// Garbage in the data area: open works and returns a prefix.
    #[test]
    fn garbage_in_data_never_panics(
        offset in 16384u64..65536,
        bytes in proptest::collection::vec(any::<u8>(), 1..600),
    ) {
        let fs = created();
        file(&fs, 0).write_all_at(&bytes, offset).unwrap();
        let r = open_collect(&fs, small_opts());
        prop_assert!(r.is_ok(), "{:?}", r.err());
    }
}
