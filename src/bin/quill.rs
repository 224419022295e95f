//! The `quill` command line (bootstrap: bench fsync only).
use clap::{Parser, Subcommand};
use std::path::PathBuf;
#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}
#[derive(Subcommand)]
enum Cmd {
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
}
#[derive(Subcommand)]
enum Bench {
    Fsync {
        #[arg(long, default_value = "quill-data")]
        dir: PathBuf,
        #[arg(long, default_value_t = 500)]
        iterations: usize,
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        #[arg(long)]
        buffered: bool,
    },
}
fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Bench {
            which:
                Bench::Fsync {
                    dir,
                    iterations,
                    rounds,
                    buffered,
                },
        } => {
            let cfg = quill::bench::fsync::FsyncConfig {
                dir,
                iterations,
                rounds,
                buffered,
            };
            let r = quill::bench::fsync::run(&quill::io::RealFs::new(), &cfg, &|| {})?;
            quill::bench::fsync::print_table(&r);
        }
    }
    Ok(())
}
