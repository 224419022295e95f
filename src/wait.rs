//! Whether the running thread may wait: the engine's side of running a
//! statement on a thread that must not block.
//!
//! A server runs each statement first on its event loop's thread, where a
//! blocked call would stall every other connection of that thread, inside
//! [`without_waiting`]. There, the two waits that can last (a row lock
//! another transaction holds, a page that is not in the buffer pool) fail
//! with [`Error::WouldWait`] instead of waiting; the transaction's write
//! call that met it has already undone itself (a statement is all or
//! nothing), the caller undoes the rest of its statement
//! ([`crate::OwnedTxn::rollback_to_savepoint`]) and runs the statement
//! again on a thread that may block. Statements that meet neither (the
//! common case: a cached page, a free row) run to the end with no hand-off
//! between threads.
//!
//! Invariants:
//! * W1. [`Error::WouldWait`] is raised only where the operation has
//!   changed nothing: a row lock request before it queues (as a deadlock
//!   victim's, lock L4), a page read before the pool takes a frame for it,
//!   a table's schema lock before it is taken, a locking read's wait for
//!   the row's last commit to be durable (with only the row's lock taken),
//!   a new mini-transaction's wait for log space, and a wait for a page
//!   latch another thread holds while it reads the page from disk (a
//!   demand read or read-ahead; taken before anything is latched for it,
//!   and refused with nothing latched by the waiter on the descent's
//!   path). Page latches held for a page operation are still waited for.
//! * W2. Never while a mini-transaction holds changes not yet logged:
//!   abandoning it would poison the buffer pool (mtr M4). Such an mtr holds
//!   a `MayWait` guard from its first change to its commit, and a page it must
//!   read after that (a split's free-list page) is read, waiting, as
//!   before. The same holds for rollback, which must finish.
//! * W3. Outside [`without_waiting`] nothing changes: every wait waits.
//! * W4. An attempt is also refused, at a row boundary, once it has run
//!   for [`ATTEMPT_BUDGET`]: a long scan or a write of many rows would
//!   hold the event loop's thread as a wait would. The work thrown away is at most
//!   that budget.
//! * W5. A transaction's write call refused so is undone whole and
//!   releases the row locks it took that the transaction did not hold
//!   before: the statement will run again, maybe much later on another
//!   thread, and a lock on a key it no longer writes would only keep
//!   others waiting. An insert refused so gives back the automatic key it
//!   drew (table TB3), if it had taken that key's row lock newly. Locks
//!   taken by earlier calls of the same SQL statement stay until the
//!   transaction ends, as after any failed statement, and so does a
//!   shared lock the call upgraded to exclusive (the transaction held the
//!   key before; the lock table has no downgrade).

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// How long an attempt without waiting may run before it is refused (W4).
pub const ATTEMPT_BUDGET: Duration = Duration::from_micros(500);

/// Rows between two looks at the clock (W4).
const STEPS_PER_LOOK: u32 = 64;

thread_local! {
    /// Whether a wait was refused inside the current [`without_waiting`].
    static REFUSED: Cell<bool> = const { Cell::new(false) };
    /// Live [`MayWait`] guards on this thread (W2).
    static MAY_WAIT: Cell<u32> = const { Cell::new(0) };
    /// Inside [`without_waiting`]: when the attempt must end (W4);
    /// `None` outside one (waits allowed). Then rows since the last look.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    static STEPS: Cell<u32> = const { Cell::new(0) };
}

/// Run `f` on this thread with waits refused: a row lock that is held by
/// another transaction, a page that must be read from disk, or a table
/// a DDL statement holds fails with [`Error::WouldWait`] (W1) instead of
/// blocking the thread. Returns `f`'s result and whether any wait was
/// refused: if one was, treat the result as void whatever it says (a
/// caller may have turned the error into another, or gone on without
/// the value it could not read), undo the attempt and run it again
/// outside. The previous mode is restored when `f` returns or unwinds.
pub fn without_waiting<R>(f: impl FnOnce() -> R) -> (R, bool) {
    struct Restore {
        refused: bool,
        deadline: Option<Instant>,
    }
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|c| c.set(self.deadline));
            // A nested attempt's refusal is its caller's too.
            REFUSED.with(|c| c.set(self.refused || c.get()));
        }
    }
    let outer = DEADLINE.with(Cell::get);
    let restore = Restore {
        refused: REFUSED.with(|c| c.replace(false)),
        deadline: outer,
    };
    let mine = Instant::now() + ATTEMPT_BUDGET;
    DEADLINE.with(|c| c.set(Some(outer.map_or(mine, |o| o.min(mine)))));
    STEPS.with(|c| c.set(0));
    let r = f();
    let refused = REFUSED.with(Cell::get);
    drop(restore);
    (r, refused)
}

/// Whether this thread may wait now: false only inside
/// [`without_waiting`] with no `MayWait` guard alive (a mini-transaction
/// with changes, a rollback).
pub fn may_wait() -> bool {
    !inside() || MAY_WAIT.with(Cell::get) > 0
}

/// Whether this thread is inside [`without_waiting`].
fn inside() -> bool {
    DEADLINE.with(Cell::get).is_some()
}

/// `Ok` if this thread may wait for `what`; otherwise the
/// [`Error::WouldWait`] the caller returns, having changed nothing (W1).
pub(crate) fn check(what: &'static str) -> Result<()> {
    if may_wait() {
        Ok(())
    } else {
        REFUSED.with(|c| c.set(true));
        Err(Error::WouldWait { what })
    }
}

/// One row read or written: inside [`without_waiting`], every
/// [`STEPS_PER_LOOK`] rows, [`Error::WouldWait`] once the attempt has run
/// for [`ATTEMPT_BUDGET`] (W4). Called at row boundaries only, where a
/// refusal changes nothing (W1).
#[inline]
pub(crate) fn step() -> Result<()> {
    let Some(deadline) = DEADLINE.with(Cell::get) else {
        return Ok(());
    };
    let n = STEPS.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n
    });
    if !n.is_multiple_of(STEPS_PER_LOOK) {
        return Ok(());
    }
    if Instant::now() >= deadline {
        return check("its turn on a thread that must not block");
    }
    Ok(())
}

/// While alive, this thread may wait even inside [`without_waiting`]
/// (W2): held by a mini-transaction with unlogged changes and by
/// rollback, which must run to the end. Dropped on the thread that made
/// it.
/// Not `Send`: it must be dropped on the thread whose count it raised.
#[derive(Debug)]
pub(crate) struct MayWait(std::marker::PhantomData<*const ()>);

impl MayWait {
    pub(crate) fn new() -> MayWait {
        MAY_WAIT.with(|c| c.set(c.get() + 1));
        MayWait(std::marker::PhantomData)
    }
}

impl Drop for MayWait {
    fn drop(&mut self) {
        MAY_WAIT.with(|c| {
            let n = c.get();
            debug_assert!(n > 0, "wait W2: a MayWait guard dropped twice");
            c.set(n.saturating_sub(1));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_refused_only_inside_and_never_under_a_guard() {
        assert!(check("x").is_ok());
        let ((), refused) = without_waiting(|| {
            {
                let _g = MayWait::new();
                assert!(check("x").is_ok());
                let _h = MayWait::new();
                drop(_g);
                assert!(check("x").is_ok(), "one guard is still alive");
            }
            assert!(matches!(check("x"), Err(Error::WouldWait { what: "x" })));
            let (r, inner) = without_waiting(|| check("y"));
            assert!(r.is_err() && inner);
            assert!(check("x").is_err(), "the nested call restores the mode");
        });
        assert!(refused);
        assert!(check("x").is_ok());
        let (_, refused) = without_waiting(|| assert!(check("x").is_err()));
        assert!(refused);
        let (_, refused) = without_waiting(|| {
            let _g = MayWait::new();
            check("x").unwrap();
        });
        assert!(!refused, "a wait under a guard is not a refusal");
        let (r, refused): (Result<()>, bool) = without_waiting(|| {
            let until = Instant::now() + ATTEMPT_BUDGET * 4;
            loop {
                step()?;
                assert!(Instant::now() < until, "the budget never ran out");
            }
        });
        assert!(matches!(r, Err(Error::WouldWait { .. })) && refused);
        // Below one look at the clock, never refused (timing-free).
        let (r, refused) = without_waiting(|| (1..STEPS_PER_LOOK).try_for_each(|_| step()));
        assert!(r.is_ok() && !refused);
        let caught = std::panic::catch_unwind(|| without_waiting(|| panic!("boom")));
        assert!(caught.is_err());
        assert!(check("x").is_ok(), "an unwind restores the mode");
    }
}
