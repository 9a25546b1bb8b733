//! The name a typed component's function is served as: the ecosystem's rule, so a tool keeps
//! the name other runtimes gave it.
//!
//! A function the world exports itself keeps its name (`fetch` is `fetch`,
//! `list-directory` is `list-directory`). A function of an exported interface (or a nested
//! instance) is named by the path to it: each part (`local:time-server/time`,
//! `get-current-time`) lower-cased, every character but `a-z`, `0-9`, `-` and `_` (so `:`,
//! `/`, `.`, `@`) made `_`, the parts joined by `_`: `local_time-server_time_get-current-time`,
//! `wasi_http_handler_0_2_0_handle`. A name longer than a tool name may be
//! ([`MAX_TOOL_NAME_CHARS`](crate::limits::MAX_TOOL_NAME_CHARS)) keeps its first characters and
//! ends in `-` and eight hex digits of its full form's SHA-256, so that two long names stay two.

use crate::tool::info::MAX_TOOL_NAME_CHARS;
use sha2::{Digest as _, Sha256};

/// How many hex digits of the full name's digest end a shortened name.
const DIGEST_CHARS: usize = 8;

/// The tool name of the function at `path` (its instances' export names, then its own).
pub(crate) fn tool_name(path: &[String]) -> String {
    let full = path
        .iter()
        .map(|part| {
            part.chars()
                .map(|c| {
                    let c = c.to_ascii_lowercase();
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("_");
    if full.chars().count() <= MAX_TOOL_NAME_CHARS {
        return full;
    }
    let digest = crate::digest::hex(&Sha256::digest(full.as_bytes()));
    let keep = MAX_TOOL_NAME_CHARS - DIGEST_CHARS - 1;
    format!("{}-{}", &full[..keep], &digest[..DIGEST_CHARS])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(path: &[&str]) -> String {
        tool_name(&path.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn names_follow_the_ecosystems_rule() {
        assert_eq!(name(&["fetch"]), "fetch");
        assert_eq!(name(&["list-directory"]), "list-directory");
        assert_eq!(
            name(&["local:time-server/time", "get-current-time"]),
            "local_time-server_time_get-current-time"
        );
        assert_eq!(name(&["a:b/c@0.1.0", "f"]), "a_b_c_0_1_0_f");
        let long = name(&[
            "example:a-very-long-package-name/with-a-long-interface@1.2.3",
            "and-a-long-function-name",
        ]);
        assert_eq!(long.chars().count(), MAX_TOOL_NAME_CHARS);
        assert!(crate::tool::info::check_tool_name(&long).is_ok(), "{long}");
        let other = name(&[
            "example:a-very-long-package-name/with-a-long-interface@1.2.3",
            "and-a-long-function-name2",
        ]);
        assert_ne!(long, other, "two long names stay two");
    }
}
