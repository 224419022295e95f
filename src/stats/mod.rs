//! Counters and latency histograms, and their snapshots.
//!
//! Depends on nothing else in Quill. Hot counters are sharded over
//! cache-padded atomics so that concurrent committers on many cores do not
//! bounce one cache line; histograms are sharded `hdrhistogram`s behind
//! per-shard mutexes (a record is one short uncontended critical section).
//! A thread always uses the same shard, chosen round-robin at first use.
//!
//! Invariants (cited by assertions as "stats In"):
//! 1. `get`/`snapshot` are sums over shards; they may miss increments that
//!    race with them but never count one twice.
//! 2. Histogram values are clamped into the histogram's range, never dropped,
//!    so counts always equal the number of `record` calls. Every shard has
//!    the same bounds, so merging shards cannot fail either.
//! 3. A thread's shard is its number modulo the shard count, so it is always
//!    in range: counters and histograms index their shards directly (an
//!    out-of-range shard used to drop the increment silently, breaking 1
//!    and 2).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Cores available to this process (read once; `available_parallelism`
/// reads cgroup files on every call).
pub fn cores() -> usize {
    static CORES: AtomicUsize = AtomicUsize::new(0);
    let n = CORES.load(Ordering::Relaxed);
    if n != 0 {
        return n;
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    CORES.store(n, Ordering::Relaxed);
    n
}

/// Shard count: enough for the machine's cores, at least 4.
fn shard_count() -> usize {
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let n = COUNT.load(Ordering::Relaxed);
    if n != 0 {
        return n;
    }
    let n = cores().next_power_of_two().clamp(4, 64);
    COUNT.store(n, Ordering::Relaxed);
    n
}

/// This thread's shard number (before reduction modulo the shard count).
fn thread_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SHARD.with(|s| *s)
}

/// A monotonically increasing counter, sharded to avoid false sharing.
#[derive(Debug)]
pub struct Counter {
    shards: Box<[CachePadded<AtomicU64>]>,
}

impl Default for Counter {
    fn default() -> Self {
        Counter::new()
    }
}

impl Counter {
    /// A counter at zero.
    pub fn new() -> Self {
        Counter {
            shards: (0..shard_count())
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }

    /// Add `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        let i = thread_shard() % self.shards.len();
        #[allow(clippy::indexing_slicing)] // I3: reduced modulo the length
        self.shards[i].fetch_add(n, Ordering::Relaxed);
    }

    /// Add one.
    #[inline]
    pub fn incr(&self) {
        self.add(1);
    }

    /// The current total (invariant 1).
    pub fn get(&self) -> u64 {
        self.shards.iter().map(|s| s.load(Ordering::Relaxed)).sum()
    }
}

/// Highest value a histogram tracks; larger values are clamped to it.
const HIST_MAX: u64 = 3_600_000_000_000;

fn new_hist() -> hdrhistogram::Histogram<u64> {
    // Two significant digits keep each shard around 30 KiB. The arguments are
    // constants hdrhistogram accepts (covered by the tests below), so failure
    // would be our bug, not an input or I/O condition.
    #[allow(clippy::expect_used)]
    hdrhistogram::Histogram::new_with_bounds(1, HIST_MAX, 2)
        .expect("stats I2: constant histogram bounds")
}

/// A concurrent histogram of `u64` values (latencies in nanoseconds, sizes).
#[derive(Debug)]
pub struct Histogram {
    shards: Box<[CachePadded<Mutex<hdrhistogram::Histogram<u64>>>]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            shards: (0..shard_count())
                .map(|_| CachePadded::new(Mutex::new(new_hist())))
                .collect(),
        }
    }

    /// Record one value (clamped into range, invariant 2).
    #[inline]
    pub fn record(&self, value: u64) {
        let i = thread_shard() % self.shards.len();
        #[allow(clippy::indexing_slicing)] // I3: reduced modulo the length
        self.shards[i]
            .lock()
            .saturating_record(value.clamp(1, HIST_MAX));
    }

    /// Record a duration in nanoseconds (one over 584 years saturates,
    /// then clamps like any value past the range, I2).
    #[inline]
    pub fn record_duration(&self, d: Duration) {
        self.record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// All shards merged.
    pub fn merged(&self) -> hdrhistogram::Histogram<u64> {
        let mut all = new_hist();
        for s in self.shards.iter() {
            // Same bounds on every shard (I2), so `add` cannot fail; if it
            // did, the merged counts would silently miss a shard.
            #[allow(clippy::expect_used)]
            all.add(&*s.lock())
                .expect("stats I2: shards share the histogram's bounds");
        }
        all
    }

    /// Summary of everything recorded so far.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot::of(&self.merged())
    }
}

/// A summary of a histogram: count, mean and chosen percentiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HistogramSnapshot {
    /// Number of values recorded.
    pub count: u64,
    /// Smallest value.
    pub min: u64,
    /// Mean value.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest value.
    pub max: u64,
}

impl HistogramSnapshot {
    /// Summarise an hdrhistogram.
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Self {
        if h.is_empty() {
            return HistogramSnapshot::default();
        }
        HistogramSnapshot {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// An exponentially weighted moving average (weight 1/8 per sample) of a
/// duration or a count: the *typical* value, for decisions such as whether
/// to spin. A sample above four times the average counts as four times the
/// average, so one outlier (a millisecond stall on a shared host) cannot
/// swing it, while a real change still shows: a jump from 30 us to 5 ms is
/// tracked within about 16 samples. Updated without locks (a lost update
/// under a race only delays convergence).
#[derive(Debug, Default)]
pub struct Ewma {
    /// Nanoseconds, or a count in thousandths.
    value: AtomicU64,
}

impl Ewma {
    fn fold(&self, sample: u64) {
        let old = self.value.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            let sample = sample.min(old.saturating_mul(4));
            old - old / 8 + sample / 8
        };
        self.value.store(new, Ordering::Relaxed);
    }

    /// Fold in a duration sample.
    pub fn update(&self, sample: Duration) {
        self.fold(u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Current average duration (zero before the first sample).
    pub fn get(&self) -> Duration {
        Duration::from_nanos(self.value.load(Ordering::Relaxed))
    }

    /// Fold in a count sample.
    pub fn update_count(&self, n: u64) {
        self.fold(n.saturating_mul(1000));
    }

    /// Current average count (zero before the first sample).
    pub fn count(&self) -> f64 {
        self.value.load(Ordering::Relaxed) as f64 / 1000.0
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it): the time
/// stamps of log headers and saved statistics.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counter_sums_across_threads() {
        let c = Arc::new(Counter::new());
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.incr();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(c.get(), 8000);
    }

    #[test]
    fn histogram_counts_every_record_even_out_of_range() {
        let h = Histogram::new();
        h.record(0);
        h.record(5);
        h.record(u64::MAX);
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.min, 1);
        assert!(s.max >= HIST_MAX - HIST_MAX / 50);
    }

    #[test]
    fn ewma_ignores_one_outlier_but_follows_a_real_change() {
        let e = Ewma::default();
        for _ in 0..50 {
            e.update(Duration::from_micros(30));
        }
        e.update(Duration::from_millis(5));
        assert!(e.get() < Duration::from_micros(50), "{:?}", e.get());
        for _ in 0..40 {
            e.update(Duration::from_millis(5));
        }
        assert!(e.get() > Duration::from_millis(4), "{:?}", e.get());
    }

    #[test]
    fn ewma_counts() {
        let e = Ewma::default();
        for _ in 0..100 {
            e.update_count(3);
        }
        assert!((e.count() - 3.0).abs() < 0.1);
    }

    #[test]
    fn ewma_converges() {
        let e = Ewma::default();
        for _ in 0..100 {
            e.update(Duration::from_micros(100));
        }
        let got = e.get().as_micros();
        assert!((95..=105).contains(&got), "{got}");
    }
}
