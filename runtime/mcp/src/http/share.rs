//! Fair shares: how much of the server one client (a tenant, or a peer address without tokens)
//! may hold at once, so that clients busy to their limits leave room for the others.
//!
//! Two bounds, each counted per client as places taken and given back when dropped (`Counts`,
//! `Place`):
//!
//! - **Calls** ([`calls_per_client`]): `tools/call` requests in flight, waiting for an instance
//!   slot or running, *and the tasks they became* (a call still running after a second becomes a
//!   task and its request is answered; its place goes with it until the task ends). A quarter of
//!   the runtime's instance slots: three clients busy to their limits, with calls and tasks
//!   alike, leave a quarter of the pool to everyone else.
//! - **Requests** ([`MAX_REQUESTS_PER_CLIENT`]): requests of any kind in flight (a call, a
//!   `tools/list`, a task's status), which bounds what one client makes the server hold (a
//!   connection's task, a request body) and leaves a client whose calls fill its share room to
//!   poll and cancel its tasks.
//!
//! A quota's `in_flight` ([`crate::http::quota`]) may only narrow the calls' share.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// How many requests of any kind one client may have in flight: twice the calls' share of the
/// default pool, so a client whose calls fill its share can still list tools and poll or cancel
/// its tasks.
pub const MAX_REQUESTS_PER_CLIENT: usize = 2 * toolcell::limits::POOL_SLOTS as usize / 4;

/// The most calls one client may have in flight (running, waiting for a slot, or running on as
/// a task) on a runtime with `pool_slots` instance slots: a quarter of them, at least one.
pub const fn calls_per_client(pool_slots: usize) -> usize {
    if pool_slots < 4 { 1 } else { pool_slots / 4 }
}

/// How many places each key (a client, a peer address) holds, each given back when its
/// [`Place`] drops.
pub(crate) struct Counts<K: Hash + Eq + Clone>(Arc<Mutex<HashMap<K, usize>>>);

impl<K: Hash + Eq + Clone> Default for Counts<K> {
    fn default() -> Self {
        Counts(Arc::default())
    }
}

impl<K: Hash + Eq + Clone> Counts<K> {
    /// A place for `key`, unless it holds `max` already.
    pub(crate) fn enter(&self, key: K, max: usize) -> Option<Place<K>> {
        let mut counts = toolcell::sync::lock(&self.0);
        let count = counts.entry(key.clone()).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(Place {
            counts: Arc::clone(&self.0),
            key,
        })
    }

    /// How many places `key` holds now.
    #[cfg(test)]
    pub(crate) fn held(&self, key: &K) -> usize {
        toolcell::sync::lock(&self.0).get(key).copied().unwrap_or(0)
    }
}

/// One place among a key's [`Counts`].
pub(crate) struct Place<K: Hash + Eq + Clone> {
    counts: Arc<Mutex<HashMap<K, usize>>>,
    key: K,
}

impl<K: Hash + Eq + Clone> Drop for Place<K> {
    fn drop(&mut self) {
        let mut counts = toolcell::sync::lock(&self.counts);
        if let Some(count) = counts.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_busy_clients_leave_a_quarter_of_the_pool() {
        let slots = toolcell::limits::POOL_SLOTS as usize;
        assert!(slots - 3 * calls_per_client(slots) >= slots / 4);
        assert_eq!(calls_per_client(1), 1);
        assert_eq!(calls_per_client(3), 1);
        assert_eq!(calls_per_client(8), 2);
        assert!(MAX_REQUESTS_PER_CLIENT > calls_per_client(slots));
    }

    #[test]
    fn places_are_counted_per_key_and_given_back() {
        let counts: Counts<&str> = Counts::default();
        let a = counts.enter("a", 2).expect("first");
        let _b = counts.enter("a", 2).expect("second");
        assert!(counts.enter("a", 2).is_none(), "past the bound");
        let _other = counts.enter("b", 2).expect("another key has its own");
        drop(a);
        assert_eq!(counts.held(&"a"), 1);
        assert!(counts.enter("a", 2).is_some(), "a place was given back");
    }
}
