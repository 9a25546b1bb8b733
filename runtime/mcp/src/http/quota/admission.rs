//! Admitting calls under their quotas in this process, all or none, and holding their places
//! (and what they reserve of the daily budgets) until they end and are charged.

use super::bucket::{State, utc_day};
use super::{Limiter, Refused};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// Admit `calls` calls under every one of `limiters` (a tenant's, then its token's: always
/// that order, so two admissions never wait on each other), or say which refused them.
/// Nothing is taken from any limiter unless all admit. Reserves nothing of a daily budget
/// ([`admit_reserving`]).
pub fn admit(
    limiters: &[&Arc<Limiter>],
    calls: u32,
    now: Instant,
    wall: SystemTime,
) -> Result<Admission, Refused> {
    admit_reserving(limiters, calls, now, wall, Reserve::default())
}

/// What a call reserves of its quotas' daily budgets while it runs: the most it may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reserve {
    /// Its deadline, of a daily time budget.
    pub time: Duration,
    /// Its fuel limit, of a daily fuel budget (0: it has none, and reserves none).
    pub fuel: u64,
}

impl Reserve {
    /// The time reserved, in microseconds.
    pub(super) fn micros(&self) -> u64 {
        u64::try_from(self.time.as_micros()).unwrap_or(u64::MAX)
    }
}

/// [`admit`], each call reserving `reserve` (the longest it may run, the most fuel it may
/// burn) of the daily budgets until it ends: a budget admits a call while what was used and
/// what the calls still running reserved is below it, so the calls in flight take it past by
/// at most one call's reservation, not by all of theirs.
pub fn admit_reserving(
    limiters: &[&Arc<Limiter>],
    calls: u32,
    now: Instant,
    wall: SystemTime,
    reserve: Reserve,
) -> Result<Admission, Refused> {
    let reserve_fuel = reserve.fuel.saturating_mul(u64::from(calls));
    let reserve = reserve.micros().saturating_mul(u64::from(calls));
    let day = utc_day(wall);
    let mut states: Vec<MutexGuard<'_, State>> = limiters
        .iter()
        .map(|limiter| toolcell::sync::lock(&limiter.state))
        .collect();
    for (limiter, state) in limiters.iter().zip(states.iter_mut()) {
        limiter.check(state, calls, now, day)?;
    }
    for (limiter, state) in limiters.iter().zip(states.iter_mut()) {
        if limiter.quota.rate.is_some() {
            state.bucket -= f64::from(calls);
        }
        state.in_flight = state.in_flight.saturating_add(calls);
        if limiter.quota.daily_ms.is_some() {
            state.reserved_micros = state.reserved_micros.saturating_add(reserve);
        }
        if limiter.quota.daily_fuel.is_some() {
            state.reserved_fuel = state.reserved_fuel.saturating_add(reserve_fuel);
        }
    }
    drop(states);
    Ok(Admission(Arc::new(Held::Local {
        states: limiters
            .iter()
            .map(|limiter| {
                (
                    Arc::clone(&limiter.state),
                    limiter.quota.daily_ms.is_some(),
                    limiter.quota.daily_fuel.is_some(),
                )
            })
            .collect(),
        calls,
        reserve,
        reserve_fuel,
    })))
}

/// Admitted calls' places under their quotas, given back when the last clone drops (the
/// request is answered and the call, or the task it became, has ended).
#[derive(Debug, Clone)]
pub struct Admission(pub(super) Arc<Held>);

/// What an [`Admission`] holds: places in this process's state, or a lease in the shared store.
#[derive(Debug)]
pub(super) enum Held {
    /// Places in this process's state.
    Local {
        /// Each quota's state, and whether the calls reserved part of its daily time budget
        /// and of its daily fuel budget.
        states: Vec<(Arc<Mutex<State>>, bool, bool)>,
        calls: u32,
        /// What the calls reserved of a daily time budget (microseconds, all of them together).
        reserve: u64,
        /// What the calls reserved of a daily fuel budget (all of them together).
        reserve_fuel: u64,
    },
    /// A lease in the shared store, given back (and charged) when dropped.
    #[cfg(feature = "state")]
    Shared(super::shared::Lease),
}

impl Admission {
    /// A call that was admitted ended, having run for `elapsed` and burnt `fuel` (if
    /// metered): charge it to the day it ended in, and, in a shared store where a quota bounds
    /// the calls in flight, give its places back now (one round trip), before its answer is
    /// sent; otherwise they are given back when the admission drops (in a shared store,
    /// batched with other calls' ends, off the call's path).
    pub async fn finish(&self, elapsed: Duration, fuel: Option<u64>, wall: SystemTime) {
        self.charge(elapsed, fuel, wall);
        #[cfg(feature = "state")]
        if let Held::Shared(lease) = &*self.0 {
            lease.release_now().await;
        }
    }

    /// Charge a call that ended, having run for `elapsed` and burnt `fuel` (if metered), to
    /// the day it ended in.
    pub fn charge(&self, elapsed: Duration, fuel: Option<u64>, wall: SystemTime) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        match &*self.0 {
            Held::Local { states, .. } => {
                let day = utc_day(wall).0;
                for (state, _, _) in states {
                    let mut state = toolcell::sync::lock(state);
                    state.roll(day);
                    state.used_micros = state.used_micros.saturating_add(micros);
                    state.used_fuel = state.used_fuel.saturating_add(fuel.unwrap_or(0));
                }
            }
            #[cfg(feature = "state")]
            Held::Shared(lease) => lease.charge(micros, fuel.unwrap_or(0)),
        }
    }
}

impl Drop for Held {
    // Without the `state` feature `Local` is the only kind.
    #[cfg_attr(not(feature = "state"), allow(irrefutable_let_patterns))]
    fn drop(&mut self) {
        if let Held::Local {
            states,
            calls,
            reserve,
            reserve_fuel,
        } = self
        {
            for (state, time, fuel) in states.iter() {
                let mut state = toolcell::sync::lock(state);
                state.in_flight = state.in_flight.saturating_sub(*calls);
                if *time {
                    state.reserved_micros = state.reserved_micros.saturating_sub(*reserve);
                }
                if *fuel {
                    state.reserved_fuel = state.reserved_fuel.saturating_sub(*reserve_fuel);
                }
            }
        }
    }
}
