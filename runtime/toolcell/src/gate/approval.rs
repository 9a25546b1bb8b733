//! The approval vocabulary: what a gated call asks a person ([`ApprovalRequest`]), the answers
//! ([`Approval`]), who asks ([`Approver`]), and how a question is shown so that nothing in it
//! can hide what it is ([`shown_to_a_person`]).

use crate::tool::info::CapabilityKind;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

/// A person's answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approval {
    /// Approve this call.
    Once,
    /// Approve this call, and calls like it in this workspace from now on.
    Always,
    /// Deny this call.
    Deny,
    /// No answer came: the person dismissed the question, the client that would have asked
    /// them failed or went away, or the call's deadline passed first. The call is denied
    /// ([`DenyReason::Unanswered`](crate::DenyReason::Unanswered)), and nothing is saved.
    NoAnswer,
    /// The question goes back to the client with the call's answer (MCP 2026-07-28's
    /// `input_required`), and the call is sent again with the person's answer: this run ends
    /// here, as [`Approval::NoAnswer`] ends it, and the next run of the call finds the answer.
    /// A question asked during the run (a tool's first use of a gated client feature) stops
    /// the instance, so the tool goes no further without it.
    Later,
}

/// What a gated call asks a person: exactly what they need to decide, and no secrets (never
/// the arguments: a path as the workspace sees it, a variable's name, a URL's scheme, host and
/// port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The agent whose call asks (over HTTP with tokens, the tenant's agent).
    pub agent: String,
    /// The workspace the call works in, if it has one.
    pub workspace: Option<PathBuf>,
    /// The tool.
    pub tool: String,
    /// The capability, as the policy names it (`filesystem.write`).
    pub capability: String,
    /// The resource, as the workspace sees it (a path relative to it, a variable name).
    pub resource: String,
    /// How long the call may wait for the answer: what is left of its deadline. An approver
    /// that asks someone remote (an MCP client) answers [`Approval::NoAnswer`] once it passes;
    /// the terminal prompt, where the person who started the call sits, waits for them. Any
    /// wait ends when the call is stopped.
    pub timeout: Duration,
}

impl ApprovalRequest {
    /// Whether `other` asks the same question (the same agent, workspace, tool, capability and
    /// resource), however long either may wait.
    pub fn same_question(&self, other: &ApprovalRequest) -> bool {
        self.agent == other.agent
            && self.workspace == other.workspace
            && self.tool == other.tool
            && self.capability == other.capability
            && self.resource == other.resource
    }
}

/// The question, in the words every approver shows (the terminal prompt, an MCP client's
/// elicitation): `agent A: tool T wants filesystem.write on "notes.txt"`. The agent and the
/// resource are quoted with every character a person could not see escaped
/// ([`shown_to_a_person`]).
impl std::fmt::Display for ApprovalRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "agent {}: {} wants {} on {}",
            shown_to_a_person(&self.agent, false),
            self.tool,
            self.capability,
            shown_to_a_person(&self.resource, true)
        )
    }
}

/// A character that prints as nothing or as blank space (non-ASCII spaces, fillers,
/// zero-width and invisible operators, bidirectional controls, tags): what can hide text.
fn invisible(c: char) -> bool {
    (c.is_whitespace() && !c.is_ascii())
        || matches!(
            c,
            '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' | '\u{2800}' | '\u{180E}'
                | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202F}' | '\u{205F}'..='\u{206F}'
                | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}'
        )
}

/// One line of a guest's output as a person should read it on a terminal: as written, but
/// control and [invisible](invisible) characters (tabs aside) written `\u{...}`, so that it
/// can neither drive the terminal nor hide what it says.
pub(crate) fn escaped_line(line: &str) -> String {
    let mut shown = String::with_capacity(line.len());
    for c in line.chars() {
        if (c.is_control() && c != '\t') || invisible(c) {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    shown
}

/// A tool's text as a person should read it on a terminal: as written, lines and tabs kept, but
/// every other control character (escape sequences that set the window's title, clear the
/// screen or write the clipboard, a carriage return that overwrites a line) and every
/// invisible or reordering character written `\u{...}`, so a tool can neither
/// drive the terminal nor make its text read as something else.
pub fn shown_on_a_terminal(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        if (c.is_control() && c != '\t' && c != '\n') || invisible(c) {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    shown
}

/// `text` as a person should read it in a question: what Rust's `{:?}` escapes (controls,
/// quotes, bidirectional overrides, unassigned and unprintable characters), and also the
/// characters that print as nothing or as blank space (non-ASCII spaces, fillers, zero-width
/// and invisible operators), written `\u{...}`, so a file name cannot hide what it is. Quoted
/// if `quoted`, or if it is not plain printable ASCII without spaces.
pub fn shown_to_a_person(text: &str, quoted: bool) -> String {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\');
    if plain && !quoted {
        return text.to_owned();
    }
    let mut shown = String::with_capacity(text.len() + 2);
    shown.push('"');
    for c in text.chars() {
        if invisible(c) {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            shown.extend(c.escape_debug());
        }
    }
    shown.push('"');
    shown
}

/// Asks a person. The CLI's terminal prompt is one, an MCP client's elicitation another
/// (`toolcell-mcp`); a headless run has none.
///
/// Implement [`approve`](Approver::approve) for an approver that answers on the spot (it may
/// block its thread, as a terminal prompt does), or [`ask`](Approver::ask) for one that waits
/// on something else (a request to a remote client): the pipeline awaits `ask`, whose default
/// calls `approve`.
pub trait Approver: Send + Sync + std::fmt::Debug {
    /// One combined question with exactly three answers (or none). The default has no one to
    /// ask: [`Approval::NoAnswer`].
    fn approve(&self, request: &ApprovalRequest) -> Approval {
        let _ = request;
        Approval::NoAnswer
    }

    /// [`approve`](Approver::approve), awaited.
    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(std::future::ready(self.approve(request)))
    }
}

/// The answers a call has been given so far, one per question asked.
pub(crate) type Answers = Vec<(ApprovalRequest, Approval)>;

/// The name a capability has in policies and prompts.
pub fn capability_name(kind: CapabilityKind) -> &'static str {
    kind.name()
}

/// An approver for tests and embedders: answers every request the same way, and remembers
/// what it was asked.
#[derive(Debug)]
pub struct FixedApprover {
    answer: Approval,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl FixedApprover {
    /// An approver that always answers `answer`.
    pub fn new(answer: Approval) -> Self {
        FixedApprover {
            answer,
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Every request it was asked, in order.
    pub fn asked(&self) -> Vec<ApprovalRequest> {
        crate::sync::lock(&self.asked).clone()
    }
}

impl Approver for FixedApprover {
    fn approve(&self, request: &ApprovalRequest) -> Approval {
        crate::sync::lock(&self.asked).push(request.clone());
        self.answer
    }
}
