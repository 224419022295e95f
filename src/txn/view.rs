//! Read views: which transactions' changes a snapshot sees.
//!
//! A view created by transaction `creator` sees a change made by
//! transaction `t` exactly when `t == creator`, or `t` became visible
//! (left the registry, see `registry`) before the view was created:
//! `t` is below the view's limit and not among the ids the view found
//! registered. Id 0 (data written outside transactions) is always seen.
//!
//! Invariants:
//! * V1. `hidden` is strictly increasing and below `limit` ([`ReadView::sees`]
//!   binary-searches it, and [`ReadView::oldest_hidden`] takes its first
//!   element as the minimum). Debug-asserted when a view is made (a scan of
//!   the list).
//! * V2. The view low a view publishes (registry R4) is nonzero and at most
//!   its oldest hidden id, so purge keeps every undo record the view can
//!   follow.

use super::registry::{TrxId, TrxRegistry};

/// A snapshot for MVCC reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadView {
    creator: TrxId,
    /// Ids at or above this began after the view.
    limit: TrxId,
    /// Ids below `limit` not visible to this view, sorted.
    hidden: Vec<TrxId>,
}

impl ReadView {
    /// A view for transaction `creator` (0 for none) of `reg` now (for
    /// tests; transactions use [`ReadView::open`]).
    #[cfg(test)]
    pub fn create(reg: &TrxRegistry, creator: TrxId) -> ReadView {
        let (limit, hidden) = reg.snapshot();
        ReadView::new(creator, limit, hidden)
    }

    /// A view over a registry snapshot, checked against V1.
    fn new(creator: TrxId, limit: TrxId, hidden: Vec<TrxId>) -> ReadView {
        debug_assert!(
            hidden.windows(2).all(|w| matches!(w, [a, b] if a < b))
                && hidden.last().is_none_or(|&h| h < limit),
            "view V1: hidden ids {hidden:?} not strictly increasing below {limit}"
        );
        ReadView {
            creator,
            limit,
            hidden,
        }
    }

    /// A view for the transaction in `slot`, published as that slot's
    /// view low (registry R4) so purge keeps what it may read. The low
    /// stays until the slot is released or a newer view replaces it.
    pub fn open(
        reg: &TrxRegistry,
        slot: &super::registry::SlotToken,
        durable: &dyn Fn() -> u64,
    ) -> ReadView {
        let prior = reg.view_low(slot.index());
        reg.publish_view_low(slot.index(), reg.purged_upto().max(1));
        let (limit, hidden) = reg.snapshot_at(durable);
        let v = ReadView::new(slot.id(), limit, hidden);
        // Keep the lowest low of the transaction's views: an earlier
        // statement's rows iterator may still be reading (V2).
        let low = v.oldest_hidden().max(1);
        let low = if prior == 0 { low } else { low.min(prior) };
        reg.publish_view_low(slot.index(), low);
        v
    }

    /// Whether changes made by transaction `t` are visible.
    pub fn sees(&self, t: TrxId) -> bool {
        t == 0 || t == self.creator || (t < self.limit && self.hidden.binary_search(&t).is_err())
    }

    /// Changes by transactions below this id are visible to this view, and
    /// to every view created after it (purge may remove older versions
    /// that only such views could need). With nothing hidden, that is the
    /// limit (V1: `hidden` is sorted and below it).
    pub fn oldest_hidden(&self) -> TrxId {
        self.hidden.first().copied().unwrap_or(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Step {
        Begin,
        /// Make transaction number k (in begin order) visible.
        Visible(usize),
        /// Create a view for transaction number k (or none).
        View(Option<usize>),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => Just(Step::Begin),
            3 => (0usize..40).prop_map(Step::Visible),
            2 => proptest::option::of(0usize..40).prop_map(Step::View),
        ]
    }

    proptest! {
        /// Against a serial model: a view sees exactly its creator and the
        /// transactions that became visible before it was created.
        #[test]
        fn views_match_a_serial_model(steps in proptest::collection::vec(step(), 1..200)) {
            let reg = TrxRegistry::new(64, 0);
            let mut slots = Vec::new(); // (id, Some(slot) while hidden)
            let mut visible_at: BTreeMap<TrxId, usize> = BTreeMap::new();
            let mut views = Vec::new(); // (view, step index, creator)
            for (n, s) in steps.iter().enumerate() {
                match s {
                    Step::Begin => {
                        if let Ok(slot) = reg.begin() {
                            slots.push((slot.id(), Some(slot)));
                        }
                    }
                    Step::Visible(k) => {
                        if let Some((id, slot)) = slots.get_mut(*k)
                            && let Some(slot) = slot.take()
                        {
                            slot.release();
                            visible_at.insert(*id, n);
                        }
                    }
                    Step::View(k) => {
                        let creator = k.and_then(|k| slots.get(k)).map_or(0, |(id, _)| *id);
                        views.push((ReadView::create(&reg, creator), n, creator));
                    }
                }
                // Check every view against the model, every step.
                for (v, at, creator) in &views {
                    for (id, _) in &slots {
                        let want = *id == *creator
                            || visible_at.get(id).is_some_and(|vis| vis < at);
                        prop_assert_eq!(v.sees(*id), want, "view at step {} trx {}", at, id);
                    }
                }
            }
        }
    }

    /// Ids are unique and increasing; a full registry is an error; a
    /// released slot is reused.
    #[test]
    fn ids_and_slots() {
        let reg = TrxRegistry::new(2, 41);
        let a = reg.begin().unwrap();
        let b = reg.begin().unwrap();
        assert_eq!((a.id(), b.id()), (42, 43));
        assert!(reg.begin().is_err());
        drop(a);
        let c = reg.begin().unwrap();
        assert_eq!(c.id(), 44);
        let v = ReadView::create(&reg, 0);
        assert!(v.sees(42) && !v.sees(43) && !v.sees(44) && !v.sees(45) && v.sees(0));
        assert_eq!(v.oldest_hidden(), 43);
    }

    /// Concurrent begins, releases and view creations: a view never sees a
    /// transaction that was still hidden when the view was created, and
    /// always sees one that became visible before.
    #[test]
    fn concurrent_views_are_consistent() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let reg = Arc::new(TrxRegistry::new(64, 0));
        // Highest id known to be visible, published after release.
        let visible_upto = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut hs = Vec::new();
        for _ in 0..4 {
            let (reg, vis, stop) = (reg.clone(), visible_upto.clone(), stop.clone());
            hs.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    let s = reg.begin().unwrap();
                    let id = s.id();
                    std::thread::yield_now();
                    s.release();
                    vis.fetch_max(id, Ordering::SeqCst);
                }
            }));
        }
        for _ in 0..20_000 {
            // Record what is known visible before, create the view, and
            // note which transactions are known hidden after.
            let before = visible_upto.load(Ordering::SeqCst);
            let v = ReadView::create(&reg, 0);
            // Every transaction fully released before the view started...
            // (only ids <= before that are not in flight: a thread bumps
            // `visible_upto` after releasing, so `before` itself was
            // released before the view.)
            if before > 0 {
                assert!(v.sees(before), "released trx {before} not seen");
            }
            // ...and nothing that begins after the view.
            let later = reg.begin().unwrap();
            assert!(
                !v.sees(later.id()),
                "trx {} began after the view",
                later.id()
            );
        }
        stop.store(true, Ordering::Release);
        for h in hs {
            h.join().unwrap();
        }
    }
}
