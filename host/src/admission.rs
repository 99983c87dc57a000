//! Admission: how many calls run at once, and what happens to the rest.
//!
//! Two bounds. Each plugin has a [`Gate`]: at most `limits.concurrency`
//! of its calls run, up to `limits.queue` more wait their turn in arrival
//! order, and a call past that is refused at once with a retryable
//! [`Busy`] — so one plugin's slow calls cannot starve the others. Under
//! all plugins, a [`Reserve`] hands out the pooling allocator's instance
//! slots, so a burst waits for a slot instead of failing inside wasmtime
//! ("maximum concurrent limit of 128"). Each plugin keeps [`RESERVED`] of
//! those slots for itself and shares the rest: plugins that fill the shared
//! slots never leave another one waiting (four plugins at 32 calls each
//! held all 128, and a fifth plugin's trivial call waited 37 s).

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::engine::MAX_CONCURRENT_CALLS;

/// A plugin's admission: calls running, and a bounded queue behind them.
pub struct Gate {
    running: Semaphore,
    waiting: AtomicUsize,
    concurrency: usize,
    queue: usize,
}

/// A call refused because the plugin's queue is full.
#[derive(Debug, thiserror::Error)]
#[error(
    "plugin `{plugin}` is busy: {concurrency} calls are running and {queue} more are waiting \
     (limits.concurrency and limits.queue under [plugins.{plugin}]); retry shortly, or raise those limits"
)]
pub struct Busy {
    pub plugin: String,
    pub concurrency: usize,
    pub queue: usize,
}

impl Gate {
    pub fn new(concurrency: usize, queue: usize) -> Gate {
        Gate {
            running: Semaphore::new(concurrency),
            waiting: AtomicUsize::new(0),
            concurrency,
            queue,
        }
    }

    /// A turn to run, waiting in the queue if every turn is taken; `Busy`
    /// at once when the queue is full. `queued` hears the place taken in
    /// the queue (1 = next), so the caller can tell its client why nothing
    /// happens yet. Dropping the future leaves the queue.
    pub async fn enter(
        &self,
        plugin: &str,
        queued: impl FnOnce(usize),
    ) -> Result<SemaphorePermit<'_>, Busy> {
        if let Ok(permit) = self.running.try_acquire() {
            return Ok(permit);
        }
        let ahead = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.queue).then_some(n + 1)
            })
            .map_err(|_| Busy {
                plugin: plugin.to_string(),
                concurrency: self.concurrency,
                queue: self.queue,
            })?;
        let _in_queue = LeaveQueue(&self.waiting);
        queued(ahead + 1);
        Ok(self.running.acquire().await.expect("gate never closed"))
    }
}

/// Counts a waiter out of the queue however its wait ends.
struct LeaveQueue<'a>(&'a AtomicUsize);

impl Drop for LeaveQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Instance slots each plugin keeps for itself.
pub const RESERVED: usize = 2;

/// The engine's instance slots: what no plugin has reserved is shared.
pub struct Pool {
    shared: Semaphore,
}

impl Pool {
    pub const fn new(slots: usize) -> Pool {
        Pool {
            shared: Semaphore::const_new(slots),
        }
    }

    /// The host's pool.
    pub fn engine() -> &'static Pool {
        static POOL: Pool = Pool::new(MAX_CONCURRENT_CALLS as usize);
        &POOL
    }

    /// A plugin's reserve: [`RESERVED`] slots taken out of the shared ones
    /// (fewer if they are in use right now), given back when it is dropped.
    pub fn reserve(&'static self) -> Reserve {
        let taken = self.shared.forget_permits(RESERVED);
        Reserve {
            pool: self,
            own: Semaphore::new(taken),
            taken,
        }
    }
}

/// One plugin's slots: its own, then the shared ones.
pub struct Reserve {
    pool: &'static Pool,
    own: Semaphore,
    taken: usize,
}

impl Reserve {
    /// An instance slot, held while an instance lives: one of the plugin's
    /// own if free, else whichever frees first.
    pub async fn slot(&self) -> SemaphorePermit<'_> {
        if let Ok(permit) = self.own.try_acquire() {
            return permit;
        }
        tokio::select! {
            biased;
            permit = self.own.acquire() => permit,
            permit = self.pool.shared.acquire() => permit,
        }
        .expect("slots never closed")
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        self.pool.shared.add_permits(self.taken);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn full_gate_queues_then_refuses() {
        let gate = Gate::new(1, 1);
        let first = gate.enter("p", |_| panic!("a free turn")).await.unwrap();
        let place = std::cell::Cell::new(0);
        let mut queued = Box::pin(gate.enter("p", |n| place.set(n)));
        assert!(futures_poll(&mut queued).is_none(), "second call waits");
        assert_eq!(place.get(), 1, "told it is next in the queue");
        let busy = gate.enter("p", |_| ()).await.unwrap_err();
        assert!(busy.to_string().contains("limits.concurrency"), "{busy}");
        drop(first);
        let second = queued.await.unwrap();
        drop(second);
        // The queue emptied: a cancelled waiter leaves it too.
        let third = gate.enter("p", |_| ()).await.unwrap();
        let mut waiter = Box::pin(gate.enter("p", |_| ()));
        assert!(futures_poll(&mut waiter).is_none());
        drop(waiter);
        let mut again = Box::pin(gate.enter("p", |_| ()));
        assert!(
            futures_poll(&mut again).is_none(),
            "a place freed by a dropped waiter"
        );
        drop(third);
        assert!(again.await.is_ok());
    }

    #[tokio::test]
    async fn plugins_filling_the_shared_slots_never_starve_another() {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(8)));
        let (busy, quiet) = (pool.reserve(), pool.reserve());
        // The busy plugin takes its own slots and every shared one.
        let mut held = Vec::new();
        for _ in 0..(8 - RESERVED) {
            held.push(busy.slot().await);
        }
        let mut more = Box::pin(busy.slot());
        assert!(futures_poll(&mut more).is_none(), "the busy plugin waits");
        let first = futures_poll(&mut Box::pin(quiet.slot()));
        assert!(
            first.is_some(),
            "the quiet plugin gets its own slot at once"
        );
        drop(first);
        drop(more);
        drop(held);
        // A dropped reserve gives its slots back to everyone.
        drop(quiet);
        let all: Vec<_> = {
            let mut v = Vec::new();
            for _ in 0..(8 - RESERVED) {
                v.push(busy.slot().await);
            }
            v
        };
        assert_eq!(all.len(), 8 - RESERVED);
    }

    /// Poll once; `Some` when ready.
    fn futures_poll<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match std::pin::Pin::new(f).poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }
}
