//! Answers waiting for HTTP clients that have not read them (issue 34,
//! class 5; issue 61, item 8).
//!
//! Over stdio the transport counts what it has not written yet
//! ([`crate::stdio`]). Over HTTP each answer waits in its response stream
//! until the client reads it, so every POST carries a [`Ledger`]: a call's
//! result is counted there when it is made and given back when the
//! response stream ends. A result is replaced by a short error past
//! [`MAX_UNREAD_BYTES`] over all streams, or past [`MAX_UNREAD_PER_CLIENT`]
//! for its client: memory stays bounded however many clients stop
//! reading, and one client that stops reading fills only its own share,
//! not the others'.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most the host keeps of answers its clients have not read.
pub const MAX_UNREAD_BYTES: usize = 256 << 20;
/// The most one client may leave unread: a quarter of the whole, so it
/// takes four clients that stop reading to fill it.
pub const MAX_UNREAD_PER_CLIENT: usize = MAX_UNREAD_BYTES / 4;

/// What all response streams of one server hold, in all and per client.
#[derive(Clone, Default)]
pub struct Budget(Arc<Mutex<Held>>);

#[derive(Default)]
struct Held {
    total: usize,
    per_client: HashMap<String, usize>,
}

/// What one response stream holds; given back when it is dropped.
pub struct Ledger {
    budget: Budget,
    held: Mutex<Vec<(String, usize)>>,
}

/// Why a result was not kept: what already waits, and for whom.
#[derive(Debug, PartialEq)]
pub enum Full {
    /// All clients together: the bytes waiting.
    Host(usize),
    /// This client: the bytes of its own answers waiting.
    Client(usize),
}

impl Budget {
    pub fn ledger(&self) -> Arc<Ledger> {
        Arc::new(Ledger {
            budget: self.clone(),
            held: Mutex::new(Vec::new()),
        })
    }
}

impl Ledger {
    /// Count `bytes` more for this stream, of `client`; refused, saying
    /// which bound it would pass, past either.
    pub fn hold(&self, client: &str, bytes: usize) -> Result<(), Full> {
        let mut held = self.budget.0.lock().expect("unread lock");
        let theirs = held.per_client.get(client).copied().unwrap_or(0);
        if theirs + bytes > MAX_UNREAD_PER_CLIENT {
            return Err(Full::Client(theirs));
        }
        if held.total + bytes > MAX_UNREAD_BYTES {
            return Err(Full::Host(held.total));
        }
        held.total += bytes;
        *held.per_client.entry(client.to_string()).or_default() += bytes;
        self.held
            .lock()
            .expect("ledger lock")
            .push((client.to_string(), bytes));
        Ok(())
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        let mine = std::mem::take(self.held.get_mut().expect("ledger lock"));
        let mut held = self.budget.0.lock().expect("unread lock");
        for (client, bytes) in mine {
            held.total -= bytes;
            if let Some(theirs) = held.per_client.get_mut(&client) {
                *theirs -= bytes;
                if *theirs == 0 {
                    held.per_client.remove(&client);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_has_a_share_and_streams_give_back_when_they_end() {
        let budget = Budget::default();
        let first = budget.ledger();
        assert!(first.hold("a", MAX_UNREAD_PER_CLIENT - 10).is_ok());
        let second = budget.ledger();
        assert_eq!(
            second.hold("a", 11),
            Err(Full::Client(MAX_UNREAD_PER_CLIENT - 10))
        );
        // Another client is not held back by the first.
        assert!(second.hold("b", MAX_UNREAD_PER_CLIENT).is_ok());
        let third = budget.ledger();
        assert!(third.hold("c", MAX_UNREAD_PER_CLIENT).is_ok());
        let fourth = budget.ledger();
        assert!(fourth.hold("d", MAX_UNREAD_PER_CLIENT).is_ok());
        assert_eq!(
            budget.ledger().hold("e", 11),
            Err(Full::Host(MAX_UNREAD_BYTES - 10))
        );
        drop(first);
        assert!(second.hold("a", MAX_UNREAD_PER_CLIENT - 10).is_ok());
        drop((second, third, fourth));
        assert_eq!(budget.0.lock().unwrap().total, 0);
    }
}
