//! The 429 answer: which limit refused a call ([`Kind`]), whose, when to try again, as a
//! model reads it and as a JSON-RPC error of at most [`MAX_REFUSAL_BYTES`].

use super::{Quota, Scope};

/// The JSON-RPC error code of a quota refusal: in the range JSON-RPC leaves to servers, and
/// ending in the HTTP status it comes with.
pub const QUOTA_ERROR_CODE: i64 = -32029;

/// The longest refusal body: the message and its data, with a tenant name of at most 64
/// characters and a request id cut to [`MAX_ECHOED_ID_CHARS`], always fit.
pub const MAX_REFUSAL_BYTES: usize = 1024;

/// The longest request id a refusal echoes; a longer string id is answered with `null`, so a
/// caller cannot make a refusal large.
pub const MAX_ECHOED_ID_CHARS: usize = 128;

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
    pub(super) quota: Quota,
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
