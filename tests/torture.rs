//! The real-process crash test, short: `quill torture` kills a child
//! process with SIGKILL at random moments and checks each recovery.
//! `quill torture --seconds 600` is the long run.

use std::process::Command;

#[test]
fn torture_short_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_quill"))
        .args(["torture", "--seconds", "4", "--seed", "12345", "--dir"])
        .arg(dir.path().join("t"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "torture failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("passed:"), "{stdout}");
    assert!(
        stdout.contains("round 1:"),
        "at least two rounds ran:\n{stdout}"
    );
}

#[test]
fn transaction_torture_short_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_quill"))
        .args([
            "torture",
            "--txn",
            "--seconds",
            "4",
            "--seed",
            "777",
            "--dir",
        ])
        .arg(dir.path().join("t"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "transaction torture failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("passed:"), "{stdout}");
    assert!(
        stdout.contains("round 1:"),
        "at least two rounds ran:\n{stdout}"
    );
}
