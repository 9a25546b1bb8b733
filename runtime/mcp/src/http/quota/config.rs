//! What a quota is: its limits as the file writes them ([`QuotaConfig`]), checked into a
//! [`Quota`], and whose it is ([`Scope`]).

use serde::Deserialize;

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

    /// A quota that sets no limit: never a checked one.
    pub(super) const NONE: Quota = Quota {
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
