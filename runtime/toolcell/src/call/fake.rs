//! The in-process stand-in for the seam, used where no real tools are wanted (a loop under
//! test, the benchmarks' floor): part of the seam's API, as the agent loop defines it.

use crate::call::port::ToolPort;
use crate::call::proto::{DenyReason, FailureKind, ToolRequest, ToolResponse};
use std::sync::Mutex;
use std::time::SystemTime;

/// An in-process port that answers `clock` and `echo` natively and records every request.
///
/// `clock` returns the host's real time; `echo` its `text` argument (without one it fails);
/// any other tool is denied with [`DenyReason::NoGrant`]. It is the floor the benchmarks
/// measure the real port against, and a fake for loops under test.
#[derive(Debug, Default)]
pub struct FakeTools {
    calls: Mutex<Vec<ToolRequest>>,
}

impl FakeTools {
    /// A fake with no calls recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every request received, in order.
    pub fn calls(&self) -> Vec<ToolRequest> {
        crate::sync::lock(&self.calls).clone()
    }
}

impl ToolPort for FakeTools {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        crate::sync::lock(&self.calls).push(request.clone());
        match request.tool.as_str() {
            "clock" => {
                ToolResponse::text(humantime::format_rfc3339_seconds(SystemTime::now()).to_string())
            }
            "echo" => {
                let text = serde_json::from_str::<serde_json::Value>(&request.arguments)
                    .ok()
                    .and_then(|value| value.get("text")?.as_str().map(str::to_owned));
                match text {
                    Some(text) => ToolResponse::text(text),
                    None => ToolResponse::failed(
                        FailureKind::InvalidInput,
                        "echo needs a string argument \"text\"",
                    ),
                }
            }
            _ => ToolResponse::Denied {
                reason: DenyReason::NoGrant,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_answers_echo_and_clock_denies_the_rest_and_records_all() {
        let fake = FakeTools::new();
        let echo = ToolRequest::new("1", "echo", r#"{"text":"héllo"}"#);
        assert_eq!(fake.call(&echo), ToolResponse::text("héllo"));

        let bad = ToolRequest::new("2", "echo", r#"{"txt":"x"}"#);
        assert!(matches!(fake.call(&bad), ToolResponse::Failed { .. }));

        let clock = ToolRequest::new("3", "clock", "{}");
        let ToolResponse::Result { text, .. } = fake.call(&clock) else {
            panic!("clock failed");
        };
        let then = humantime::parse_rfc3339(&text).expect("RFC 3339");
        let skew = SystemTime::now()
            .duration_since(then)
            .unwrap_or_else(|e| e.duration());
        assert!(skew.as_secs() < 5, "clock is {skew:?} off");

        let other = ToolRequest::new("4", "rm", "{}");
        assert_eq!(
            fake.call(&other),
            ToolResponse::Denied {
                reason: DenyReason::NoGrant
            }
        );
        assert_eq!(fake.calls(), vec![echo, bad, clock, other]);
    }
}
