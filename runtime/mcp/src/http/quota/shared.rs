//! Quotas kept in the shared store (`state/scripts.rs`): one script call admits a call
//! under all its quotas; its places are leases this replica renews while the call runs,
//! given back with the call's charge when it ends.

use super::{Admission, Held, Kind, Leases, Limiter, NotAdmitted, Refused};
use crate::state::scripts::{ADMIT, RELEASE, USAGE};
use crate::state::{LEASE_TTL, Store, Unavailable};
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
        toolcell::sync::lock(&self.leases.held).remove(&self.member);
        let (micros, fuel) = *toolcell::sync::lock(&self.used);
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
        let mut used = toolcell::sync::lock(&self.used);
        used.0 = used.0.saturating_add(micros);
        used.1 = used.1.saturating_add(fuel);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.released.load(Ordering::Relaxed) {
            return;
        }
        toolcell::sync::lock(&self.leases.held).remove(&self.member);
        let (micros, fuel) = *toolcell::sync::lock(&self.used);
        // Given back off the call's path, with others that ended meanwhile
        // ([`Leases::give_back`]); if the process ends first, the lease expires by itself
        // within LEASE_TTL (and the call's use is not charged).
        toolcell::sync::lock(&self.leases.returned).push((
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

/// Admit a call under `limiters` (with what it `reserve`s of the daily budgets) in one
/// script call: its [`Admission`] holding a lease this replica renews while the call runs, or
/// the quota that refused it, or the store out of reach.
pub(super) async fn admit(
    store: &Arc<Store>,
    leases: &Arc<Leases>,
    limiters: &[&Arc<Limiter>],
    reserve: super::Reserve,
) -> Result<Admission, NotAdmitted> {
    let member = member(store, reserve);
    let epoch_keys = crate::state::epoch_keys();
    let epoch = store.epoch_arguments().map_err(NotAdmitted::Unavailable)?;
    let keys: Vec<String> = limiters.iter().flat_map(|limiter| keys(limiter)).collect();
    let arguments = quota_arguments(limiters);
    let lease = hold(store, leases, limiters, &member, &keys);
    let script = AdmitScript {
        keys: &keys,
        arguments: &arguments,
        member: &member,
        count: limiters.len(),
        epoch_keys: &epoch_keys,
        epoch: &epoch,
    };
    let answer = script.run(store).await?;
    if let Some(epoch) = answered_epoch(&answer)
        && store.saw_epoch(epoch).1
    {
        // The store lost its data: this replica's running calls' places are put back now,
        // before anything else is admitted against them.
        let _ = leases.renew(store).await;
    }
    let Some((index, kind, retry_after)) = refusal_of(store, &answer)? else {
        return Ok(Admission(Arc::new(Held::Shared(lease))));
    };
    // Refused: nothing was taken; the lease was never added, and there is nothing to give
    // back.
    lease.released.store(true, Ordering::Relaxed);
    toolcell::sync::lock(&leases.held).remove(&lease.member);
    Err(refused(store, limiters, index, &kind, retry_after))
}

/// What the admission script is told of each of `limiters`' quotas, in order: its rate and
/// burst, its calls in flight, its daily microseconds and fuel (0: unbounded).
fn quota_arguments(limiters: &[&Arc<Limiter>]) -> Vec<String> {
    limiters
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
        .collect()
}

/// The call's lease as `member` in the lease sets among `keys`, registered with `leases`
/// before the script runs: a renewal racing the admission keeps it too.
fn hold(
    store: &Arc<Store>,
    leases: &Arc<Leases>,
    limiters: &[&Arc<Limiter>],
    member: &str,
    keys: &[String],
) -> Lease {
    toolcell::sync::lock(&leases.held).insert(
        member.to_owned(),
        keys.iter().skip(1).step_by(2).cloned().collect(),
    );
    Lease {
        store: Arc::clone(store),
        bounded: limiters
            .iter()
            .any(|limiter| limiter.quota().in_flight.is_some()),
        released: std::sync::atomic::AtomicBool::new(false),
        leases: Arc::clone(leases),
        member: member.to_owned(),
        keys: keys.to_vec(),
        used: Mutex::new((0, 0)),
    }
}

/// One call of the admission script: its keys and arguments.
struct AdmitScript<'a> {
    /// Each quota's hash and lease set.
    keys: &'a [String],
    /// Each quota's limits ([`quota_arguments`]).
    arguments: &'a [String],
    /// The lease's member.
    member: &'a str,
    /// How many quotas.
    count: usize,
    /// The store's epoch keys.
    epoch_keys: &'a [String; 2],
    /// The epoch this replica saw, a candidate for a new one, and the grace (`Store::epoch_arguments`).
    epoch: &'a (String, String, u64),
}

impl AdmitScript<'_> {
    /// Run it: the script's answer, or the store out of reach.
    async fn run(&self, store: &Store) -> Result<Vec<redis::Value>, NotAdmitted> {
        let ttl = u64::try_from(LEASE_TTL.as_millis()).unwrap_or(u64::MAX);
        let AdmitScript {
            keys,
            arguments,
            member,
            count,
            epoch_keys: [epoch_key, grace_key],
            epoch: (seen, candidate, grace),
        } = self;
        store
            .run(|mut connection| async move {
                let mut invocation = ADMIT.prepare_invoke();
                for key in *keys {
                    invocation.key(key);
                }
                invocation.key(epoch_key).key(grace_key);
                invocation.arg(count).arg(member).arg(ttl);
                for argument in *arguments {
                    invocation.arg(argument);
                }
                invocation.arg(seen).arg(candidate).arg(grace);
                invocation.invoke_async(&mut connection).await
            })
            .await
            .map_err(NotAdmitted::Unavailable)
    }
}

/// The store's epoch, as the admission script's answer gives it.
fn answered_epoch(answer: &[redis::Value]) -> Option<String> {
    match answer {
        [redis::Value::Int(0), epoch] | [_, _, _, epoch] => {
            redis::from_redis_value::<String>(epoch.clone()).ok()
        }
        _ => None,
    }
}

/// The refusal in the admission script's answer (the refusing quota's place from 1, its kind,
/// the seconds to wait), if it is one; an answer the script does not give is an error.
fn refusal_of(
    store: &Store,
    answer: &[redis::Value],
) -> Result<Option<(usize, String, u64)>, NotAdmitted> {
    match answer {
        [redis::Value::Int(0), _] => Ok(None),
        [index, kind, retry_after, _] => Ok(Some((
            redis::from_redis_value::<usize>(index.clone()).unwrap_or(1),
            redis::from_redis_value::<String>(kind.clone()).unwrap_or_default(),
            redis::from_redis_value::<u64>(retry_after.clone()).unwrap_or(1),
        ))),
        other => Err(NotAdmitted::Unavailable(Unavailable {
            store: store.shown().to_owned(),
            why: format!("an answer the admission script does not give: {other:?}"),
        })),
    }
}

/// The refusal by the quota at `index` (from 1) of `limiters`, of `kind`, to try again after
/// `retry_after` seconds (at least 1).
fn refused(
    store: &Store,
    limiters: &[&Arc<Limiter>],
    index: usize,
    kind: &str,
    retry_after: u64,
) -> NotAdmitted {
    let limiter = limiters
        .get(index.saturating_sub(1))
        .copied()
        .or_else(|| limiters.first().copied());
    let Some(limiter) = limiter else {
        return NotAdmitted::Unavailable(Unavailable {
            store: store.shown().to_owned(),
            why: "a refusal naming no quota".to_owned(),
        });
    };
    let kind = match kind {
        "rate" => Kind::Rate,
        "in_flight" => Kind::InFlight,
        "daily_ms" => Kind::DailyMs,
        _ => Kind::DailyFuel,
    };
    NotAdmitted::Refused(Refused {
        kind,
        scope: limiter.scope(),
        tenant: limiter.tenant().to_owned(),
        retry_after: retry_after.max(1),
        quota: limiter.quota().clone(),
    })
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
    usage
}
