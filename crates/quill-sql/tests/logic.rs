//! SQL logic tests: every `tests/slt/*.slt` file runs, top to bottom, in a
//! session over a fresh database. A file is a list of records separated
//! by blank lines:
//!
//! ```text
//! # a comment
//! statement ok
//! CREATE TABLE t (k int PRIMARY KEY, v text)
//!
//! statement error 23505
//! INSERT INTO t VALUES (1, 'a'), (1, 'b')
//!
//! query
//! SELECT k, v FROM t ORDER BY k
//! ----
//! 1|a
//! ```
//!
//! `statement ok` expects every statement of its text to succeed,
//! `statement error CODE` the last to fail with that SQLSTATE, `query`
//! the rows after `----`, one per line, columns joined by `|`, NULL as
//! `NULL`, in the order given. A failure names the file and line.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use quill::Db;
use quill_sql::{Session, types::to_text};

#[derive(Debug)]
enum Expect {
    Ok,
    Error(String),
    Rows(Vec<String>),
}

#[derive(Debug)]
struct Record {
    line: usize,
    sql: String,
    expect: Expect,
}

fn parse(text: &str) -> Vec<Record> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_end();
        if l.is_empty() || l.starts_with('#') {
            i += 1;
            continue;
        }
        let line = i + 1;
        let head = l.to_string();
        i += 1;
        let mut sql = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() && lines[i].trim_end() != "----" {
            sql.push(lines[i]);
            i += 1;
        }
        let expect = if head == "statement ok" {
            Expect::Ok
        } else if let Some(code) = head.strip_prefix("statement error ") {
            Expect::Error(code.trim().to_string())
        } else if head == "query" {
            let mut rows = Vec::new();
            if i < lines.len() && lines[i].trim_end() == "----" {
                i += 1;
                while i < lines.len() && !lines[i].trim().is_empty() {
                    rows.push(lines[i].trim_end().to_string());
                    i += 1;
                }
            }
            Expect::Rows(rows)
        } else {
            panic!("line {line}: unknown record {head:?}");
        };
        out.push(Record {
            line,
            sql: sql.join("\n"),
            expect,
        });
    }
    out
}

fn run_file(path: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let db = Arc::new(Db::open(dir.path(), quill::Options::default()).map_err(|e| e.to_string())?);
    let mut s = Session::new(db.clone());
    let records = parse(&text);
    for r in &records {
        let at = format!("{}:{}", path.display(), r.line);
        let results = s.execute(&r.sql);
        match &r.expect {
            Expect::Ok => {
                for res in results {
                    if let Err(e) = res {
                        return Err(format!("{at}: expected ok, got {} {}", e.state, e.message));
                    }
                }
            }
            Expect::Error(code) => match results.last() {
                Some(Err(e)) if e.state.code() == code => {}
                Some(Err(e)) => {
                    return Err(format!(
                        "{at}: expected error {code}, got {} {}",
                        e.state, e.message
                    ));
                }
                _ => return Err(format!("{at}: expected error {code}, got success")),
            },
            Expect::Rows(want) => {
                let out = match results.into_iter().last() {
                    Some(Ok(o)) => o,
                    Some(Err(e)) => {
                        return Err(format!("{at}: query failed: {} {}", e.state, e.message));
                    }
                    None => return Err(format!("{at}: no statement")),
                };
                let got: Vec<String> = out
                    .rows
                    .iter()
                    .map(|row| {
                        row.iter()
                            .map(|v| to_text(v).unwrap_or_else(|| "NULL".into()))
                            .collect::<Vec<_>>()
                            .join("|")
                    })
                    .collect();
                if &got != want {
                    return Err(format!(
                        "{at}: rows differ\n  want: {want:?}\n  got:  {got:?}"
                    ));
                }
            }
        }
    }
    drop(s);
    let db = Arc::try_unwrap(db).map_err(|_| "database still shared".to_string())?;
    let report = db
        .check()
        .map_err(|e| format!("{}: check: {e}", path.display()))?;
    db.close().map_err(|e| e.to_string())?;
    let _ = report;
    Ok(records.len())
}

#[test]
fn logic_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/slt")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt files in {}", dir.display());
    let mut failures = Vec::new();
    for f in &files {
        match run_file(f) {
            Ok(n) => eprintln!("{}: {n} records ok", f.display()),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
