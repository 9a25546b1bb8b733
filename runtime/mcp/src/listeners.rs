//! The clients listening for the tool list's changes (`subscriptions/listen`, 2026-07-28):
//! how many streams may listen, and each client's place among them.

use std::sync::Arc;

/// How many streams one client may listen on at once: one is what a client needs, a few more
/// for a client with several windows. A listening stream holds its connection for as long as
/// the client wants, unlike a call (bounded by its deadline and the tenant's `in_flight`), so
/// without this bound a few clients could hold every connection the server has.
pub const MAX_LISTENERS_PER_CLIENT: usize = 4;

/// How many streams all clients together may listen on: an eighth of the server's connections,
/// so that listeners never crowd out calls.
pub const MAX_LISTENERS: usize = 128;

/// One client's place among the listening streams, given back when dropped.
pub(crate) struct Listening {
    listeners: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    client: String,
}

impl Listening {
    /// A place for `client`, if it and the server are under their bounds.
    pub(crate) fn enter(
        listeners: &Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
        client: String,
    ) -> Option<Listening> {
        let mut held = toolcell::sync::lock(listeners);
        let total: usize = held.values().sum();
        let own = held.get(&client).copied().unwrap_or(0);
        if total >= MAX_LISTENERS || own >= MAX_LISTENERS_PER_CLIENT {
            return None;
        }
        held.insert(client.clone(), own + 1);
        Some(Listening {
            listeners: Arc::clone(listeners),
            client,
        })
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut held = toolcell::sync::lock(&self.listeners);
        if let Some(count) = held.get_mut(&self.client) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.client);
            }
        }
    }
}
