//! Quotas kept in the shared store (`state/scripts.rs`): one script call admits a call
//! under all its quotas; its places are leases this replica renews while the call runs,
//! given back with the call's charge when it ends.

use super::{Admission, Held, Kind, Leases, Limiter, NotAdmitted, Refused, lock};
use crate::state::scripts::{ADMIT, RELEASE, RENEW, USAGE};
use crate::state::{LEASE_TTL, Store, Unavailable};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A call's places in the store: its lease's member and the keys of its quotas.
#[derive(Debug)]
pub(super) struct Lease {
    leases: Arc<Leases>,
    store: Arc<Store>,
    member: String,
    keys: Vec<String>,
    /// What the call used (microseconds, fuel), charged when the lease is given back.
    used: Mutex<(u64, u64)>,
    /// Whether a quota bounds the calls in flight: then the lease is given back before the
    /// call's answer leaves, not after.
    bounded: bool,
    /// Given back already.
    released: std::sync::atomic::AtomicBool,
}

impl Lease {
    /// Give the lease back now (charging its call's use), if a quota bounds the calls in
    /// flight; a failure leaves it to expire.
    pub(super) async fn release_now(&self) {
        if !self.bounded || self.released.swap(true, Ordering::Relaxed) {
            return;
        }
        self.leases
            .held
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .remove(&self.member);
        let (micros, fuel) = *self
            .used
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let (member, keys) = (&self.member, &self.keys);
        let _ = self
            .store
            .run(|mut connection| async move {
                let mut invocation = RELEASE.prepare_invoke();
                for key in keys {
                    invocation.key(key);
                }
                invocation
                    .arg(1)
                    .arg(keys.len() / 2)
                    .arg(member)
                    .arg(micros)
                    .arg(fuel);
                invocation.invoke_async::<i64>(&mut connection).await
            })
            .await;
    }

    pub(super) fn charge(&self, micros: u64, fuel: u64) {
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        used.0 = used.0.saturating_add(micros);
        used.1 = used.1.saturating_add(fuel);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.released.load(Ordering::Relaxed) {
            return;
        }
        self.leases
            .held
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .remove(&self.member);
        let (micros, fuel) = *self
            .used
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        // Given back off the call's path, with others that ended meanwhile
        // ([`Leases::give_back`]); if the process ends first, the lease expires by itself
        // within LEASE_TTL (and the call's use is not charged).
        self.leases
            .returned
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push((
                std::mem::take(&mut self.member),
                std::mem::take(&mut self.keys),
                micros,
                fuel,
            ));
        self.leases.returning.notify_one();
    }
}

/// A lease's member: this replica, a number it has not used before, and what the call
/// reserves of the daily budgets (microseconds: the most it may run; fuel: its fuel limit),
/// which the admission script adds up over the leases still alive.
fn member(store: &Store, reserve: super::Reserve) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}:{}:{}:{}",
        store.replica(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        reserve.micros(),
        reserve.fuel
    )
}

/// The store's keys of `limiter`: its hash and its lease set.
fn keys(limiter: &Limiter) -> [String; 2] {
    [
        Store::key(&format!("quota:{}", limiter.holder())),
        Store::key(&format!("lease:{}", limiter.holder())),
    ]
}

pub(super) async fn admit(
    store: &Arc<Store>,
    leases: &Arc<Leases>,
    limiters: &[&Arc<Limiter>],
    reserve: super::Reserve,
) -> Result<Admission, NotAdmitted> {
    let member = member(store, reserve);
    let [epoch_key, grace_key] = crate::state::epoch_keys();
    let (seen, candidate, grace) = store.epoch_arguments().map_err(NotAdmitted::Unavailable)?;
    let ttl = u64::try_from(LEASE_TTL.as_millis()).unwrap_or(u64::MAX);
    let keys: Vec<String> = limiters.iter().flat_map(|limiter| keys(limiter)).collect();
    let arguments: Vec<String> = limiters
        .iter()
        .flat_map(|limiter| {
            let quota = limiter.quota();
            let (rate, burst) = quota
                .rate
                .map_or((0.0, 0), |rate| (rate.per_second, rate.burst));
            [
                rate.to_string(),
                burst.to_string(),
                quota.in_flight.unwrap_or(0).to_string(),
                quota
                    .daily_ms
                    .map_or(0, |ms| ms.saturating_mul(1000))
                    .to_string(),
                quota.daily_fuel.unwrap_or(0).to_string(),
            ]
        })
        .collect();
    // Registered before the script runs: a renewal racing the admission keeps it too.
    leases
        .held
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .insert(
            member.clone(),
            keys.iter().skip(1).step_by(2).cloned().collect(),
        );
    let lease = Lease {
        store: Arc::clone(store),
        bounded: limiters
            .iter()
            .any(|limiter| limiter.quota().in_flight.is_some()),
        released: std::sync::atomic::AtomicBool::new(false),
        leases: Arc::clone(leases),
        member: member.clone(),
        keys: keys.clone(),
        used: Mutex::new((0, 0)),
    };
    let count = limiters.len();
    let (keys, arguments, member) = (&keys, &arguments, &member);
    let (epoch_key, grace_key, seen, candidate) = (&epoch_key, &grace_key, &seen, &candidate);
    let answer: Vec<redis::Value> = store
        .run(|mut connection| async move {
            let mut invocation = ADMIT.prepare_invoke();
            for key in keys {
                invocation.key(key);
            }
            invocation.key(epoch_key).key(grace_key);
            invocation.arg(count).arg(member).arg(ttl);
            for argument in arguments {
                invocation.arg(argument);
            }
            invocation.arg(seen).arg(candidate).arg(grace);
            invocation.invoke_async(&mut connection).await
        })
        .await
        .map_err(NotAdmitted::Unavailable)?;
    let epoch = match answer.as_slice() {
        [redis::Value::Int(0), epoch] | [_, _, _, epoch] => {
            redis::from_redis_value::<String>(epoch.clone()).ok()
        }
        _ => None,
    };
    if let Some(epoch) = epoch
        && store.saw_epoch(epoch).1
    {
        // The store lost its data: this replica's running calls' places are put back now,
        // before anything else is admitted against them.
        let _ = leases.renew(store).await;
    }
    let refused = match answer.as_slice() {
        [redis::Value::Int(0), _] => None,
        [index, kind, retry_after, _] => Some((
            redis::from_redis_value::<usize>(index.clone()).unwrap_or(1),
            redis::from_redis_value::<String>(kind.clone()).unwrap_or_default(),
            redis::from_redis_value::<u64>(retry_after.clone()).unwrap_or(1),
        )),
        other => {
            return Err(NotAdmitted::Unavailable(Unavailable {
                store: store.shown().to_owned(),
                why: format!("an answer the admission script does not give: {other:?}"),
            }));
        }
    };
    let Some((index, kind, retry_after)) = refused else {
        return Ok(Admission(Arc::new(Held::Shared(lease))));
    };
    // Refused: nothing was taken; the lease was never added, and there is nothing to give
    // back.
    lease.released.store(true, Ordering::Relaxed);
    leases
        .held
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .remove(&lease.member);
    let limiter = limiters
        .get(index.saturating_sub(1))
        .copied()
        .or_else(|| limiters.first().copied());
    let Some(limiter) = limiter else {
        return Err(NotAdmitted::Unavailable(Unavailable {
            store: store.shown().to_owned(),
            why: "a refusal naming no quota".to_owned(),
        }));
    };
    let kind = match kind.as_str() {
        "rate" => Kind::Rate,
        "in_flight" => Kind::InFlight,
        "daily_ms" => Kind::DailyMs,
        _ => Kind::DailyFuel,
    };
    Err(NotAdmitted::Refused(Refused {
        kind,
        scope: limiter.scope(),
        tenant: limiter.tenant().to_owned(),
        retry_after: retry_after.max(1),
        quota: limiter.quota().clone(),
    }))
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
            let batch = std::mem::take(
                &mut *self
                    .returned
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner()),
            );
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
        let pairs: Vec<(String, String)> = self
            .held
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
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

pub(super) async fn usage(
    store: &Arc<Store>,
    limiters: &[Arc<Limiter>],
) -> Vec<(Arc<Limiter>, super::Usage)> {
    let mut usage = Vec::new();
    for limiter in limiters {
        let [hash, leases] = keys(limiter);
        let (hash, leases) = (&hash, &leases);
        let read: Result<(u32, u64, u64), Unavailable> = store
            .run(|mut connection| async move {
                USAGE
                    .key(hash)
                    .key(leases)
                    .invoke_async(&mut connection)
                    .await
            })
            .await;
        if let Ok((in_flight, micros, fuel)) = read {
            usage.push((Arc::clone(limiter), (in_flight, micros / 1000, fuel)));
        }
    }
    let _ = lock;
    usage
}
