//! A transaction's word that it holds the inbox markers of all its event ids.
//!
//! Once a transaction's marker insert has returned (in a batch, the one statement that inserts
//! its markers and history rows), every later transaction that carries one of its ids waits
//! for it at the inbox's unique index and takes the outcome it leaves. A partition starts its
//! next batch only then (`actors::partition::schedule`'s pipelining), so that of two copies of
//! an event in two batches in flight, the earlier one's is stored: the same copy, origin and
//! payload as with one transaction at a time.

use tokio::sync::oneshot;

/// Said once: when the statement that inserts the markers returned (inserted or not, or failed), or when the
/// transaction's work ends without it. Dropping it says it too: work that ended holds nothing.
#[derive(Debug, Default)]
pub struct MarkersHeld(Option<oneshot::Sender<()>>);

impl MarkersHeld {
    /// One to pass to a transaction, and where to hear it.
    pub fn channel() -> (MarkersHeld, oneshot::Receiver<()>) {
        let (sender, receiver) = oneshot::channel();
        (MarkersHeld(Some(sender)), receiver)
    }

    /// Says it (the first time only).
    pub fn say(&mut self) {
        if let Some(sender) = self.0.take() {
            let _ = sender.send(());
        }
    }
}

impl Drop for MarkersHeld {
    fn drop(&mut self) {
        self.say();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_heard_once_when_said_or_when_dropped() {
        let (mut held, mut heard) = MarkersHeld::channel();
        assert!(heard.try_recv().is_err(), "not yet");
        held.say();
        held.say();
        assert_eq!(heard.try_recv(), Ok(()));

        let (held, mut heard) = MarkersHeld::channel();
        drop(held);
        assert_eq!(heard.try_recv(), Ok(()));

        MarkersHeld::default().say();
    }
}
