//! The real-process crash test, short: `quill torture` kills a child
//! process with SIGKILL at random moments and checks each recovery.
//! `quill torture --seconds 600` is the long run.

use std::process::Command;

/// Run `quill torture` with `extra` arguments for 4 s; it must pass with
/// at least two kill-and-recover rounds.
fn short_run(extra: &[&str], seed: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_quill"))
        .arg("torture")
        .args(extra)
        .args(["--seconds", "4", "--seed", seed, "--dir"])
        .arg(dir.path().join("t"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "torture {extra:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("passed:"), "{stdout}");
    assert!(
        stdout.contains("round 1:"),
        "at least two rounds ran:\n{stdout}"
    );
}

#[test]
fn torture_short_run() {
    short_run(&[], "12345");
}

#[test]
fn transaction_torture_short_run() {
    short_run(&["--txn"], "777");
}
