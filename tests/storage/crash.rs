//! Crash recovery on the simulated disk: random mini-transactions (puts
//! and deletes of random sizes) with the page cleaner and checkpoints
//! running, a crash at a random instant that drops, keeps or tears every
//! unsynced write, then recovery. The tree must hold exactly the effects
//! of a prefix of the operations that includes every acknowledged one,
//! and every page must pass its checks (`verify`).

use std::collections::BTreeMap;

use proptest::prelude::*;
use quill::Durability;
use quill::btree::Tree;
use quill::io::{CrashMode, SimFs};
use rand::{RngExt, SeedableRng, rngs::SmallRng};

use crate::common::*;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
}

fn apply(m: &mut Model, op: &Op) {
    match op {
        Op::Put(k, v) => {
            m.insert(k.clone(), v.clone());
        }
        Op::Del(k) => {
            m.remove(k);
        }
    }
}

fn random_op(rng: &mut SmallRng, n: u64) -> Op {
    let key = (rng.random_range(0..400u32)).to_be_bytes().to_vec();
    if rng.random_bool(0.25) {
        Op::Del(key)
    } else {
        let len = match rng.random_range(0..10) {
            0 => rng.random_range(1100..6000),
            1..=3 => rng.random_range(200..1000),
            _ => rng.random_range(0..200),
        };
        Op::Put(key, bytes(n, len))
    }
}

/// One case: `cycles` rounds of (work, crash, recover, check).
fn run(seed: u64, mode: CrashMode, doublewrite: bool, frames: u64, cycles: usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut o = opts(frames);
    o.doublewrite = doublewrite;
    let mut fs = SimFs::new(seed);
    let store = create(&fs, o.clone());
    let root = Tree::create(&store).unwrap().root();
    store
        .commit(store.log().end_lsn(), Durability::Sync)
        .unwrap();
    let mut durable_state = Model::new(); // state all acknowledged ops produce
    let mut store = Some(store);
    let mut serial = 0u64;
    for cycle in 0..cycles {
        let s = store.take().unwrap();
        let t = Tree::open(&s, root);
        let n_ops = rng.random_range(1..300);
        let mut ops = Vec::new();
        let mut acked = 0usize;
        let mut last_lsn = None;
        let mut state = durable_state.clone();
        for i in 0..n_ops {
            serial += 1;
            let op = random_op(&mut rng, serial);
            let lsn = match &op {
                Op::Put(k, v) => Some(t.put(k, v).unwrap()),
                Op::Del(k) => t.delete(k).unwrap(),
            };
            apply(&mut state, &op);
            ops.push(op);
            if lsn.is_some() {
                last_lsn = lsn;
            }
            if rng.random_bool(0.2) {
                // Acknowledge everything so far (a no-op delete has no LSN
                // of its own; the last change's covers it).
                if let Some(lsn) = last_lsn {
                    s.commit(lsn, Durability::Sync).unwrap();
                }
                acked = i + 1;
            }
            if rng.random_bool(0.02) {
                s.checkpoint().unwrap();
            }
            if rng.random_bool(0.02) {
                // Durable only with a later commit's sync, if any.
                s.checkpoint_deferred().unwrap();
            }
        }
        assert_eq!(contents(&s, root), state, "seed {seed}: before the crash");
        let crashed = fs.crash(mode);
        drop(s);
        fs = crashed;
        let reopened = quill::store::Store::open(vfs(&fs), dir(), o.clone())
            .unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: recovery failed: {e}"));
        let got = contents(&reopened, root);
        // Find the prefix: at least every acknowledged op.
        let mut m = durable_state.clone();
        for op in &ops[..acked] {
            apply(&mut m, op);
        }
        let mut found = got == m;
        let mut k = acked;
        while !found && k < ops.len() {
            apply(&mut m, &ops[k]);
            k += 1;
            found = got == m;
        }
        if !found {
            let mut m = durable_state.clone();
            for op in &ops[..acked] {
                apply(&mut m, op);
            }
            for (k, v) in &m {
                match got.get(k) {
                    None => eprintln!("missing {k:?} (len {})", v.len()),
                    Some(g) if g != v => {
                        eprintln!("differs {k:?} got len {} want {}", g.len(), v.len())
                    }
                    _ => {}
                }
            }
            for k in got.keys() {
                if !m.contains_key(k) {
                    eprintln!("extra {k:?}");
                }
            }
            eprintln!("recovery: {:?}", reopened.recovery());
        }
        assert!(
            found,
            "seed {seed} cycle {cycle}: recovered tree ({} entries) is no prefix of the \
             {} operations at or after the {acked} acknowledged ones",
            got.len(),
            ops.len()
        );
        // Every page on disk passes its checks, before and after the
        // recovered state is written out.
        reopened.scrub().unwrap();
        reopened.flush_all().unwrap();
        reopened.scrub().unwrap();
        durable_state = got;
        store = Some(reopened);
    }
    store.take().unwrap().close().unwrap();
}

fn mode_of(i: u8) -> CrashMode {
    match i % 3 {
        0 => CrashMode::Random,
        1 => CrashMode::DropUnsynced,
        _ => CrashMode::KeepUnsynced,
    }
}

/// Cases per property: `QUILL_CRASH_CASES` (default 16) for longer runs.
fn cases() -> u32 {
    std::env::var("QUILL_CRASH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
    /// Doublewrite on: any crash mode, torn writes included.
    #[test]
    fn crash_recovery_with_doublewrite(seed in any::<u64>(), mode in 0u8..3, small in any::<bool>()) {
        run(seed, mode_of(mode), true, if small { 40 } else { 400 }, 3);
    }

    /// Doublewrite off: writes are lost or kept whole (a torn page without
    /// doublewrite is the separate test below).
    #[test]
    fn crash_recovery_without_doublewrite(seed in any::<u64>(), keep in any::<bool>(), small in any::<bool>()) {
        let mode = if keep { CrashMode::KeepUnsynced } else { CrashMode::DropUnsynced };
        run(seed, mode, false, if small { 40 } else { 400 }, 3);
    }
}
