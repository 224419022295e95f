use std::path::Path;
use std::sync::Arc;

use quill::btree::Direction;
use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{Column, ColumnType, Value};
use quill::db::{Db, Isolation, Options, TxnOptions};
use quill::io::{SimFs, Vfs};
use quill::log::LogOptions;
use quill::store::StoreOptions;

pub fn dir() -> &'static Path {
    Path::new("/db")
}

pub fn vfs(fs: &SimFs) -> Arc<dyn Vfs> {
    Arc::new(fs.clone())
}

/// Small pages, a pool of `frames` pages and a small log, so eviction,
/// checkpoints and log reuse happen within a test.
pub fn opts(frames: u64) -> Options {
    Options {
        store: StoreOptions {
            page_size: 4096,
            pool_bytes: frames * 4096,
            log: LogOptions {
                file_size: 1 << 20,
                file_count: 3,
                buffer_size: 64 << 10,
                ..LogOptions::default()
            },
            ..StoreOptions::default()
        },
        lock_wait_timeout: std::time::Duration::from_secs(5),
        ..Options::default()
    }
}

pub fn open(fs: &SimFs, o: Options) -> Db {
    Db::open_with(vfs(fs), dir(), o).unwrap()
}

/// `accounts(id int64 pk, owner text, balance int64)` with a non-unique
/// index on balance and a unique one on owner.
pub fn accounts() -> TableDef {
    TableDef {
        name: "accounts".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("owner", ColumnType::Text { max_len: 64 }, true),
            Column::new("balance", ColumnType::Int64, false),
        ],
        primary_key: vec![0],
        indexes: vec![
            IndexDef {
                name: "by_balance".into(),
                columns: vec![2],
                unique: false,
            },
            IndexDef {
                name: "by_owner".into(),
                columns: vec![1],
                unique: true,
            },
        ],
    }
}

pub fn acct(id: i64, owner: &str, balance: i64) -> Vec<Value> {
    vec![
        Value::Int64(id),
        Value::Text(owner.into()),
        Value::Int64(balance),
    ]
}

pub fn int(v: &Value) -> i64 {
    match v {
        Value::Int64(x) => *x,
        other => panic!("not an int64: {other:?}"),
    }
}

/// Repeatable read: one snapshot from the transaction's first statement.
pub const RR: TxnOptions = TxnOptions {
    isolation: Isolation::RepeatableRead,
    durability: quill::Durability::Sync,
};

/// The rows index `name` of `t` holds between `lo` and `hi` (key
/// prefixes), in key order, as `tx` sees them.
pub fn index_rows(
    tx: &mut quill::Txn<'_>,
    t: &quill::Table,
    name: &str,
    lo: std::ops::Bound<&[Value]>,
    hi: std::ops::Bound<&[Value]>,
) -> Vec<Vec<Value>> {
    tx.index_scan(t, name, lo, hi, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap()
}
