//! The leases this replica holds in the shared store: renewed together, and given back in
//! batches off the calls' paths.

use crate::state::scripts::{RELEASE, RENEW};
use crate::state::{LEASE_TTL, Store, Unavailable};
use std::future::Future;
use std::sync::Mutex;

/// A lease given back: its member, its quotas' keys, and its call's use (microseconds, fuel).
type Returned = (String, Vec<String>, u64, u64);

/// The leases this replica holds in the shared store, renewed together.
#[derive(Debug, Default)]
pub struct Leases {
    /// Each lease's member, and the lease sets it is in.
    pub(super) held: Mutex<std::collections::HashMap<String, Vec<String>>>,
    /// Leases given back and not yet written: each lease's member, its quotas' keys, and what
    /// its call used (microseconds, fuel). Written together, in one script call, by
    /// [`Leases::give_back`]: under load many calls' ends share one round trip.
    pub(super) returned: Mutex<Vec<Returned>>,
    /// Wakes [`Leases::give_back`].
    pub(super) returning: tokio::sync::Notify,
}

impl Leases {
    /// Write the leases given back, as they are given back, each batch in one script call,
    /// until `stop` completes. A batch that cannot be written (the store is out of reach)
    /// is dropped: its leases expire within LEASE_TTL.
    pub(crate) async fn give_back(&self, store: &Store, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                () = self.returning.notified() => {}
            }
            let batch = std::mem::take(&mut *toolcell::sync::lock(&self.returned));
            if batch.is_empty() {
                continue;
            }
            let batch = &batch;
            let _ = store
                .run(|mut connection| async move {
                    let mut invocation = RELEASE.prepare_invoke();
                    for (_, keys, _, _) in batch {
                        for key in keys {
                            invocation.key(key);
                        }
                    }
                    invocation.arg(batch.len());
                    for (member, keys, micros, fuel) in batch {
                        invocation
                            .arg(keys.len() / 2)
                            .arg(member)
                            .arg(*micros)
                            .arg(*fuel);
                    }
                    invocation.invoke_async::<i64>(&mut connection).await
                })
                .await;
        }
    }

    /// Renew every lease this replica holds, in one script call.
    pub(crate) async fn renew(&self, store: &Store) -> Result<(), Unavailable> {
        let pairs: Vec<(String, String)> = toolcell::sync::lock(&self.held)
            .iter()
            .flat_map(|(member, keys)| keys.iter().map(move |key| (key.clone(), member.clone())))
            .collect();
        if pairs.is_empty() {
            return Ok(());
        }
        let ttl = u64::try_from(LEASE_TTL.as_millis()).unwrap_or(u64::MAX);
        let pairs = &pairs;
        store
            .run(|mut connection| async move {
                let mut invocation = RENEW.prepare_invoke();
                for (key, _) in pairs {
                    invocation.key(key);
                }
                invocation.arg(ttl);
                for (_, member) in pairs {
                    invocation.arg(member);
                }
                invocation.invoke_async::<i64>(&mut connection).await
            })
            .await
            .map(drop)
    }
}
