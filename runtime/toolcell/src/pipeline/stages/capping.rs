//! Stage 5, cap: every text a model reads from a call cut to the runtime's cap, marker
//! included.

use crate::call::cap::cap_text;
use crate::call::proto::{DenyReason, ToolResponse};
use crate::pipeline::Runtime;

impl Runtime {
    /// Stage 5: every text in the response cut to the cap, marker included: the result, a
    /// failure's message, every free text of a denial (a tool's own refusal, a resource named
    /// by the arguments, the reason).
    pub(super) fn cap(&self, response: ToolResponse) -> ToolResponse {
        let fit = |text: String| self.fit(text);
        match response {
            ToolResponse::Result {
                text,
                class,
                untrusted,
                truncated,
            } => {
                let (text, cut) = if text.len() <= self.cap {
                    (text, false)
                } else {
                    cap_text(&text, self.cap)
                };
                ToolResponse::Result {
                    text,
                    class,
                    untrusted,
                    truncated: truncated || cut,
                }
            }
            ToolResponse::Failed { kind, message } => ToolResponse::Failed {
                kind,
                message: fit(message),
            },
            ToolResponse::Denied { reason } => ToolResponse::Denied {
                reason: match reason {
                    DenyReason::Tool { message } => DenyReason::Tool {
                        message: fit(message),
                    },
                    DenyReason::ApprovalRequired {
                        capability,
                        resource,
                    } => DenyReason::ApprovalRequired {
                        capability,
                        resource: fit(resource),
                    },
                    DenyReason::ByPerson {
                        capability,
                        resource,
                    } => DenyReason::ByPerson {
                        capability,
                        resource: fit(resource),
                    },
                    DenyReason::Unanswered {
                        capability,
                        resource,
                    } => DenyReason::Unanswered {
                        capability,
                        resource: fit(resource),
                    },
                    DenyReason::Capability {
                        capability,
                        resource,
                        why,
                    } => DenyReason::Capability {
                        capability,
                        resource: fit(resource),
                        why: fit(why),
                    },
                    DenyReason::NoGrant => DenyReason::NoGrant,
                    DenyReason::ClientLacks { capability } => {
                        DenyReason::ClientLacks { capability }
                    }
                },
            },
            other => other,
        }
    }

    /// The text a model reads for `response` (its result, or one line saying what went
    /// wrong), at most the cap, marker included, whatever the outcome. Every front end shows
    /// this.
    pub fn model_text(&self, response: &ToolResponse) -> String {
        self.fit(response.model_text())
    }

    /// `text` within the cap, marker included (untouched, not copied, when it fits).
    pub(super) fn fit(&self, text: String) -> String {
        if text.len() <= self.cap {
            text
        } else {
            cap_text(&text, self.cap).0
        }
    }

    /// The cap on what a model reads from one call, in bytes.
    pub fn cap_bytes(&self) -> usize {
        self.cap
    }
}
