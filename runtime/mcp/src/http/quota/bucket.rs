//! What a quota's holder has used: its token bucket, its calls in flight and what they
//! reserve, and the UTC day's use, all behind one lock.

use super::Rate;
use std::time::{Duration, Instant, SystemTime};

/// Seconds in a UTC day (no leap seconds: UNIX time has none).
pub(super) const SECONDS_PER_DAY: u64 = 86_400;

/// What a quota's holder has used: kept across reloads of the file.
#[derive(Debug)]
pub(super) struct State {
    /// Calls the bucket holds now (fractions accumulate as time passes).
    pub(super) bucket: f64,
    /// When `bucket` was last brought up to date.
    pub(super) refilled: Instant,
    /// Calls admitted and not yet ended.
    pub(super) in_flight: u32,
    /// What the calls admitted and not yet ended may still use of a daily time budget: each
    /// reserves its deadline when admitted, and gives it back when it ends (and is charged
    /// what it used).
    pub(super) reserved_micros: u64,
    /// The same for a daily fuel budget: each call reserves its fuel limit.
    pub(super) reserved_fuel: u64,
    /// The UTC day (days since 1970-01-01) `used_*` count for.
    pub(super) day: u64,
    pub(super) used_micros: u64,
    pub(super) used_fuel: u64,
}

impl State {
    /// A holder that has used nothing: a full bucket (of `burst`), on the day `day`.
    pub(super) fn new(burst: f64, now: Instant, day: u64) -> State {
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
    pub(super) fn refill(&mut self, rate: Rate, now: Instant) {
        let since = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.bucket = (self.bucket + since * rate.per_second).min(f64::from(rate.burst));
        self.refilled = now;
    }

    /// Start the day `day` afresh if the use counted is an earlier day's.
    pub(super) fn roll(&mut self, day: u64) {
        if day != self.day {
            self.day = day;
            self.used_micros = 0;
            self.used_fuel = 0;
        }
    }
}

/// How long until the bucket holds `calls` calls again, in whole seconds (at least 1).
pub(super) fn rate_retry_after(bucket: f64, calls: u32, rate: Rate) -> u64 {
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
