//! What the client-thread benchmarks (`txn`, `oltp`) share: the measured
//! window, the sysbench table and filler text, and a cheap random source.
//!
//! The window: `n` client threads run transactions back to back. After
//! the warm-up every client finishes the transaction in hand and waits, so
//! the caller reads its counters with nothing in flight; then the window
//! opens, and when it ends every client finishes its last transaction and
//! is joined before the caller reads its counters again. Every transaction
//! counted therefore began and ended inside the window, with all of its
//! syncs.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::commit::new_hist;
use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{Column, ColumnType};
use quill::{Error, Result};

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;
const PAUSE: u8 = 3;

/// Transaction latencies, microseconds.
pub(crate) type Latencies = hdrhistogram::Histogram<u64>;

/// What a window measured, with the caller's snapshot taken at its start.
pub(crate) struct Measured<S> {
    /// The caller's counters at the quiet start of the window.
    pub start: S,
    /// Latencies of the transactions inside the window.
    pub hist: Latencies,
    /// Transactions completed inside the window.
    pub count: u64,
    /// Latencies and counts by the kind the client reported (index = kind).
    pub kinds: Vec<(Latencies, u64)>,
    /// Length of the window, from its start to the last client's end.
    pub seconds: f64,
}

/// Window settings.
pub(crate) struct Plan<'a> {
    /// Client threads.
    pub clients: usize,
    /// Warm-up seconds.
    pub warmup: f64,
    /// Measured seconds.
    pub seconds: f64,
    /// Progress label.
    pub label: &'a str,
}

/// Run `plan.clients` clients. Each thread calls `client(c)` once for its
/// transaction function, then calls that function back to back; it returns
/// `Ok(Some(kind))` for a completed operation of that kind (workloads with
/// one kind use 0) and `Ok(None)` for no operation (rolled back to be
/// retried, or nothing to do yet; not timed). `at_start` reads the
/// caller's counters at the quiet point before the window opens.
pub(crate) fn run<S, F>(
    plan: &Plan<'_>,
    tick: &dyn Fn(&str, f64),
    client: &(dyn Fn(usize) -> Result<F> + Sync),
    at_start: impl FnOnce() -> S,
) -> Result<Measured<S>>
where
    F: FnMut() -> Result<Option<usize>>,
{
    let phase = AtomicU8::new(WARMUP);
    let paused = AtomicU64::new(0);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for c in 0..plan.clients {
            let (phase, paused) = (&phase, &paused);
            handles.push(s.spawn(move || -> Result<Vec<(Latencies, u64)>> {
                let mut txn = client(c)?;
                let mut kinds: Vec<(Latencies, u64)> = Vec::new();
                loop {
                    let mut p = phase.load(Ordering::Acquire);
                    if p == PAUSE {
                        paused.fetch_add(1, Ordering::AcqRel);
                        while p == PAUSE {
                            std::thread::sleep(Duration::from_micros(200));
                            p = phase.load(Ordering::Acquire);
                        }
                    }
                    if p == STOP {
                        return Ok(kinds);
                    }
                    let started = Instant::now();
                    if let Some(kind) = txn()?
                        && p == MEASURE
                    {
                        while kinds.len() <= kind {
                            kinds.push((new_hist(), 0));
                        }
                        if let Some((hist, count)) = kinds.get_mut(kind) {
                            let _ = hist.record(started.elapsed().as_micros().max(1) as u64);
                            *count += 1;
                        }
                    }
                }
            }));
        }
        let warm_until = Instant::now() + Duration::from_secs_f64(plan.warmup);
        while Instant::now() < warm_until {
            std::thread::sleep(Duration::from_millis(50));
        }
        // A quiet start: every client paused (one that failed is not
        // waited for; its error is returned below).
        phase.store(PAUSE, Ordering::Release);
        let quiet_by = Instant::now() + Duration::from_secs(30);
        while (paused.load(Ordering::Acquire) as usize)
            + handles.iter().filter(|h| h.is_finished()).count()
            < plan.clients
            && Instant::now() < quiet_by
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        let start = at_start();
        let started = Instant::now();
        phase.store(MEASURE, Ordering::Release);
        let total = Duration::from_secs_f64(plan.seconds);
        while started.elapsed() < total {
            std::thread::sleep(Duration::from_millis(100));
            tick(plan.label, started.elapsed().as_secs_f64() / plan.seconds);
        }
        phase.store(STOP, Ordering::Release);
        let mut hist = new_hist();
        let mut count = 0;
        let mut kinds: Vec<(Latencies, u64)> = Vec::new();
        for h in handles {
            let mine = h.join().map_err(|_| Error::InvalidArgument {
                what: "benchmark client",
                reason: "panicked".into(),
            })??;
            for (kind, (hh, c)) in mine.into_iter().enumerate() {
                let _ = hist.add(&hh);
                count += c;
                while kinds.len() <= kind {
                    kinds.push((new_hist(), 0));
                }
                if let Some((kh, kc)) = kinds.get_mut(kind) {
                    let _ = kh.add(&hh);
                    *kc += c;
                }
            }
        }
        Ok(Measured {
            start,
            hist,
            count,
            kinds,
            seconds: started.elapsed().as_secs_f64(),
        })
    })
}

/// sysbench's table `sbtestN(id int64 primary key, k int32, c text(120),
/// pad text(60))` with index `k_N` on `k`.
pub fn sbtest(n: usize) -> TableDef {
    TableDef {
        name: format!("sbtest{n}"),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("k", ColumnType::Int32, false),
            Column::new("c", ColumnType::Text { max_len: 120 }, false),
            Column::new("pad", ColumnType::Text { max_len: 60 }, false),
        ],
        primary_key: vec![0],
        indexes: vec![IndexDef {
            name: format!("k_{n}"),
            columns: vec![1],
            unique: false,
        }],
    }
}

/// xorshift64*: cheap, reproducible per-thread randomness.
pub(crate) struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// sysbench's `###########-###########-...` filler of `len` chars.
    ///
    /// Each group of eleven digits comes from one draw (its low eleven
    /// decimal digits, uniform to within 1 part in 10^8), written as
    /// bytes: the clients share the cores with the engine under test,
    /// and a draw and a `String::push` per digit made this 7% of the
    /// instructions of a write-only transaction (11.1k of 158k, callgrind,
    /// 2026-11-28; 5.2k now).
    pub fn text(&mut self, len: usize) -> String {
        let mut v = Vec::with_capacity(len);
        while v.len() < len {
            let mut group = [b'-'; 12];
            let mut x = self.next();
            for b in group.iter_mut().take(11) {
                *b = b'0' + (x % 10) as u8;
                x /= 10;
            }
            let n = (len - v.len()).min(group.len());
            v.extend_from_slice(group.get(..n).unwrap_or_default());
        }
        // Digits and dashes only.
        String::from_utf8(v).expect("the filler is ASCII")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sysbench's shape (a dash after every eleven digits), and digits
    /// drawn evenly: over 110,000 of them each of the ten appears within
    /// 5% of its share (a digit stuck or skewed by the per-draw reuse
    /// would be far outside).
    #[test]
    fn text_has_sysbench_shape_and_even_digits() {
        let mut rng = Rng(0x5EED_0001);
        let mut counts = [0u32; 10];
        for _ in 0..1000 {
            let t = rng.text(119);
            assert_eq!(t.len(), 119);
            for (i, b) in t.bytes().enumerate() {
                if i % 12 == 11 {
                    assert_eq!(b, b'-', "{t}");
                } else {
                    assert!(b.is_ascii_digit(), "{t}");
                    counts[usize::from(b - b'0')] += 1;
                }
            }
        }
        let total: u32 = counts.iter().sum();
        assert_eq!(total, 1000 * 110);
        for (d, &c) in counts.iter().enumerate() {
            let share = f64::from(c) / f64::from(total);
            assert!((share - 0.1).abs() < 0.005, "digit {d}: {share}");
        }
    }
}
