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
//!
//! The jobs, one module each: a quota's configuration (`config.rs`), what its holder has used
//! (`bucket.rs`), a holder's quota with its state (`limiter.rs`), admitting calls in this
//! process (`admission.rs`), where the use is kept (`ledger.rs`: this process, or the shared
//! store, `shared.rs`, with its `leases.rs`), and the 429 answer (`refusal.rs`).

mod admission;
mod bucket;
mod config;
#[cfg(feature = "state")]
mod leases;
mod ledger;
mod limiter;
mod refusal;
#[cfg(feature = "state")]
mod shared;

pub use admission::{Admission, Reserve, admit, admit_reserving};
// What an admission holds, for the shared store's ledger to make one.
#[cfg(feature = "state")]
use admission::Held;
pub use bucket::utc_day;
pub use config::{
    MAX_BURST, MAX_DAILY_MS, MAX_RATE_PER_SECOND, MIN_RATE_PER_SECOND, Quota, QuotaConfig, Rate,
    Scope,
};
#[cfg(feature = "state")]
pub use leases::Leases;
pub use ledger::{Ledger, NotAdmitted, Usage};
pub use limiter::{Limiter, Retired};
pub use refusal::{Kind, MAX_ECHOED_ID_CHARS, MAX_REFUSAL_BYTES, QUOTA_ERROR_CODE, Refused};

#[cfg(not(feature = "state"))]
/// The leases this replica holds in a shared store (none without the `state` feature).
#[derive(Debug, Default)]
pub struct Leases;

#[cfg(test)]
mod tests {
    use super::bucket::SECONDS_PER_DAY;
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant, SystemTime};

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
