//! One tenant's or token's quota with its state: made, carried over a reload of the file,
//! retired and restored, and checked before a call is admitted.

use super::bucket::{State, rate_retry_after, utc_day};
use super::{Kind, Quota, Refused, Scope};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Instant, SystemTime};

/// One tenant's or token's quota, with what it has used.
#[derive(Debug)]
pub struct Limiter {
    tenant: String,
    scope: Scope,
    pub(super) quota: Quota,
    pub(super) state: Arc<Mutex<State>>,
    /// What names its state in a shared store: `tenant:NAME` or `token:SHA256`.
    holder: String,
}

impl Limiter {
    /// `tenant`'s (or one of its tokens') `quota`, carrying over what `previous` (the same
    /// holder's limiter under the file read before) had used, if any.
    pub fn new(
        tenant: &str,
        scope: Scope,
        quota: Quota,
        previous: Option<&Limiter>,
        now: Instant,
        wall: SystemTime,
    ) -> Limiter {
        let burst = quota.rate.map_or(0.0, |rate| f64::from(rate.burst));
        let state = previous.map(|previous| {
            {
                let mut state = toolcell::sync::lock(&previous.state);
                match (previous.quota.rate, quota.rate) {
                    // The bucket so far, within the new burst.
                    (Some(old), Some(_)) => {
                        state.refill(old, now);
                        state.bucket = state.bucket.min(burst);
                    }
                    _ => {
                        state.bucket = burst;
                        state.refilled = now;
                    }
                }
            }
            Arc::clone(&previous.state)
        });
        Limiter::with_state(tenant, scope, quota, state, now, wall)
    }

    /// `tenant`'s (or one of its tokens') `quota`, restored by a reload after a file that had
    /// none for it: the calls still in flight under the quota as it was [`retired`](Self::retire)
    /// count against this one, as does the day's use. The bucket starts full, as a new quota's
    /// does: no rate applied in between. If nothing holds the retired state any more, no call
    /// it admitted runs, and the quota starts afresh.
    pub fn restore(
        tenant: &str,
        scope: Scope,
        quota: Quota,
        retired: &Retired,
        now: Instant,
        wall: SystemTime,
    ) -> Limiter {
        let burst = quota.rate.map_or(0.0, |rate| f64::from(rate.burst));
        let state = retired.0.upgrade().inspect(|state| {
            let mut state = toolcell::sync::lock(state);
            state.bucket = burst;
            state.refilled = now;
        });
        Limiter::with_state(tenant, scope, quota, state, now, wall)
    }

    /// A limiter of `quota` on `state`, or on a fresh state if none is carried over.
    fn with_state(
        tenant: &str,
        scope: Scope,
        quota: Quota,
        state: Option<Arc<Mutex<State>>>,
        now: Instant,
        wall: SystemTime,
    ) -> Limiter {
        let burst = quota.rate.map_or(0.0, |rate| f64::from(rate.burst));
        let state =
            state.unwrap_or_else(|| Arc::new(Mutex::new(State::new(burst, now, utc_day(wall).0))));
        Limiter {
            holder: format!("{}:{tenant}", scope.name()),
            tenant: tenant.to_owned(),
            scope,
            quota,
            state,
        }
    }

    /// This limiter, its state in a shared store named `holder` (`tenant:NAME`,
    /// `token:SHA256`): what every replica reading the same file names it.
    pub fn holding(mut self, holder: &str) -> Limiter {
        holder.clone_into(&mut self.holder);
        self
    }

    /// What names its state in a shared store.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Its state, kept (weakly) when a reload drops this quota, so that a reload restoring it
    /// can [`restore`](Self::restore) it.
    pub fn retire(&self) -> Retired {
        Retired(Arc::downgrade(&self.state))
    }

    /// The tenant it limits.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// Whether it is a tenant's or a token's.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The limits it sets.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// Calls in flight now, and the running time (ms) and fuel used so far today.
    pub fn usage(&self, wall: SystemTime) -> (u32, u64, u64) {
        let mut state = toolcell::sync::lock(&self.state);
        state.roll(utc_day(wall).0);
        (state.in_flight, state.used_micros / 1000, state.used_fuel)
    }

    /// Why `calls` more calls may not start now, if they may not; `state` is this limiter's.
    pub(super) fn check(
        &self,
        state: &mut State,
        calls: u32,
        now: Instant,
        day: (u64, u64),
    ) -> Result<(), Refused> {
        let refused = |kind: Kind, retry_after: u64| Refused {
            kind,
            scope: self.scope,
            tenant: self.tenant.clone(),
            retry_after,
            quota: self.quota.clone(),
        };
        state.roll(day.0);
        if let Some(budget) = self.quota.daily_ms
            && state.used_micros.saturating_add(state.reserved_micros)
                >= budget.saturating_mul(1000)
        {
            return Err(refused(Kind::DailyMs, day.1));
        }
        if let Some(budget) = self.quota.daily_fuel
            && state.used_fuel.saturating_add(state.reserved_fuel) >= budget
        {
            return Err(refused(Kind::DailyFuel, day.1));
        }
        if let Some(most) = self.quota.in_flight
            && state.in_flight.saturating_add(calls) > most
        {
            return Err(refused(Kind::InFlight, 1));
        }
        if let Some(rate) = self.quota.rate {
            state.refill(rate, now);
            if state.bucket < f64::from(calls) {
                return Err(refused(
                    Kind::Rate,
                    rate_retry_after(state.bucket, calls, rate),
                ));
            }
        }
        Ok(())
    }
}

/// A quota's state after a reload dropped the quota: held weakly, so it lives only as long as
/// something can still count against it (an [`Admission`](super::Admission) of a call in flight, or a limiter of
/// an older file that a request authenticated under it still holds).
#[derive(Debug, Clone)]
pub struct Retired(Weak<Mutex<State>>);

impl Retired {
    /// Whether anything still holds the state: if not, no call it admitted runs and none can
    /// be admitted under it again, so it may be forgotten.
    pub fn is_held(&self) -> bool {
        self.0.strong_count() > 0
    }
}
