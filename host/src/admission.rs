//! Admission: how many calls run at once, and what happens to the rest.
//!
//! Two bounds. Each plugin has a [`Gate`]: at most `limits.concurrency`
//! of its calls run, up to `limits.queue` more wait their turn in arrival
//! order, and a call past that is refused at once with a retryable
//! [`Busy`] — so one plugin's slow calls cannot starve the others. Under
//! all plugins, [`instance_slot`] hands out the pooling allocator's
//! instance slots, so a burst waits for a slot instead of failing inside
//! wasmtime ("maximum concurrent limit of 128").

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

/// One of the engine's instance slots, held while an instance lives.
pub async fn instance_slot() -> SemaphorePermit<'static> {
    static SLOTS: Semaphore = Semaphore::const_new(MAX_CONCURRENT_CALLS as usize);
    SLOTS.acquire().await.expect("slots never closed")
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
