//! The two-list LRU (young and old) over frame indices, plus the list of
//! free frames. Every method runs under the pool's LRU mutex.
//!
//! Invariants:
//! * L1. Every frame is in exactly one of: the free list, the young list,
//!   the old list, or none (a frame handed out by `pop_free` and not yet
//!   inserted, or being evicted). `which` records the list.
//! * L2. Frame indices are below the frame count given to [`Lru::new`]
//!   (the pool only passes indices of its own frames), so the per-frame
//!   arrays are indexed directly: an index out of range is a bug and
//!   panics instead of reading "not listed" or dropping a link update.
//! * L3. Links are symmetric: within a list, `next[prev[f]] == f` and
//!   `prev[next[f]] == f`; a list's `len` counts its frames, so removing
//!   a listed frame never takes a `len` below zero.

/// No frame.
pub(super) const NIL: u32 = u32::MAX;

const NONE: u8 = 0;
const YOUNG: u8 = 1;
const OLD: u8 = 2;

#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: usize,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

#[derive(Debug)]
pub(super) struct Lru {
    prev: Vec<u32>,
    next: Vec<u32>,
    which: Vec<u8>,
    young: List,
    old: List,
    free: Vec<u32>,
}

impl Lru {
    pub(super) fn new(frames: usize) -> Lru {
        assert!(
            u32::try_from(frames).is_ok_and(|n| n < NIL),
            "lru L2: {frames} frames do not fit u32 indices below NIL"
        );
        Lru {
            prev: vec![NIL; frames],
            next: vec![NIL; frames],
            which: vec![NONE; frames],
            young: List::EMPTY,
            old: List::EMPTY,
            free: (0..frames as u32).rev().collect(),
        }
    }

    pub(super) fn pop_free(&mut self) -> Option<u32> {
        let idx = self.free.pop()?;
        debug_assert_eq!(self.which(idx), NONE, "lru L1: free frame {idx} is listed");
        Some(idx)
    }

    pub(super) fn push_free(&mut self, idx: u32) {
        // L1: only a frame in no list goes back to the free list (the pool
        // returns one it took from `pop_free` and never inserted).
        assert_eq!(
            self.which(idx),
            NONE,
            "lru L1: frame {idx} freed while listed"
        );
        debug_assert!(!self.free.contains(&idx), "lru L1: frame {idx} freed twice");
        self.free.push(idx);
    }

    pub(super) fn free_count(&self) -> usize {
        self.free.len()
    }

    // L2: every index is one of the pool's frames, below the arrays' length.
    #[allow(clippy::indexing_slicing)]
    fn which(&self, idx: u32) -> u8 {
        self.which[idx as usize]
    }

    #[allow(clippy::indexing_slicing)] // L2
    fn set_which(&mut self, idx: u32, w: u8) {
        self.which[idx as usize] = w;
    }

    #[allow(clippy::indexing_slicing)] // L2
    fn link(&self, idx: u32) -> (u32, u32) {
        (self.prev[idx as usize], self.next[idx as usize])
    }

    #[allow(clippy::indexing_slicing)] // L2
    fn set(v: &mut [u32], idx: u32, val: u32) {
        v[idx as usize] = val;
    }

    fn list(&self, which: u8) -> &List {
        if which == YOUNG {
            &self.young
        } else {
            &self.old
        }
    }

    fn list_mut(&mut self, which: u8) -> &mut List {
        if which == YOUNG {
            &mut self.young
        } else {
            &mut self.old
        }
    }

    /// Take `idx` out of whichever list holds it (not the free list).
    pub(super) fn remove(&mut self, idx: u32) {
        let w = self.which(idx);
        if w == NONE {
            return;
        }
        let (p, n) = self.link(idx);
        // L3 (cheap half): the neighbours point back at `idx`.
        debug_assert!(
            (p == NIL || self.link(p).1 == idx) && (n == NIL || self.link(n).0 == idx),
            "lru L3: frame {idx} has asymmetric links ({p}, {n})"
        );
        if p != NIL {
            Self::set(&mut self.next, p, n);
        } else {
            debug_assert_eq!(
                self.list(w).head,
                idx,
                "lru L3: a frame without prev heads its list"
            );
            self.list_mut(w).head = n;
        }
        if n != NIL {
            Self::set(&mut self.prev, n, p);
        } else {
            debug_assert_eq!(
                self.list(w).tail,
                idx,
                "lru L3: a frame without next ends its list"
            );
            self.list_mut(w).tail = p;
        }
        let l = self.list_mut(w);
        assert!(
            l.len > 0,
            "lru L3: frame {idx} listed in a list of length 0"
        );
        l.len -= 1;
        Self::set(&mut self.prev, idx, NIL);
        Self::set(&mut self.next, idx, NIL);
        self.set_which(idx, NONE);
    }

    fn push_head(&mut self, which: u8, idx: u32) {
        // L1: callers remove the frame from its list first.
        assert_eq!(
            self.which(idx),
            NONE,
            "lru L1: frame {idx} pushed while listed"
        );
        let head = self.list_mut(which).head;
        Self::set(&mut self.prev, idx, NIL);
        Self::set(&mut self.next, idx, head);
        if head != NIL {
            Self::set(&mut self.prev, head, idx);
        }
        let l = self.list_mut(which);
        l.head = idx;
        if l.tail == NIL {
            l.tail = idx;
        }
        l.len += 1;
        self.set_which(idx, which);
    }

    /// Insert a newly read page at the midpoint (head of the old list).
    pub(super) fn push_old(&mut self, idx: u32) {
        self.remove(idx);
        self.push_head(OLD, idx);
    }

    pub(super) fn is_old(&self, idx: u32) -> bool {
        self.which(idx) == OLD
    }

    /// Promote `idx` to the young head; spill the young tail into the old
    /// list (calling `cleared` on each spilled frame) to keep the young
    /// list at most 5/8 of all listed pages.
    pub(super) fn make_young(&mut self, idx: u32, cleared: impl Fn(u32)) {
        self.remove(idx);
        self.push_head(YOUNG, idx);
        let total = self.young.len + self.old.len;
        while self.young.len > total * 5 / 8 && self.young.len > 1 {
            let t = self.young.tail;
            if t == NIL || t == idx {
                break;
            }
            self.remove(t);
            self.push_head(OLD, t);
            cleared(t);
        }
    }

    /// Where an eviction scan starts: the old tail, else the young tail.
    pub(super) fn tail_for_eviction(&self) -> u32 {
        if self.old.tail != NIL {
            self.old.tail
        } else {
            self.young.tail
        }
    }

    /// The next frame of an eviction scan after `cur` (towards the heads;
    /// from the old head on to the young tail).
    pub(super) fn prev_for_eviction(&self, cur: u32) -> u32 {
        let (p, _) = self.link(cur);
        if p != NIL {
            p
        } else if self.which(cur) == OLD {
            self.young.tail
        } else {
            NIL
        }
    }

    #[cfg(test)]
    pub(super) fn lens(&self) -> (usize, usize, usize) {
        (self.young.len, self.old.len, self.free.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_stay_consistent() {
        let mut l = Lru::new(8);
        let mut got = Vec::new();
        while let Some(i) = l.pop_free() {
            l.push_old(i);
            got.push(i);
        }
        assert_eq!(l.lens(), (0, 8, 0));
        for &i in &got[..4] {
            l.make_young(i, |_| {});
        }
        let (y, o, _) = l.lens();
        assert_eq!(y + o, 8);
        assert!(y <= 5);
        // Walk the eviction order: every frame exactly once.
        let mut seen = Vec::new();
        let mut c = l.tail_for_eviction();
        while c != NIL {
            seen.push(c);
            c = l.prev_for_eviction(c);
        }
        seen.sort();
        assert_eq!(seen, (0..8).collect::<Vec<_>>());
        l.remove(3);
        assert_eq!(l.lens().0 + l.lens().1, 7);
    }

    /// Walk both lists and check links, lengths and membership (L1).
    fn check(l: &Lru, model_listed: &std::collections::BTreeSet<u32>, frames: u32) {
        let mut seen = std::collections::BTreeSet::new();
        for (list, which) in [(&l.young, YOUNG), (&l.old, OLD)] {
            let mut n = 0;
            let mut prev = NIL;
            let mut cur = list.head;
            while cur != NIL {
                assert_eq!(l.which(cur), which);
                assert_eq!(l.link(cur).0, prev, "back link");
                assert!(seen.insert(cur), "frame {cur} listed twice");
                prev = cur;
                cur = l.link(cur).1;
                n += 1;
            }
            assert_eq!(list.tail, prev);
            assert_eq!(list.len, n);
        }
        assert_eq!(&seen, model_listed);
        for f in &l.free {
            assert!(!seen.contains(f), "frame {f} both free and listed");
        }
        assert!(seen.len() + l.free.len() <= frames as usize);
    }

    proptest::proptest! {
        /// Random list operations against a model of which frames are
        /// listed: links, lengths, the young cap and the eviction walk
        /// (every listed frame exactly once) always hold.
        #[test]
        fn lru_matches_model(ops in proptest::collection::vec((0u8..4, 0u32..16), 1..300)) {
            let frames = 16u32;
            let mut l = Lru::new(frames as usize);
            let mut listed = std::collections::BTreeSet::new();
            for (op, f) in ops {
                match op {
                    0 => {
                        if let Some(i) = l.pop_free() {
                            l.push_old(i);
                            listed.insert(i);
                        }
                    }
                    1 => {
                        if listed.contains(&f) {
                            l.make_young(f, |_| {});
                            // The cap holds right after a promotion.
                            let total = l.young.len + l.old.len;
                            proptest::prop_assert!(l.young.len <= (total * 5 / 8).max(1));
                        }
                    }
                    2 => {
                        if listed.remove(&f) {
                            l.remove(f);
                            l.push_free(f);
                        }
                    }
                    _ => {
                        // An eviction walk sees every listed frame once.
                        let mut walked = std::collections::BTreeSet::new();
                        let mut c = l.tail_for_eviction();
                        while c != NIL {
                            proptest::prop_assert!(walked.insert(c));
                            c = l.prev_for_eviction(c);
                        }
                        proptest::prop_assert_eq!(&walked, &listed);
                    }
                }
                check(&l, &listed, frames);
            }
        }
    }
}
