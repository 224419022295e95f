//! Records the commit the `quill` binary is built from, for its result
//! files: the working directory a benchmark runs in may be another
//! checkout (an A/B runs a baseline binary from this tree's directory).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=QUILL_BUILD_COMMIT={commit}");
    // Rebuild when HEAD moves (a commit, a checkout); in a worktree the
    // git directory is not `.git`.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let common =
                git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]).unwrap_or(dir);
            println!("cargo:rerun-if-changed={common}/{head}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
