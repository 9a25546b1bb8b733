//! The exit statuses of `toolcell`, one per kind of outcome, and the words `--help` lists them
//! in.

use std::process::ExitCode;
use toolcell::{FailureKind, ToolResponse};

/// The call failed (the reason on stderr).
pub(crate) const FAILED: u8 = 1;
/// Usage: bad flags or arguments, a file that cannot be read (clap uses 2 too).
pub(crate) const USAGE: u8 = 2;
/// The call was denied (by the policy, a person, or the tool), or a registry denied the
/// credentials.
pub(crate) const DENIED: u8 = 3;
/// The call ran past its deadline, or a registry operation past its limit.
pub(crate) const TIMED_OUT: u8 = 4;
/// The call was cancelled (Ctrl-C, SIGTERM).
pub(crate) const CANCELLED: u8 = 5;
/// The call ran, but its audit record could not be written.
pub(crate) const AUDIT_FAILED: u8 = 6;
/// Not found: no tool of that name (the nearest are suggested), no tools to list, or no such
/// artifact in a registry.
pub(crate) const NOT_FOUND: u8 = 7;
/// A registry could not be reached, or stopped answering.
#[cfg_attr(not(feature = "oci"), allow(dead_code))]
pub(crate) const UNREACHABLE: u8 = 8;

/// The table `toolcell --help` ends with.
pub(crate) const HELP: &str = "\
Exit status:
  0  a result (printed on stdout)
  1  the call failed (the reason on stderr)
  2  usage: bad flags or arguments, a file that cannot be read, a malformed tool reference
  3  the call was denied (the policy, a person, the tool; or a registry refused the credentials)
  4  the call ran past its deadline (or a registry operation past its limit)
  5  the call was cancelled (Ctrl-C, SIGTERM)
  6  the call ran, but its audit record could not be written
  7  not found: no tool of that name (nearest suggested), no tools to list, no such registry
     artifact, not pulled
  8  a registry could not be reached";

/// The exit status for a response: one per kind.
pub(crate) fn status(response: &ToolResponse) -> u8 {
    match response {
        ToolResponse::Result { .. } => 0,
        ToolResponse::Failed {
            kind: FailureKind::UnknownTool,
            ..
        } => NOT_FOUND,
        ToolResponse::Failed { .. } => FAILED,
        ToolResponse::Denied { .. } => DENIED,
        ToolResponse::TimedOut { .. } => TIMED_OUT,
        ToolResponse::Cancelled => CANCELLED,
        _ => FAILED,
    }
}

/// A command this build of toolcell leaves out: say which feature brings it, and exit 2.
pub(crate) fn not_built(what: &str, feature: &str) -> ExitCode {
    eprintln!(
        "toolcell: {what} is not in this build: it is the `{feature}` feature of toolcell-cli \
         (cargo run --release --features {feature} -- ..., or --features full for all)"
    );
    ExitCode::from(USAGE)
}

/// Say why a registry operation failed, and exit with the status its kind has.
#[cfg(feature = "oci")]
pub(crate) fn registry_failed(why: toolcell_oci::OciError) -> ExitCode {
    eprintln!("toolcell: {why}");
    ExitCode::from(registry_status(&why))
}

/// The exit status for a registry failure: one per kind a caller acts on.
#[cfg(feature = "oci")]
fn registry_status(why: &toolcell_oci::OciError) -> u8 {
    use toolcell_oci::OciError;
    match why {
        OciError::Denied { .. } => DENIED,
        OciError::TimedOut { .. } => TIMED_OUT,
        OciError::NotFound { .. } | OciError::NotPulled { .. } => NOT_FOUND,
        OciError::Unreachable { .. } => UNREACHABLE,
        OciError::InvalidReference { .. } => USAGE,
        _ => FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolcell::DenyReason;

    #[test]
    fn every_response_kind_has_its_own_exit_status() {
        let rows = [
            (ToolResponse::text("x"), 0),
            (ToolResponse::failed(FailureKind::Trap, "x"), 1),
            (ToolResponse::failed(FailureKind::OutOfMemory, "x"), 1),
            (ToolResponse::failed(FailureKind::UnknownTool, "x"), 7),
            (
                ToolResponse::Denied {
                    reason: DenyReason::NoGrant,
                },
                3,
            ),
            (ToolResponse::TimedOut { limit_ms: 1 }, 4),
            (ToolResponse::Cancelled, 5),
        ];
        for (response, expected) in rows {
            assert_eq!(status(&response), expected, "{response:?}");
        }
        // 2 is clap's, for usage errors: no response may take it.
        assert_eq!(USAGE, 2);
        for code in 0..=8 {
            assert!(
                HELP.contains(&format!("  {code}  ")),
                "{code} is not in --help"
            );
        }
    }

    /// A reference that cannot be read is a usage error and one the store does not hold is not
    /// found; the other registry failures keep their own statuses.
    #[cfg(feature = "oci")]
    #[test]
    fn every_registry_failure_kind_has_its_status() {
        use toolcell_oci::OciError;
        let (reference, why) = ("oci://r.example/echo:1".to_owned(), "why".to_owned());
        let rows = [
            (
                OciError::InvalidReference {
                    reference: "echo".to_owned(),
                    why: why.clone(),
                },
                USAGE,
            ),
            (
                OciError::NotPulled {
                    reference: reference.clone(),
                    why: why.clone(),
                },
                NOT_FOUND,
            ),
            (
                OciError::NotFound {
                    reference: reference.clone(),
                    why: why.clone(),
                },
                NOT_FOUND,
            ),
            (
                OciError::Unreachable {
                    reference: reference.clone(),
                    why: why.clone(),
                },
                UNREACHABLE,
            ),
            (
                OciError::Invalid {
                    reference: reference.clone(),
                    why: why.clone(),
                },
                FAILED,
            ),
            (
                OciError::Refused {
                    reference,
                    status: 500,
                    why: why.clone(),
                },
                FAILED,
            ),
            (
                OciError::Local {
                    path: "/x/toolcell.lock".to_owned(),
                    why,
                },
                FAILED,
            ),
        ];
        for (error, expected) in rows {
            assert_eq!(registry_status(&error), expected, "{error}");
        }
    }
}
