//! The connections the server holds, and which of them have earned their place.
//!
//! A connection costs a descriptor and a task, so there are at most [`MAX_CONNECTIONS`], and
//! at most [`MAX_CONNECTIONS_PER_PEER`] from one peer address (an IPv6 address's /64). A
//! connection that never sends a byte, or sends half a request, needs no token: if that were
//! enough to keep a place, 4 addresses × 256 idle connections would lock every other client
//! out, and 256 half-sent headers from one address everyone sharing it (a same-host proxy,
//! loopback). So a connection earns its place only by a request that passed authentication
//! (`Connection::authenticated`); until then it is *unproven*, and when the server, or its
//! peer's share, is full, a new connection takes the place of the oldest unproven one, which is
//! closed. A connection must also send its first byte within [`FIRST_BYTE_TIMEOUT`], and its
//! headers within `HEADER_READ_TIMEOUT`.
//!
//! A connection is proven as soon as a request on it passes authentication, not when its
//! answer is written, and a connection with a request in flight is never closed for another:
//! a flood of one-byte connections cannot end a client's running call. Nor can one client
//! hold every place with proven connections: when the server (or an address's share) is full
//! and no unproven connection is idle, the oldest idle connection of the client holding the
//! most, if it holds more than [`MAX_CONNECTIONS_PER_CLIENT`], gives way.

use super::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How many connections one client (a tenant, or an anonymous address) may keep when others
/// need a place: a quarter of them, as its share of the pool's calls is.
pub const MAX_CONNECTIONS_PER_CLIENT: usize = MAX_CONNECTIONS / 4;

/// How long a new connection may stay silent before its first byte: a client that connects
/// sends its request at once; one that sends nothing is holding a place.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(3);

/// One connection's standing.
#[derive(Debug)]
pub(crate) struct Connection {
    id: u64,
    peer: IpAddr,
    proven: AtomicBool,
    /// Requests on it being answered now: while any is, it is never closed for another.
    busy: std::sync::atomic::AtomicUsize,
    /// The client its authenticated requests were for (a tenant, or `peer:ADDRESS`).
    client: Mutex<Option<String>>,
    /// Cancelled when the connection gives its place to a newer one.
    close: CancellationToken,
}

/// A request being answered on a connection: the connection is busy until it drops.
pub(crate) struct Busy(Arc<Connection>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Connection {
    /// A request on it passed authentication, for `client`: it keeps its place from now on
    /// (but for the share of a client that holds too many, `Connections::admit`).
    pub(crate) fn authenticated(&self, client: &str) {
        self.proven.store(true, Ordering::Relaxed);
        let mut held = toolcell::sync::lock(&self.client);
        if held.is_none() {
            *held = Some(client.to_owned());
        }
    }

    /// A request is being answered on it, until the guard drops.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(Arc::clone(self))
    }

    fn idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    fn client(&self) -> Option<String> {
        toolcell::sync::lock(&self.client).clone()
    }

    /// Completes when the connection must close (a newer one took its place).
    pub(crate) async fn evicted(&self) {
        self.close.cancelled().await;
    }
}

/// Every connection the server holds.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Connection>>>,
}

/// A connection's place: given back when dropped.
pub(crate) struct Place {
    connections: Arc<Connections>,
    pub(crate) connection: Arc<Connection>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.connections.lock().remove(&self.connection.id);
    }
}

impl Connections {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Connection>>> {
        toolcell::sync::lock(&self.open)
    }

    /// A place for a new connection from `peer` (its key: an address, or an IPv6 /64), taking
    /// the oldest unproven connection's where the server or the peer's share is full; `None`
    /// when every place there is held by a proven connection.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Place> {
        let mut open = self.lock();
        let from_peer = open.values().filter(|open| open.peer == peer).count();
        if from_peer >= MAX_CONNECTIONS_PER_PEER {
            make_room(&mut open, |open| open.peer == peer)?;
        }
        if open.len() >= MAX_CONNECTIONS {
            make_room(&mut open, |_| true)?;
        }
        let connection = Arc::new(Connection {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            peer,
            proven: AtomicBool::new(false),
            busy: std::sync::atomic::AtomicUsize::new(0),
            client: Mutex::new(None),
            close: CancellationToken::new(),
        });
        open.insert(connection.id, Arc::clone(&connection));
        Some(Place {
            connections: Arc::clone(self),
            connection,
        })
    }

    /// How many connections are held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Make a place among the connections `among` selects: close the oldest idle unproven one; or
/// else the oldest idle one of the client that holds the most, if it holds more than
/// [`MAX_CONNECTIONS_PER_CLIENT`]. `None` if neither is there (the place is refused).
fn make_room(
    open: &mut BTreeMap<u64, Arc<Connection>>,
    among: impl Fn(&Connection) -> bool,
) -> Option<()> {
    let unproven = open
        .values()
        .find(|open| among(open) && !open.proven.load(Ordering::Relaxed) && open.idle())
        .map(|open| open.id);
    let id = match unproven {
        Some(id) => id,
        None => {
            let mut held: std::collections::HashMap<String, usize> = Default::default();
            for connection in open.values() {
                if let Some(client) = connection.client() {
                    *held.entry(client).or_default() += 1;
                }
            }
            let (hog, count) = held.into_iter().max_by_key(|(_, count)| *count)?;
            if count <= MAX_CONNECTIONS_PER_CLIENT {
                return None;
            }
            open.values()
                .find(|open| {
                    among(open) && open.idle() && open.client().as_deref() == Some(hog.as_str())
                })
                .map(|open| open.id)?
        }
    };
    if let Some(evicted) = open.remove(&id) {
        evicted.close.cancel();
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_connection_takes_the_place_of_the_oldest_unproven_one() {
        let connections = Arc::new(Connections::default());
        let a: IpAddr = "127.0.0.2".parse().expect("an address");
        let b: IpAddr = "127.0.0.3".parse().expect("an address");
        // One peer's share, all proven but the first two.
        let mut places: Vec<Place> = (0..MAX_CONNECTIONS_PER_PEER)
            .map(|_| connections.admit(a).expect("a place"))
            .collect();
        for place in &places[2..] {
            place.connection.authenticated("peer:a");
        }
        let first = Arc::clone(&places[0].connection);
        let second = Arc::clone(&places[1].connection);
        // The peer's share is full: its oldest unproven connection gives way, then the next.
        places.push(connections.admit(a).expect("the oldest unproven gave way"));
        assert!(first.close.is_cancelled());
        assert!(!second.close.is_cancelled());
        places.push(connections.admit(a).expect("the next gave way"));
        assert!(second.close.is_cancelled());
        // Now every place of the peer's is proven or new... the two new ones are unproven.
        for place in &places[MAX_CONNECTIONS_PER_PEER..] {
            place.connection.authenticated("peer:b");
        }
        assert!(
            connections.admit(a).is_none(),
            "every place proven: refused"
        );
        // Another peer still gets in.
        let other = connections.admit(b).expect("another peer");
        drop(other);
        // The evicted places were given back at once: the count is the peer's share.
        assert_eq!(connections.len(), MAX_CONNECTIONS_PER_PEER);
        drop(places);
        assert_eq!(connections.len(), 0);
    }

    #[test]
    fn a_busy_connection_is_never_closed_and_a_hog_gives_way() {
        let connections = Arc::new(Connections::default());
        // The whole server, one client's, proven; the first two busy with calls.
        let places: Vec<Place> = (0..MAX_CONNECTIONS)
            .map(|n| {
                let peer = IpAddr::from([127, 0, 0, 2 + (n / MAX_CONNECTIONS_PER_PEER) as u8]);
                let place = connections.admit(peer).expect("a place");
                place.connection.authenticated("tenant:hog");
                place
            })
            .collect();
        let calls: Vec<Busy> = places[..2].iter().map(|p| p.connection.busy()).collect();
        let newcomer: IpAddr = "127.0.0.9".parse().expect("an address");
        let place = connections
            .admit(newcomer)
            .expect("the hog's idle place gave way");
        assert!(!places[0].connection.close.is_cancelled(), "busy: kept");
        assert!(!places[1].connection.close.is_cancelled(), "busy: kept");
        assert!(
            places[2].connection.close.is_cancelled(),
            "the hog's oldest idle one"
        );
        drop((calls, place, places));
    }

    #[test]
    fn a_full_server_gives_the_oldest_unproven_place_to_a_new_peer() {
        let connections = Arc::new(Connections::default());
        let places: Vec<Place> = (0..MAX_CONNECTIONS)
            .map(|n| {
                let peer = IpAddr::from([127, 0, 0, 2 + (n / MAX_CONNECTIONS_PER_PEER) as u8]);
                connections.admit(peer).expect("a place")
            })
            .collect();
        let oldest = Arc::clone(&places[0].connection);
        let fifth: IpAddr = "127.0.0.9".parse().expect("an address");
        let place = connections
            .admit(fifth)
            .expect("an unproven place gave way");
        assert!(oldest.close.is_cancelled());
        assert_eq!(connections.len(), MAX_CONNECTIONS);
        drop((places, place));
    }
}
