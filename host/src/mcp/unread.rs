//! Answers waiting for HTTP clients that have not read them (issue 34,
//! class 5).
//!
//! Over stdio the transport counts what it has not written yet
//! ([`crate::stdio`]). Over HTTP each answer waits in its response stream
//! until the client reads it, so every POST carries a [`Ledger`]: a call's
//! result is counted there when it is made and given back when the
//! response stream ends. Past [`MAX_UNREAD_BYTES`] over all streams, a
//! result is replaced by a short error, and memory stays bounded however
//! many clients stop reading.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most the host keeps of answers its clients have not read.
pub const MAX_UNREAD_BYTES: usize = 256 << 20;

/// What all response streams of one server hold.
#[derive(Clone, Default)]
pub struct Budget(Arc<AtomicUsize>);

/// What one response stream holds; given back when it is dropped.
pub struct Ledger {
    budget: Budget,
    held: AtomicUsize,
}

impl Budget {
    pub fn ledger(&self) -> Arc<Ledger> {
        Arc::new(Ledger {
            budget: self.clone(),
            held: AtomicUsize::new(0),
        })
    }
}

impl Ledger {
    /// Count `bytes` more for this stream; refused, with what waits
    /// already, when that would pass [`MAX_UNREAD_BYTES`].
    pub fn hold(&self, bytes: usize) -> Result<(), usize> {
        let total = &self.budget.0;
        let waiting = total.fetch_add(bytes, Ordering::AcqRel);
        if waiting + bytes > MAX_UNREAD_BYTES {
            total.fetch_sub(bytes, Ordering::AcqRel);
            return Err(waiting);
        }
        self.held.fetch_add(bytes, Ordering::AcqRel);
        Ok(())
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        let held = self.held.load(Ordering::Acquire);
        self.budget.0.fetch_sub(held, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_and_given_back_when_a_stream_ends() {
        let budget = Budget::default();
        let first = budget.ledger();
        assert!(first.hold(MAX_UNREAD_BYTES - 10).is_ok());
        let second = budget.ledger();
        assert_eq!(second.hold(11), Err(MAX_UNREAD_BYTES - 10));
        assert!(second.hold(10).is_ok());
        drop(first);
        assert!(second.hold(MAX_UNREAD_BYTES - 10).is_ok());
    }
}
