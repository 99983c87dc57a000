//! Which connections the HTTP front keeps open (issue 34, class 5; issue
//! 61, item 7).
//!
//! At most [`MAX_CONNECTIONS`] are open at once, so the host never runs out
//! of file descriptors. A connection is *unproven* until one of its
//! requests has passed the token check (or, without a token, has arrived
//! whole): unproven ones may hold at most [`MAX_UNPROVEN`] places, and when
//! a new one comes and no place is free for it, the oldest unproven one is
//! closed to make room. So clients that open connections and send nothing
//! (or nothing right) only ever push each other out, and a client with the
//! token, whose first request arrives at once, gets in. From one address
//! other than this machine's, at most [`MAX_PER_PEER`] are open at once
//! (on loopback every client has the same address, so that says nothing).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 512;
/// Of those, the most that have not yet shown a request that passed.
pub const MAX_UNPROVEN: usize = MAX_CONNECTIONS / 2;
/// Connections open at once from one address (not this machine's).
pub const MAX_PER_PEER: usize = 64;

/// The open connections.
#[derive(Default)]
pub struct Connections {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    open: usize,
    /// Unproven connections, oldest first.
    unproven: VecDeque<Arc<Connection>>,
    per_peer: HashMap<IpAddr, usize>,
}

/// One open connection: closed when `closing` is cancelled.
pub struct Connection {
    peer: IpAddr,
    proven: AtomicBool,
    /// Whether it still holds a place (pushed out: given up at once).
    placed: AtomicBool,
    pub closing: CancellationToken,
    connections: Arc<Connections>,
}

/// Why a connection was not taken.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// Every place is held by a proven connection.
    Full,
    /// Its address holds [`MAX_PER_PEER`] already.
    Peer,
}

impl Connections {
    /// A place for a new connection from `peer`, pushing out the oldest
    /// unproven one when there is none.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Arc<Connection>, Refused> {
        let mut state = self.state.lock().expect("connections lock");
        let from_peer = state.per_peer.get(&peer).copied().unwrap_or(0);
        if !peer.is_loopback() && from_peer >= MAX_PER_PEER {
            return Err(Refused::Peer);
        }
        if state.open >= MAX_CONNECTIONS || state.unproven.len() >= MAX_UNPROVEN {
            let Some(oldest) = state.unproven.pop_front() else {
                return Err(Refused::Full);
            };
            oldest.closing.cancel();
            state.give_up(&oldest);
        }
        let connection = Arc::new(Connection {
            peer,
            proven: AtomicBool::new(false),
            placed: AtomicBool::new(true),
            closing: CancellationToken::new(),
            connections: self.clone(),
        });
        state.open += 1;
        *state.per_peer.entry(peer).or_default() += 1;
        state.unproven.push_back(connection.clone());
        Ok(connection)
    }

    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let state = self.state.lock().unwrap();
        (state.open, state.unproven.len())
    }
}

impl State {
    /// `connection`'s place is free, once.
    fn give_up(&mut self, connection: &Connection) {
        if !connection.placed.swap(false, Ordering::AcqRel) {
            return;
        }
        self.unproven.retain(|c| !std::ptr::eq(&**c, connection));
        self.open -= 1;
        if let Some(n) = self.per_peer.get_mut(&connection.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&connection.peer);
            }
        }
    }
}

impl Connection {
    /// One of its requests passed: it is no longer pushed out for others.
    pub fn proven(&self) {
        if self.proven.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut state = self.connections.state.lock().expect("connections lock");
        state.unproven.retain(|c| !std::ptr::eq(&**c, self));
    }

    /// The connection has ended: its place is free.
    pub fn ended(&self) {
        let mut state = self.connections.state.lock().expect("connections lock");
        state.give_up(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unproven_connections_make_room_and_proven_ones_keep_theirs() {
        let connections = Arc::new(Connections::default());
        let here: IpAddr = "127.0.0.1".parse().unwrap();
        let first = connections.admit(here).unwrap();
        first.proven();
        let flood: Vec<_> = (0..MAX_UNPROVEN)
            .map(|_| connections.admit(here).unwrap())
            .collect();
        assert_eq!(connections.counts(), (MAX_UNPROVEN + 1, MAX_UNPROVEN));
        // One more: the oldest unproven is pushed out, the proven one stays.
        let next = connections.admit(here).unwrap();
        assert!(flood[0].closing.is_cancelled() && !first.closing.is_cancelled());
        assert_eq!(connections.counts(), (MAX_UNPROVEN + 1, MAX_UNPROVEN));
        flood[0].ended();
        assert_eq!(connections.counts(), (MAX_UNPROVEN + 1, MAX_UNPROVEN));
        next.proven();
        next.ended();
        first.ended();
        assert_eq!(connections.counts(), (MAX_UNPROVEN - 1, MAX_UNPROVEN - 1));
        // Another machine's address holds a bounded number.
        let there: IpAddr = "192.0.2.7".parse().unwrap();
        let theirs: Vec<_> = (0..MAX_PER_PEER)
            .map(|_| connections.admit(there).unwrap())
            .collect();
        assert_eq!(connections.admit(there).err(), Some(Refused::Peer));
        drop(theirs);
    }
}
