#![no_main]
//! Arbitrary bytes from a client into a running `quill serve` (the
//! harness in `quill_server::fuzzing`): the first byte picks whether the
//! rest follows a valid startup (even) or replaces it (odd). No input may
//! panic a server task, hang its connection or stop the server answering
//! a new one. `crates/quill-server/tests/wire_no_panic.rs` is the bounded
//! run of the same harness in every `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    quill_server::fuzzing::harness().run(rest, mode & 1 == 1);
});
