//! `quill bench report`: a markdown report and a PNG chart from the JSON
//! that `quill bench oltp --json` and `quill bench insert --json` write.
//!
//! The report holds, per workload configuration, each engine's throughput
//! side by side with Quill's ratio to the best peer, log syncs per commit,
//! latency and per-operation costs, and the goal checked row by
//! row: Quill ahead of every peer on each write-heavy step or shape, and
//! at most one log sync per commit wherever an engine counts them. Where
//! the goal is missed the report lists the rows; the causes found by
//! profiling are written beside the report (`bench/results/*.md`), not
//! guessed by this code.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use super::chart::{Panel, Series, render};
use super::costs::or_na;
use super::insert::InsertRow;
use super::oltp::OltpRow;
use quill::{Error, Result};

/// The parts of a benchmark's JSON the report reads.
#[derive(Deserialize)]
struct Saved<R> {
    tool: String,
    #[serde(default)]
    command: String,
    #[serde(default)]
    date: String,
    #[serde(default)]
    git_commit: Option<String>,
    #[serde(default)]
    machine: serde_json::Value,
    #[serde(default)]
    engines: Vec<serde_json::Value>,
    rows: Vec<R>,
}

/// Shapes and steps the goal counts as write-heavy.
const WRITE_SHAPES: &[&str] = &["write-only", "update-index", "update-non-index", "insert"];

fn bad(reason: String) -> Error {
    Error::InvalidArgument {
        what: "benchmark report",
        reason,
    }
}

/// Read `json` (from `bench oltp` or `bench insert`) and write the
/// markdown report to `markdown` and the chart to `png`. Returns the
/// number of goal misses.
pub fn write(json: &Path, markdown: &Path, png: &Path) -> Result<usize> {
    let text = std::fs::read_to_string(json)
        .map_err(|e| bad(format!("reading {}: {e}", json.display())))?;
    let head: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("{} is not JSON: {e}", json.display())))?;
    let tool = head
        .get("tool")
        .and_then(|t| t.as_str())
        .unwrap_or_default()
        .to_string();
    let png_name = png
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let (md, misses, title, y_label, panels) = match tool.as_str() {
        "quill bench oltp" => {
            let saved: Saved<OltpRow> =
                serde_json::from_str(&text).map_err(|e| bad(format!("{}: {e}", json.display())))?;
            let (md, misses, panels) = oltp(&saved, &png_name);
            (md, misses, "sysbench OLTP shapes", "transactions/s", panels)
        }
        "quill bench insert" => {
            let saved: Saved<InsertRow> =
                serde_json::from_str(&text).map_err(|e| bad(format!("{}: {e}", json.display())))?;
            let (md, misses, panels) = insert(&saved, &png_name);
            (
                md,
                misses,
                "Insert Benchmark",
                "rows/s (queries/s for qr, qp)",
                panels,
            )
        }
        other => {
            return Err(bad(format!(
                "{} comes from {other:?}; the report reads `quill bench oltp` and `quill bench insert` JSON",
                json.display()
            )));
        }
    };
    std::fs::write(markdown, md)
        .map_err(|e| bad(format!("writing {}: {e}", markdown.display())))?;
    render(png, title, y_label, &panels)?;
    Ok(misses)
}

fn preamble<R>(out: &mut String, s: &Saved<R>, png: &str) {
    let _ = writeln!(out, "# {}\n", s.tool);
    let _ = writeln!(out, "- command: `{}`", s.command);
    let _ = writeln!(out, "- date: {}", s.date);
    if let Some(c) = &s.git_commit {
        let _ = writeln!(out, "- git commit: {c}");
    }
    let field = |v: &serde_json::Value, k: &str| {
        v.get(k).map_or_else(
            || "?".to_string(),
            |x| x.as_str().map_or_else(|| x.to_string(), str::to_string),
        )
    };
    let m = &s.machine;
    let _ = writeln!(
        out,
        "- machine: {} cores, {} GiB, {}, kernel {}",
        field(m, "nproc"),
        field(m, "mem_gib"),
        field(m, "filesystem"),
        field(m, "kernel")
    );
    for e in &s.engines {
        let _ = writeln!(out, "- {}: {}", field(e, "name"), field(e, "note"));
    }
    let _ = writeln!(out, "\n![throughput]({png})\n");
}

/// Engines in the order they ran.
fn engine_order<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for n in names {
        if !v.iter().any(|x| x == n) {
            v.push(n.to_string());
        }
    }
    v
}

/// Quill's throughput over the best peer's, if both ran.
fn ratio(values: &BTreeMap<String, f64>) -> Option<f64> {
    let quill = *values.get("quill")?;
    let best = values
        .iter()
        .filter(|(e, _)| e.as_str() != "quill")
        .map(|(_, v)| *v)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))?;
    Some(quill / best.max(f64::MIN_POSITIVE))
}

fn oltp(s: &Saved<OltpRow>, png: &str) -> (String, usize, Vec<Panel>) {
    let mut out = String::new();
    preamble(&mut out, s, png);
    let engines = engine_order(s.rows.iter().map(|r| r.engine.as_str()));
    let shapes = engine_order(s.rows.iter().map(|r| r.shape.as_str()));
    let mut misses = Vec::new();
    let mut panels = Vec::new();
    let _ = writeln!(
        out,
        "## Throughput (transactions/s) and log syncs per commit\n"
    );
    let mut head = "| shape | threads |".to_string();
    for e in &engines {
        let _ = write!(head, " {e} tps | {e} fsync/c |");
    }
    head.push_str(" quill / best peer |");
    let _ = writeln!(out, "{head}");
    let _ = writeln!(out, "|{}", " --- |".repeat(3 + 2 * engines.len()));
    for shape in &shapes {
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        let mut threads: Vec<usize> = s
            .rows
            .iter()
            .filter(|r| &r.shape == shape)
            .map(|r| r.threads)
            .collect();
        threads.sort_unstable();
        threads.dedup();
        for t in threads {
            let mut line = format!("| {shape} | {t} |");
            let mut tps = BTreeMap::new();
            for e in &engines {
                match s
                    .rows
                    .iter()
                    .find(|r| &r.shape == shape && r.threads == t && &r.engine == e)
                {
                    Some(r) => {
                        let _ = write!(
                            line,
                            " {:.0} | {} |",
                            r.tps,
                            or_na(r.costs.fsyncs_per_commit, 3)
                        );
                        tps.insert(e.clone(), r.tps);
                        series.entry(e.clone()).or_default().push((t as f64, r.tps));
                        if r.costs.fsyncs_per_commit.is_some_and(|f| f > 1.0) {
                            misses.push(format!(
                                "{shape} x{t}: {e} made {} log syncs per commit",
                                or_na(r.costs.fsyncs_per_commit, 3)
                            ));
                        }
                    }
                    None => line.push_str(" - | - |"),
                }
            }
            let q = ratio(&tps);
            let _ = writeln!(out, "{line} {} |", or_na(q, 2));
            if WRITE_SHAPES.contains(&shape.as_str())
                && let Some(q) = q
                && q <= 1.0
            {
                misses.push(format!("{shape} x{t}: Quill at {q:.2}x the best peer"));
            }
        }
        panels.push(Panel {
            title: shape.clone(),
            series: series
                .into_iter()
                .map(|(name, points)| Series { name, points })
                .collect(),
        });
    }
    costs_table(
        &mut out,
        s.rows.iter().map(|r| {
            (
                format!("{} x{}", r.shape, r.threads),
                r.engine.as_str(),
                r.p99_us,
                &r.costs,
            )
        }),
        "per transaction",
    );
    goal(
        &mut out,
        &misses,
        "write-only, update-index, update-non-index and insert",
    );
    (out, misses.len(), panels)
}

fn insert(s: &Saved<InsertRow>, png: &str) -> (String, usize, Vec<Panel>) {
    let mut out = String::new();
    preamble(&mut out, s, png);
    let engines = engine_order(s.rows.iter().map(|r| r.engine.as_str()));
    let sizes = engine_order(s.rows.iter().map(|r| r.txn_size.as_str()));
    let steps = engine_order(s.rows.iter().map(|r| r.step.as_str()));
    let mut misses = Vec::new();
    let mut panels: BTreeMap<String, BTreeMap<String, Vec<(f64, f64)>>> = BTreeMap::new();
    let _ = writeln!(
        out,
        "## Throughput (rows/s; queries/s for qr and qp) and log syncs per commit\n"
    );
    let mut head = "| txn | clients | step | rows/commit |".to_string();
    for e in &engines {
        let _ = write!(head, " {e} | {e} fsync/c |");
    }
    head.push_str(" quill / best peer |");
    let _ = writeln!(out, "{head}");
    let _ = writeln!(out, "|{}", " --- |".repeat(5 + 2 * engines.len()));
    for size in &sizes {
        let mut clients: Vec<usize> = s
            .rows
            .iter()
            .filter(|r| &r.txn_size == size)
            .map(|r| r.clients)
            .collect();
        clients.sort_unstable();
        clients.dedup();
        for c in clients {
            for step in &steps {
                let rows: Vec<&InsertRow> = s
                    .rows
                    .iter()
                    .filter(|r| &r.txn_size == size && r.clients == c && &r.step == step)
                    .collect();
                let Some(first) = rows.first() else { continue };
                let query = first.target_rows_per_sec.is_some();
                let mut line = format!("| {size} | {c} | {step} | {} |", first.rows_per_commit);
                let mut thr = BTreeMap::new();
                for e in &engines {
                    match rows.iter().find(|r| &r.engine == e) {
                        Some(r) => {
                            let v = if query {
                                r.queries_per_sec
                            } else {
                                r.rows_per_sec
                            };
                            let flag = if r.rate_sustained == Some(false) {
                                " (inserts missed their rate)"
                            } else {
                                ""
                            };
                            let _ = write!(
                                line,
                                " {v:.0}{flag} | {} |",
                                or_na(r.costs.fsyncs_per_commit, 3)
                            );
                            thr.insert(e.clone(), v);
                            panels
                                .entry(format!("{step} {size}"))
                                .or_default()
                                .entry(e.clone())
                                .or_default()
                                .push((c as f64, v));
                            if r.step != "l.x" && r.costs.fsyncs_per_commit.is_some_and(|f| f > 1.0)
                            {
                                misses.push(format!(
                                    "{size} x{c} {step}: {e} made {} log syncs per commit",
                                    or_na(r.costs.fsyncs_per_commit, 3)
                                ));
                            }
                        }
                        None => line.push_str(" - | - |"),
                    }
                }
                let q = ratio(&thr);
                let _ = writeln!(out, "{line} {} |", or_na(q, 2));
                if first.write_heavy
                    && let Some(q) = q
                    && q <= 1.0
                {
                    misses.push(format!(
                        "{size} x{c} {step}: Quill at {q:.2}x the best peer"
                    ));
                }
            }
        }
    }
    costs_table(
        &mut out,
        s.rows.iter().map(|r| {
            let p99 = r
                .latency
                .iter()
                .find(|l| l.op == "insert" || l.op == "create-index")
                .map_or(f64::NAN, |l| l.p99_us);
            (
                format!("{} x{} {}", r.txn_size, r.clients, r.step),
                r.engine.as_str(),
                p99,
                &r.costs,
            )
        }),
        "per row inserted (l.x: per row indexed; qr/qp: per query)",
    );
    goal(&mut out, &misses, "l.i0, l.i1 and l.i2");
    let panels = panels
        .into_iter()
        .map(|(title, series)| Panel {
            title,
            series: series
                .into_iter()
                .map(|(name, points)| Series { name, points })
                .collect(),
        })
        .collect();
    (out, misses.len(), panels)
}

fn costs_table<'a>(
    out: &mut String,
    rows: impl Iterator<Item = (String, &'a str, f64, &'a super::costs::Costs)>,
    per: &str,
) {
    let _ = writeln!(out, "\n## Costs {per}\n");
    let _ = writeln!(
        out,
        "| run | engine | p99 us | cpu us | context switches | bytes written | log bytes | redo payload | data bytes | doublewrite bytes |"
    );
    let _ = writeln!(out, "|{}", " --- |".repeat(10));
    for (run, engine, p99, c) in rows {
        let _ = writeln!(
            out,
            "| {run} | {engine} | {p99:.0} | {:.1} | {:.2} | {} | {} | {} | {} | {} |",
            c.cpu_us_per_op,
            c.switches_per_op,
            or_na(c.write_bytes_per_op, 0),
            or_na(c.log_bytes_per_op, 0),
            or_na(c.redo_bytes_per_op, 0),
            or_na(c.data_bytes_per_op, 0),
            or_na(c.doublewrite_bytes_per_op, 0)
        );
    }
}

fn goal(out: &mut String, misses: &[String], write_heavy: &str) {
    let _ = writeln!(
        out,
        "\n## Goal: Quill ahead of every peer on {write_heavy}, and at most 1 log sync per commit\n"
    );
    if misses.is_empty() {
        let _ = writeln!(out, "Met on every row.");
    } else {
        let _ = writeln!(out, "Missed on {} rows:\n", misses.len());
        for m in misses {
            let _ = writeln!(out, "- {m}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costs::Costs;

    fn oltp_row(engine: &str, shape: &str, threads: usize, tps: f64) -> OltpRow {
        OltpRow {
            engine: engine.into(),
            shape: shape.into(),
            threads,
            seconds: 1.0,
            transactions: tps as u64,
            tps,
            qps: tps,
            p50_us: 1.0,
            p95_us: 2.0,
            p99_us: 3.0,
            max_us: 4.0,
            costs: Costs {
                fsyncs_per_commit: (engine != "sqlite").then_some(0.5),
                ..Costs::default()
            },
            retries: 0,
            settle_ms: None,
            settle_cpu_us_per_op: None,
            settle_write_bytes_per_op: None,
        }
    }

    #[test]
    fn oltp_report_checks_the_goal_and_draws_a_chart() {
        let tmp = tempfile::tempdir().unwrap();
        let rows = vec![
            oltp_row("quill", "insert", 1, 100.0),
            oltp_row("sqlite", "insert", 1, 50.0),
            oltp_row("rocksdb", "insert", 1, 120.0),
            oltp_row("quill", "insert", 4, 300.0),
            oltp_row("sqlite", "insert", 4, 50.0),
            oltp_row("rocksdb", "insert", 4, 200.0),
            oltp_row("quill", "point-select", 1, 10.0),
            oltp_row("sqlite", "point-select", 1, 50.0),
        ];
        let json = tmp.path().join("oltp.json");
        std::fs::write(
            &json,
            serde_json::to_string(&serde_json::json!({
                "tool": "quill bench oltp", "command": "quill bench oltp", "date": "today",
                "machine": {"nproc": 2, "mem_gib": 24.0, "filesystem": "ext4", "kernel": "6"},
                "engines": [{"name": "quill", "note": "syncs counted"}],
                "rows": rows,
            }))
            .unwrap(),
        )
        .unwrap();
        let (md, png) = (tmp.path().join("r.md"), tmp.path().join("r.png"));
        let misses = write(&json, &md, &png).unwrap();
        let text = std::fs::read_to_string(&md).unwrap();
        // insert x1 is behind RocksDB; point-select is not write-heavy.
        assert_eq!(misses, 1, "{text}");
        assert!(
            text.contains("insert x1: Quill at 0.83x the best peer"),
            "{text}"
        );
        assert!(
            text.contains("| insert | 4 | 300 | 0.500 | 50 | n/a | 200 | 0.500 | 1.50 |"),
            "{text}"
        );
        assert!(std::fs::metadata(&png).unwrap().len() > 1000);
    }

    #[test]
    fn foreign_or_broken_json_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let (md, png) = (tmp.path().join("r.md"), tmp.path().join("r.png"));
        let j = tmp.path().join("x.json");
        std::fs::write(&j, "{\"tool\": \"quill bench commit\", \"rows\": []}").unwrap();
        assert!(write(&j, &md, &png).is_err());
        std::fs::write(&j, "not json").unwrap();
        assert!(write(&j, &md, &png).is_err());
        assert!(write(&tmp.path().join("missing.json"), &md, &png).is_err());
    }
}
