//! Quotas per tenant and per token: a rate with a burst, calls in flight, a daily budget.
//!
//! A quota is set in the tokens file (`[quota.TENANT]`, or `quota = { ... }` on a `[[token]]`)
//! or, for OAuth tenants, in their `[tenants.NAME]` table ([`crate::http::auth`], [`crate::http::oauth`]):
//!
//! ```toml
//! [quota.team-a]
//! rate = 5              # calls started per second, on average (a token bucket; 0.5: one per 2 s)
//! burst = 10            # at most this many at once after a quiet spell (default: rate, at least 1)
//! in_flight = 2         # calls running at once
//! daily_ms = 600000     # milliseconds of tool running time per UTC day
//! daily_fuel = 5_000_000_000  # fuel per UTC day (only on a runtime that meters fuel)
//! ```
//!
//! What counts is a `tools/call` (each one, `find_tool` and `call_tool` included): the work.
//! Other requests (`tools/list`, `initialize`, a task's status) are bounded only by the fair
//! share every client has ([`crate::http::share`]). A call is admitted only if
//! every quota that applies to it (its tenant's and its token's) has room: a refused call takes
//! nothing from any of them.
//!
//! - **Rate**: a token bucket of `burst` calls, refilled at `rate` a second. Refused: `429`
//!   with `Retry-After` saying when the bucket has a call again.
//! - **In flight**: calls admitted and not yet ended, a call that became a task included until
//!   the task ends. Refused: `429`, `Retry-After: 1` (when a call ends cannot be known).
//! - **Daily budgets**: each call's running time (`report.elapsed`: the wall time from the
//!   start of its instance to its answer, so an upper bound on the CPU it used; a call that
//!   waits for a slot is not charged for the wait) and, where the runtime meters it, its fuel
//!   are added when the call ends, to the UTC day it ends in. A call is admitted while the
//!   day's use is below the budget, so calls already running may take it past the budget:
//!   they are never stopped for it. Refused: `429`, `Retry-After` the seconds to the next UTC
//!   midnight, when every budget starts again from zero.
//!
//! A refusal is a JSON-RPC error (code [`QUOTA_ERROR_CODE`]) whose message a model can read and
//! whose `data` says which quota (`rate`, `in_flight`, `daily_ms`, `daily_fuel`), whose
//! (`scope`: `tenant` or `token`; `tenant`), and `retry_after` in seconds; it is at most
//! [`MAX_REFUSAL_BYTES`] long.
//!
//! State is kept per tenant and per token of the file, so it is bounded by the file, never by
//! what callers send. When the file is read again (SIGHUP), a tenant or token that remains keeps
//! its state (calls in flight, the day's use, its bucket, clipped to a smaller new burst), and
//! the new limits apply to the next call. A quota that a reload drops (or whose tenant or token
//! it drops) is [`Retired`]: while calls it admitted still run, a later reload that restores it
//! counts them again, with the day's use, and a full bucket. Calls started while no quota
//! applied are counted by none.

use serde::Deserialize;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime};

/// The fastest rate a quota may set: more calls a second than one server answers, so a figure
/// above it is a typo, not a limit.
pub const MAX_RATE_PER_SECOND: f64 = 10_000.0;

/// The slowest rate a quota may set, one call an hour: slower than that is a daily budget's
/// job, and it keeps a rate refusal's `Retry-After` within an hour.
pub const MIN_RATE_PER_SECOND: f64 = 1.0 / 3600.0;

/// The largest burst a quota may set: as many calls as the fastest rate allows in a second.
pub const MAX_BURST: u32 = 10_000;

/// The largest daily running-time budget, in milliseconds: every instance slot busy all day.
/// Anything larger limits nothing.
pub const MAX_DAILY_MS: u64 = 86_400_000 * toolcell::limits::POOL_SLOTS as u64;

/// The JSON-RPC error code of a quota refusal: in the range JSON-RPC leaves to servers, and
/// ending in the HTTP status it comes with.
pub const QUOTA_ERROR_CODE: i64 = -32029;

/// The longest refusal body: the message and its data, with a tenant name of at most 64
/// characters and a request id cut to [`MAX_ECHOED_ID_CHARS`], always fit.
pub const MAX_REFUSAL_BYTES: usize = 1024;

/// The longest request id a refusal echoes; a longer string id is answered with `null`, so a
/// caller cannot make a refusal large.
pub const MAX_ECHOED_ID_CHARS: usize = 128;

const SECONDS_PER_DAY: u64 = 86_400;

/// A quota as the file writes it; [`Quota::new`] checks it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// Calls started per second, on average.
    pub rate: Option<f64>,
    /// Calls that may start at once after a quiet spell (needs `rate`).
    pub burst: Option<u32>,
    /// Calls running at once.
    pub in_flight: Option<u32>,
    /// Milliseconds of tool running time per UTC day.
    pub daily_ms: Option<u64>,
    /// Fuel per UTC day.
    pub daily_fuel: Option<u64>,
}

/// A checked quota: every limit it sets (at least one).
#[derive(Debug, Clone, PartialEq)]
pub struct Quota {
    /// Calls per second and the burst.
    pub rate: Option<Rate>,
    /// Calls running at once.
    pub in_flight: Option<u32>,
    /// Milliseconds of running time per UTC day.
    pub daily_ms: Option<u64>,
    /// Fuel per UTC day.
    pub daily_fuel: Option<u64>,
}

/// A token bucket's refill rate and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Calls per second.
    pub per_second: f64,
    /// The bucket's size: calls that may start at once.
    pub burst: u32,
}

impl Quota {
    /// Check `config`: `max_in_flight` is the most calls a client may have in flight anyway
    /// (a larger figure would never be reached), `meters_fuel` whether fuel is measured at all.
    pub fn new(
        config: &QuotaConfig,
        max_in_flight: usize,
        meters_fuel: bool,
    ) -> Result<Quota, String> {
        let rate = match (config.rate, config.burst) {
            (None, Some(_)) => return Err("a burst needs a rate".to_owned()),
            (None, None) => None,
            (Some(per_second), burst) => {
                if !(MIN_RATE_PER_SECOND..=MAX_RATE_PER_SECOND).contains(&per_second) {
                    return Err(format!(
                        "rate must be between {MIN_RATE_PER_SECOND:.6} (one call an hour) and \
                         {MAX_RATE_PER_SECOND} calls a second, not {per_second}"
                    ));
                }
                // One call at least, else nothing could ever start.
                let burst = burst.unwrap_or_else(|| per_second.ceil().max(1.0) as u32);
                if !(1..=MAX_BURST).contains(&burst) {
                    return Err(format!("burst must be 1 to {MAX_BURST}, not {burst}"));
                }
                Some(Rate { per_second, burst })
            }
        };
        if let Some(in_flight) = config.in_flight
            && !(1..=max_in_flight).contains(&(in_flight as usize))
        {
            return Err(format!(
                "in_flight must be 1 to {max_in_flight} (the most calls one client may \
                 have in flight on this server), not {in_flight}"
            ));
        }
        if let Some(ms) = config.daily_ms
            && !(1..=MAX_DAILY_MS).contains(&ms)
        {
            return Err(format!("daily_ms must be 1 to {MAX_DAILY_MS}, not {ms}"));
        }
        if let Some(fuel) = config.daily_fuel {
            if fuel == 0 {
                return Err("daily_fuel must be at least 1".to_owned());
            }
            if !meters_fuel {
                return Err(
                    "daily_fuel is set, but this server does not meter fuel (set a fuel \
                            limit in the server's --policy, which turns metering on), so no \
                            call's fuel could be counted"
                        .to_owned(),
                );
            }
        }
        let quota = Quota {
            rate,
            in_flight: config.in_flight,
            daily_ms: config.daily_ms,
            daily_fuel: config.daily_fuel,
        };
        if quota == Quota::NONE {
            return Err(
                "a quota sets no limit (rate, in_flight, daily_ms or daily_fuel)".to_owned(),
            );
        }
        Ok(quota)
    }

    const NONE: Quota = Quota {
        rate: None,
        in_flight: None,
        daily_ms: None,
        daily_fuel: None,
    };
}

/// Whose quota it is: a tenant's (all its tokens together) or one token's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The tenant's, shared by every token naming it.
    Tenant,
    /// One token's.
    Token,
}

impl Scope {
    /// Its name in a refusal and in the metrics.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Tenant => "tenant",
            Scope::Token => "token",
        }
    }
}

/// Which limit refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Calls per second (and burst).
    Rate,
    /// Calls running at once.
    InFlight,
    /// The day's running time.
    DailyMs,
    /// The day's fuel.
    DailyFuel,
}

impl Kind {
    /// Its name in a refusal and in the metrics: the field that sets it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Rate => "rate",
            Kind::InFlight => "in_flight",
            Kind::DailyMs => "daily_ms",
            Kind::DailyFuel => "daily_fuel",
        }
    }
}

/// What a quota's holder has used: kept across reloads of the file.
#[derive(Debug)]
struct State {
    /// Calls the bucket holds now (fractions accumulate as time passes).
    bucket: f64,
    /// When `bucket` was last brought up to date.
    refilled: Instant,
    /// Calls admitted and not yet ended.
    in_flight: u32,
    /// What the calls admitted and not yet ended may still use of a daily time budget: each
    /// reserves its deadline when admitted, and gives it back when it ends (and is charged
    /// what it used).
    reserved_micros: u64,
    /// The same for a daily fuel budget: each call reserves its fuel limit.
    reserved_fuel: u64,
    /// The UTC day (days since 1970-01-01) `used_*` count for.
    day: u64,
    used_micros: u64,
    used_fuel: u64,
}

impl State {
    fn new(burst: f64, now: Instant, day: u64) -> State {
        State {
            bucket: burst,
            refilled: now,
            in_flight: 0,
            reserved_micros: 0,
            reserved_fuel: 0,
            day,
            used_micros: 0,
            used_fuel: 0,
        }
    }

    /// Add what `rate` refilled since the last look, up to the burst.
    fn refill(&mut self, rate: Rate, now: Instant) {
        let since = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.bucket = (self.bucket + since * rate.per_second).min(f64::from(rate.burst));
        self.refilled = now;
    }

    /// Start the day `day` afresh if the use counted is an earlier day's.
    fn roll(&mut self, day: u64) {
        if day != self.day {
            self.day = day;
            self.used_micros = 0;
            self.used_fuel = 0;
        }
    }
}

/// How long until the bucket holds `calls` calls again, in whole seconds (at least 1).
fn rate_retry_after(bucket: f64, calls: u32, rate: Rate) -> u64 {
    let missing = (f64::from(calls) - bucket).max(0.0);
    ((missing / rate.per_second).ceil() as u64).max(1)
}

/// The UTC day `now` falls in (days since 1970-01-01), and the seconds left until it ends
/// (at least 1).
pub fn utc_day(now: SystemTime) -> (u64, u64) {
    let seconds = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    (
        seconds / SECONDS_PER_DAY,
        (SECONDS_PER_DAY - seconds % SECONDS_PER_DAY).max(1),
    )
}

/// One tenant's or token's quota, with what it has used.
#[derive(Debug)]
pub struct Limiter {
    tenant: String,
    scope: Scope,
    quota: Quota,
    state: Arc<Mutex<State>>,
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
                let mut state = lock(&previous.state);
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
            let mut state = lock(state);
            state.bucket = burst;
            state.refilled = now;
        });
        Limiter::with_state(tenant, scope, quota, state, now, wall)
    }

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
        let mut state = lock(&self.state);
        state.roll(utc_day(wall).0);
        (state.in_flight, state.used_micros / 1000, state.used_fuel)
    }

    /// Why `calls` more calls may not start now, if they may not; `state` is this limiter's.
    fn check(
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

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

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
    fn micros(&self) -> u64 {
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
        .map(|limiter| lock(&limiter.state))
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

/// A quota's state after a reload dropped the quota: held weakly, so it lives only as long as
/// something can still count against it (an [`Admission`] of a call in flight, or a limiter of
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

/// Admitted calls' places under their quotas, given back when the last clone drops (the
/// request is answered and the call, or the task it became, has ended).
#[derive(Debug, Clone)]
pub struct Admission(Arc<Held>);

#[derive(Debug)]
enum Held {
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
    Shared(shared::Lease),
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
                    let mut state = lock(state);
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
                let mut state = lock(state);
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

/// Where quotas keep what their holders used: in this process (the default), or in the store
/// replicas share (`--state`), so that a quota holds once across them.
#[derive(Clone, Default)]
pub enum Ledger {
    /// In this process.
    #[default]
    Local,
    /// In the shared store, with the leases this replica holds there.
    #[cfg(feature = "state")]
    Shared(Arc<crate::state::Store>, Arc<Leases>),
}

/// Why a call was not admitted: a quota refused it, or the shared store could not be reached
/// to ask.
#[derive(Debug, Clone)]
pub enum NotAdmitted {
    /// A quota is spent.
    Refused(Refused),
    /// The shared store could not be reached: nothing it guarantees is given up.
    Unavailable(crate::state::Unavailable),
}

impl Ledger {
    /// Admit one call under every one of `limiters` (a tenant's, then its token's), reserving
    /// `reserve` (the longest it may run, the most fuel it may burn) of their daily budgets
    /// until it ends, or say why not. Nothing is taken from any limiter unless all admit.
    pub async fn admit(
        &self,
        limiters: &[&Arc<Limiter>],
        now: Instant,
        wall: SystemTime,
        reserve: Reserve,
    ) -> Result<Admission, NotAdmitted> {
        match self {
            Ledger::Local => {
                admit_reserving(limiters, 1, now, wall, reserve).map_err(NotAdmitted::Refused)
            }
            #[cfg(feature = "state")]
            Ledger::Shared(store, leases) => shared::admit(store, leases, limiters, reserve).await,
        }
    }

    /// Each of `limiters`' calls in flight, and the running time (ms) and fuel used today, as
    /// the ledger keeps them (read from the store where it is shared; a holder whose store
    /// cannot be read is left out).
    pub async fn usage(
        &self,
        limiters: &[Arc<Limiter>],
        wall: SystemTime,
    ) -> Vec<(Arc<Limiter>, Usage)> {
        match self {
            Ledger::Local => limiters
                .iter()
                .map(|limiter| (Arc::clone(limiter), limiter.usage(wall)))
                .collect(),
            #[cfg(feature = "state")]
            Ledger::Shared(store, _) => shared::usage(store, limiters).await,
        }
    }
}

/// A lease given back: its member, its quotas' keys, and its call's use (microseconds, fuel).
#[cfg(feature = "state")]
type Returned = (String, Vec<String>, u64, u64);

/// What a quota's holder has used: calls in flight, milliseconds and fuel today.
pub type Usage = (u32, u64, u64);

/// The leases this replica holds in the shared store, renewed together.
#[cfg(feature = "state")]
#[derive(Debug, Default)]
pub struct Leases {
    /// Each lease's member, and the lease sets it is in.
    held: Mutex<std::collections::HashMap<String, Vec<String>>>,
    /// Leases given back and not yet written: each lease's member, its quotas' keys, and what
    /// its call used (microseconds, fuel). Written together, in one script call, by
    /// [`Leases::give_back`]: under load many calls' ends share one round trip.
    returned: Mutex<Vec<Returned>>,
    /// Wakes [`Leases::give_back`].
    returning: tokio::sync::Notify,
}

#[cfg(not(feature = "state"))]
/// The leases this replica holds in a shared store (none without the `state` feature).
#[derive(Debug, Default)]
pub struct Leases;

#[cfg(feature = "state")]
mod shared;

/// Why a call was refused: which quota, whose, and when to try again.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// The limit reached.
    pub kind: Kind,
    /// Whose quota it is.
    pub scope: Scope,
    /// The tenant.
    pub tenant: String,
    /// Seconds until trying again may succeed.
    pub retry_after: u64,
    /// The quota that refused.
    quota: Quota,
}

impl Refused {
    /// What the model reads: which limit, and when to try again.
    pub fn message(&self) -> String {
        let whose = match self.scope {
            Scope::Tenant => format!("tenant {:?}", self.tenant),
            Scope::Token => format!("this token of tenant {:?}", self.tenant),
        };
        let after = self.retry_after;
        match self.kind {
            Kind::Rate => {
                let rate = self
                    .quota
                    .rate
                    .map_or((0.0, 0), |r| (r.per_second, r.burst));
                format!(
                    "quota exceeded: {whose} may start {} calls a second (at most {} at once); \
                     try again in {after} s",
                    rate.0, rate.1
                )
            }
            Kind::InFlight => format!(
                "quota exceeded: {whose} may have {} calls running at once; try again when one \
                 has ended (in about {after} s)",
                self.quota.in_flight.unwrap_or(0)
            ),
            Kind::DailyMs => format!(
                "quota exceeded: {whose} has used its {} ms of tool running time for today \
                 (UTC); it starts again at midnight UTC, in {after} s",
                self.quota.daily_ms.unwrap_or(0)
            ),
            Kind::DailyFuel => format!(
                "quota exceeded: {whose} has used its {} fuel for today (UTC); it starts again \
                 at midnight UTC, in {after} s",
                self.quota.daily_fuel.unwrap_or(0)
            ),
        }
    }

    /// The JSON-RPC error answering the request whose id was `id` (echoed if a number or a
    /// short string; else `null`): at most [`MAX_REFUSAL_BYTES`].
    pub fn body(&self, id: Option<&serde_json::Value>) -> String {
        let id = match id {
            Some(serde_json::Value::Number(number)) => serde_json::Value::Number(number.clone()),
            Some(serde_json::Value::String(text))
                if text.chars().count() <= MAX_ECHOED_ID_CHARS =>
            {
                serde_json::Value::String(text.clone())
            }
            _ => serde_json::Value::Null,
        };
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": QUOTA_ERROR_CODE,
                "message": self.message(),
                "data": {
                    "quota": self.kind.name(),
                    "scope": self.scope.name(),
                    "tenant": self.tenant,
                    "retry_after": self.retry_after,
                },
            },
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(text: &str) -> Result<Quota, String> {
        let config: QuotaConfig = toml::from_str(text).map_err(|error| error.to_string())?;
        Quota::new(&config, 16, false)
    }

    fn limiter(text: &str, now: Instant) -> Arc<Limiter> {
        let quota = quota(text).expect("a quota");
        Arc::new(Limiter::new(
            "a",
            Scope::Tenant,
            quota,
            None,
            now,
            SystemTime::UNIX_EPOCH,
        ))
    }

    #[test]
    fn a_quota_is_checked_when_read() {
        for (text, why) in [
            ("", "sets no limit"),
            ("burst = 3", "a burst needs a rate"),
            ("rate = 0", "rate must be"),
            ("rate = -1", "rate must be"),
            ("rate = 20000", "rate must be"),
            ("rate = nan", "rate must be"),
            ("rate = 1\nburst = 0", "burst must be"),
            ("rate = 1\nburst = 10001", "burst must be"),
            ("in_flight = 0", "in_flight must be 1 to 16"),
            ("in_flight = 17", "in_flight must be 1 to 16"),
            ("daily_ms = 0", "daily_ms must be"),
            ("daily_fuel = 0", "daily_fuel must be"),
            ("daily_fuel = 100", "does not meter fuel"),
            ("rate = 1\nper = \"minute\"", "unknown field"),
            ("in_flight = -1", "invalid value"),
            ("rate = \"fast\"", "invalid type"),
        ] {
            let refused = quota(text).expect_err(text);
            assert!(refused.contains(why), "{text:?}: {refused}");
        }
        assert_eq!(
            quota("rate = 2.5").expect("rate"),
            Quota {
                rate: Some(Rate {
                    per_second: 2.5,
                    burst: 3
                }),
                ..Quota::NONE
            }
        );
        assert_eq!(
            quota("rate = 0.5").expect("rate").rate.map(|r| r.burst),
            Some(1)
        );
        let config: QuotaConfig = toml::from_str("daily_fuel = 100").expect("config");
        assert_eq!(
            Quota::new(&config, 16, true).expect("metered").daily_fuel,
            Some(100)
        );
    }

    #[test]
    fn the_bucket_allows_the_burst_then_the_rate() {
        let start = Instant::now();
        let wall = SystemTime::UNIX_EPOCH;
        let limiter = limiter("rate = 2\nburst = 3", start);
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(admit(&[&limiter], 1, start, wall).expect("within the burst"));
        }
        let refused = admit(&[&limiter], 1, start, wall).expect_err("the bucket is empty");
        assert_eq!((refused.kind, refused.retry_after), (Kind::Rate, 1));
        // A quarter second later: half a call in the bucket, not enough.
        let later = start + Duration::from_millis(250);
        assert!(admit(&[&limiter], 1, later, wall).is_err());
        // Half a second: one call (2 a second).
        let later = start + Duration::from_millis(500);
        held.push(admit(&[&limiter], 1, later, wall).expect("refilled one"));
        assert!(admit(&[&limiter], 1, later, wall).is_err());
        // A long quiet spell refills to the burst, no more.
        let later = start + Duration::from_secs(3600);
        for _ in 0..3 {
            held.push(admit(&[&limiter], 1, later, wall).expect("the burst again"));
        }
        assert!(admit(&[&limiter], 1, later, wall).is_err());
        // Slow rates wait longer: one call every 4 s.
        let slow = self::limiter("rate = 0.25", start);
        held.push(admit(&[&slow], 1, start, wall).expect("the first"));
        assert_eq!(
            admit(&[&slow], 1, start, wall)
                .expect_err("too soon")
                .retry_after,
            4
        );
    }

    #[test]
    fn in_flight_places_come_back_when_the_last_holder_drops() {
        let now = Instant::now();
        let wall = SystemTime::UNIX_EPOCH;
        let limiter = limiter("in_flight = 2", now);
        let first = admit(&[&limiter], 1, now, wall).expect("first");
        let copy = first.clone();
        let _second = admit(&[&limiter], 1, now, wall).expect("second");
        let refused = admit(&[&limiter], 1, now, wall).expect_err("full");
        assert_eq!((refused.kind, refused.retry_after), (Kind::InFlight, 1));
        drop(first);
        assert!(admit(&[&limiter], 1, now, wall).is_err(), "a copy holds it");
        drop(copy);
        assert_eq!(limiter.usage(wall).0, 1);
        admit(&[&limiter], 1, now, wall).expect("a place came back");
    }

    #[test]
    fn a_refusal_by_one_quota_takes_nothing_from_the_other() {
        let now = Instant::now();
        let wall = SystemTime::UNIX_EPOCH;
        let tenant = limiter("rate = 1\nburst = 5\nin_flight = 5", now);
        let token = limiter("in_flight = 1", now);
        let held = admit(&[&tenant, &token], 1, now, wall).expect("first");
        assert_eq!(
            admit(&[&tenant, &token], 1, now, wall)
                .expect_err("the token's bound")
                .kind,
            Kind::InFlight
        );
        assert_eq!(tenant.usage(wall).0, 1, "the tenant gave its place back");
        drop(held);
        // Four calls left in the tenant's bucket: only the admitted call took one.
        for _ in 0..4 {
            drop(admit(&[&tenant], 1, now, wall).expect("the tenant's bucket"));
        }
        assert!(admit(&[&tenant], 1, now, wall).is_err());
    }

    #[test]
    fn a_daily_budget_is_charged_at_the_end_and_starts_again_at_utc_midnight() {
        let now = Instant::now();
        // 10:00 UTC on some day.
        let day = 20_000 * SECONDS_PER_DAY;
        let morning = SystemTime::UNIX_EPOCH + Duration::from_secs(day + 10 * 3600);
        let limiter = Arc::new(Limiter::new(
            "a",
            Scope::Tenant,
            quota("daily_ms = 100").expect("quota"),
            None,
            now,
            morning,
        ));
        // Two calls start within the budget; both are charged in full when they end.
        let first = admit(&[&limiter], 1, now, morning).expect("first");
        let second = admit(&[&limiter], 1, now, morning).expect("second");
        first.charge(Duration::from_millis(80), None, morning);
        assert!(admit(&[&limiter], 1, now, morning).is_ok(), "80 of 100 ms");
        second.charge(Duration::from_millis(80), None, morning);
        assert_eq!(limiter.usage(morning).1, 160, "past the budget, not cut");
        let refused = admit(&[&limiter], 1, now, morning).expect_err("spent");
        assert_eq!(refused.kind, Kind::DailyMs);
        assert_eq!(refused.retry_after, 14 * 3600, "until midnight UTC");
        let next_day = SystemTime::UNIX_EPOCH + Duration::from_secs(day + SECONDS_PER_DAY);
        admit(&[&limiter], 1, now, next_day).expect("a new day");
        assert_eq!(utc_day(next_day), (20_001, SECONDS_PER_DAY));
    }

    #[test]
    fn calls_in_flight_reserve_their_deadline_of_a_daily_budget() {
        let now = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(10 * 3600);
        let limiter = Arc::new(Limiter::new(
            "a",
            Scope::Tenant,
            quota("daily_ms = 1000").expect("quota"),
            None,
            now,
            wall,
        ));
        // A call that may run 800 ms reserves it: a second one of 800 ms is still admitted
        // (800 < 1000), a third is not (1600 >= 1000), whatever they will really use.
        let deadline = Reserve {
            time: Duration::from_millis(800),
            fuel: 0,
        };
        let first = admit_reserving(&[&limiter], 1, now, wall, deadline).expect("first");
        let second = admit_reserving(&[&limiter], 1, now, wall, deadline).expect("second");
        let refused =
            admit_reserving(&[&limiter], 1, now, wall, deadline).expect_err("reserved past it");
        assert_eq!(refused.kind, Kind::DailyMs);
        // The first ends having used 10 ms: its reservation comes back, its use is charged.
        first.charge(Duration::from_millis(10), None, wall);
        drop(first);
        let third = admit_reserving(&[&limiter], 1, now, wall, deadline).expect("room again");
        drop((second, third));
        assert_eq!(limiter.usage(wall).1, 10);
    }

    #[test]
    fn calls_in_flight_reserve_their_fuel_limit_of_a_daily_fuel_budget() {
        let now = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(10 * 3600);
        let config: QuotaConfig = toml::from_str("daily_fuel = 1000").expect("toml");
        let limiter = Arc::new(Limiter::new(
            "a",
            Scope::Tenant,
            Quota::new(&config, 16, true).expect("quota"),
            None,
            now,
            wall,
        ));
        // Calls that may burn 600 each: a second is admitted (600 < 1000), a third is not
        // (1200 >= 1000), before any has burnt anything.
        let most = Reserve {
            time: Duration::ZERO,
            fuel: 600,
        };
        let first = admit_reserving(&[&limiter], 1, now, wall, most).expect("first");
        let second = admit_reserving(&[&limiter], 1, now, wall, most).expect("second");
        let third = admit_reserving(&[&limiter], 1, now, wall, most).expect_err("reserved");
        assert_eq!(third.kind, Kind::DailyFuel);
        // The first ends having burnt 50: its reservation comes back, its fuel is charged.
        first.charge(Duration::ZERO, Some(50), wall);
        drop(first);
        let third = admit_reserving(&[&limiter], 1, now, wall, most).expect("room again");
        drop((second, third));
        assert_eq!(limiter.usage(wall).2, 50);
    }

    #[test]
    fn a_reloaded_quota_keeps_what_was_used_and_clips_the_bucket() {
        let now = Instant::now();
        let wall = SystemTime::UNIX_EPOCH;
        let old = limiter("rate = 1\nburst = 10\nin_flight = 1\ndaily_ms = 1000", now);
        let running = admit(&[&old], 1, now, wall).expect("running");
        running.charge(Duration::from_millis(400), None, wall);
        let new = Arc::new(Limiter::new(
            "a",
            Scope::Tenant,
            quota("rate = 1\nburst = 2\nin_flight = 4\ndaily_ms = 1000").expect("quota"),
            Some(&old),
            now,
            wall,
        ));
        assert_eq!(
            new.usage(wall),
            (1, 400, 0),
            "the call and its charge remain"
        );
        let _two = admit(&[&new], 1, now, wall).expect("in_flight raised from 1");
        let _three = admit(&[&new], 1, now, wall).expect("the new burst's second");
        assert_eq!(
            admit(&[&new], 1, now, wall).expect_err("burst 2").kind,
            Kind::Rate,
            "the bucket of 9 was clipped to the new burst of 2"
        );
        drop(running);
        assert_eq!(
            new.usage(wall).0,
            2,
            "the old admission gives back to the shared state"
        );
    }

    #[test]
    fn a_restored_quota_counts_the_calls_still_running_under_the_retired_one() {
        let now = Instant::now();
        let wall = SystemTime::UNIX_EPOCH;
        let text = "rate = 1\nburst = 2\nin_flight = 2";
        let old = limiter(text, now);
        let first = admit(&[&old], 1, now, wall).expect("first");
        let second = admit(&[&old], 1, now, wall).expect("second");
        let retired = old.retire();
        drop(old);
        assert!(retired.is_held(), "the calls in flight hold it");
        let restore = |retired: &Retired| {
            let quota = quota(text).expect("quota");
            Arc::new(Limiter::restore(
                "a",
                Scope::Tenant,
                quota,
                retired,
                now,
                wall,
            ))
        };
        let restored = restore(&retired);
        assert_eq!(restored.usage(wall).0, 2, "both calls count");
        let refused = admit(&[&restored], 1, now, wall).expect_err("two run");
        assert_eq!(
            refused.kind,
            Kind::InFlight,
            "not the bucket: it starts full"
        );
        drop(first);
        let third = admit(&[&restored], 1, now, wall).expect("a place came back");
        drop((restored, second, third));
        assert!(!retired.is_held(), "nothing runs: it may be forgotten");
        let fresh = restore(&retired);
        assert_eq!(fresh.usage(wall).0, 0);
        let _held = admit(&[&fresh], 2, now, wall).expect("a fresh quota, with a full bucket");
    }

    #[test]
    fn a_refusal_is_typed_readable_and_small() {
        let now = Instant::now();
        let wall = SystemTime::UNIX_EPOCH;
        let limiter = Arc::new(Limiter::new(
            &"t".repeat(64),
            Scope::Token,
            quota("rate = 1").expect("quota"),
            None,
            now,
            wall,
        ));
        let _first = admit(&[&limiter], 1, now, wall).expect("first");
        let refused = admit(&[&limiter], 1, now, wall).expect_err("too soon");
        for id in [
            serde_json::json!(7),
            serde_json::json!("x".repeat(128)),
            serde_json::json!("x".repeat(10_000)),
            serde_json::json!({"nested": "x".repeat(10_000)}),
        ] {
            let body = refused.body(Some(&id));
            assert!(body.len() <= MAX_REFUSAL_BYTES, "{} bytes", body.len());
            let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            assert_eq!(json["error"]["code"], QUOTA_ERROR_CODE);
            assert_eq!(json["error"]["data"]["quota"], "rate");
            assert_eq!(json["error"]["data"]["scope"], "token");
            assert_eq!(json["error"]["data"]["retry_after"], 1);
            let message = json["error"]["message"].as_str().expect("message");
            assert!(message.contains("1 calls a second"), "{message}");
            assert!(message.contains("try again in 1 s"), "{message}");
        }
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&refused.body(None)).expect("JSON")["id"],
            serde_json::Value::Null
        );
    }
}
