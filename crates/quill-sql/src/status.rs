//! `SHOW quill.status`: the engine's counters, live, as name/value rows
//! (what `quill status` prints for a database that is not open):
//! transactions, purge and locks (`txn.*`), and the storage layer apart
//! by kind of I/O (`store.log.*` for the redo log, `store.pool.*` for
//! data pages and the doublewrite buffer), plus syncs per commit.

use quill::Db;
use quill::catalog::{ColumnType, Value};
use serde_json::Value as Json;

use crate::session::{ColumnDesc, Output};
use crate::types::MAX_VARLEN;

fn flatten(prefix: &str, v: &Json, out: &mut Vec<(String, String)>) {
    match v {
        Json::Object(m) => {
            for (k, v) in m {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        Json::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), v, out);
            }
        }
        Json::Null => out.push((prefix.to_string(), String::new())),
        Json::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// The rows of `SHOW quill.status`.
pub fn show(db: &Db) -> Output {
    let txn = db.stats();
    let store = db.store_stats();
    let mut rows = Vec::new();
    let commits = store.log.commits_sync + store.log.commits_write + store.log.commits_lazy;
    rows.push((
        "log.syncs_per_commit".to_string(),
        if commits == 0 {
            "0".to_string()
        } else {
            format!("{:.3}", store.log.syncs as f64 / commits as f64)
        },
    ));
    // Serialization of plain counter structs does not fail; an error
    // would show as an empty section rather than a missing statement.
    flatten(
        "txn",
        &serde_json::to_value(&txn).unwrap_or(Json::Null),
        &mut rows,
    );
    flatten(
        "store",
        &serde_json::to_value(&store).unwrap_or(Json::Null),
        &mut rows,
    );
    let text = ColumnType::Text {
        max_len: MAX_VARLEN,
    };
    Output {
        tag: format!("SHOW {}", rows.len()),
        columns: vec![
            ColumnDesc {
                name: "name".into(),
                ty: text,
            },
            ColumnDesc {
                name: "value".into(),
                ty: text,
            },
        ],
        rows: rows
            .into_iter()
            .map(|(k, v)| vec![Value::Text(k), Value::Text(v)])
            .collect(),
        copy: None,
    }
}
