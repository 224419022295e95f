//! `quill bench report`: a markdown report and a PNG chart from a
//! benchmark's JSON.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use quill_bench::{self as bench};

/// Arguments of `quill bench report`.
#[derive(Args)]
pub struct ReportArgs {
    /// JSON written by `quill bench oltp --json` or `quill bench insert --json`.
    json: PathBuf,
    /// Markdown output (default: the JSON's path with `.md`).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// PNG chart output (default: the JSON's path with `.png`).
    #[arg(long)]
    png: Option<PathBuf>,
}

/// Run `quill bench report`.
pub fn run(a: ReportArgs) -> Result<()> {
    let md = a.markdown.unwrap_or_else(|| a.json.with_extension("md"));
    let png = a.png.unwrap_or_else(|| a.json.with_extension("png"));
    let misses = bench::report::write(&a.json, &md, &png)
        .with_context(|| format!("reporting on {}", a.json.display()))?;
    outln!(
        "wrote {} and {}; goal {}",
        md.display(),
        png.display(),
        if misses == 0 {
            "met on every row".to_string()
        } else {
            format!("missed on {misses} rows (listed in the report)")
        }
    );
    Ok(())
}
