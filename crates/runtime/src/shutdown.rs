//! A shutdown signal for the tasks of a component: informers, workers, leader election.
//!
//! One [`ShutdownTrigger`] stops any number of [`Shutdown`] receivers; a receiver is cheap to
//! clone and hand to every task, and resolves once triggered — or once the trigger is dropped,
//! so tasks never outlive the component that started them.

use tokio::sync::watch;

/// A shutdown signal: cheap to clone, resolves once triggered.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// Triggers a [`Shutdown`].
pub struct ShutdownTrigger(watch::Sender<bool>);

impl Shutdown {
    /// A new signal: the trigger and its first receiver.
    pub fn new() -> (ShutdownTrigger, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTrigger(tx), Shutdown(rx))
    }

    /// Resolves when triggered (or when the trigger is dropped).
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|s| *s).await;
    }

    /// Whether the signal was given (a dropped trigger does not count).
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }
}

impl ShutdownTrigger {
    /// Gives the signal to every receiver, now and later.
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    /// Another receiver of this trigger.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }
}
