//! The result cap: the last thing between a tool's text and the model's context window.

/// Appended to a result that [`cap_result`] cut, so the model knows there was more.
pub const TRUNCATION_MARKER: &str = "\n[truncated]";

/// Cuts `text` to at most `cap` bytes on a character boundary and appends
/// [`TRUNCATION_MARKER`] if it cut. Returns the text and whether it cut.
///
/// The cap bounds the tool's text, not the marker: a cut result is at most
/// `cap + TRUNCATION_MARKER.len()` bytes. A text exactly `cap` bytes long is not cut.
pub fn cap_result(text: &str, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text.to_owned(), false);
    }
    let cut = text.floor_char_boundary(cap);
    let mut capped = String::with_capacity(cut + TRUNCATION_MARKER.len());
    capped.push_str(&text[..cut]);
    capped.push_str(TRUNCATION_MARKER);
    (capped, true)
}

/// Cuts `text` so that it is at most `cap` bytes **with** the marker: the pipeline's hard
/// bound on every text a model reads (the seam's [`cap_result`] bounds the tool's text and adds
/// the marker beyond it). A text of at most `cap` bytes is untouched; a longer one keeps what
/// fits before [`TRUNCATION_MARKER`], cut on a character boundary; a cap shorter than the
/// marker keeps as much of the marker as fits. Returns the text and whether it cut.
pub fn cap_text(text: &str, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text.to_owned(), false);
    }
    let Some(room) = cap.checked_sub(TRUNCATION_MARKER.len()) else {
        return (TRUNCATION_MARKER[..cap].to_owned(), true);
    };
    let cut = text.floor_char_boundary(room);
    let mut capped = String::with_capacity(cut + TRUNCATION_MARKER.len());
    capped.push_str(&text[..cut]);
    capped.push_str(TRUNCATION_MARKER);
    (capped, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hard_cap_counts_the_marker() {
        let marker = TRUNCATION_MARKER.len();
        // (text, cap, expected text, cut?)
        let rows: &[(&str, usize, &str, bool)] = &[
            ("", 0, "", false),
            ("abc", 3, "abc", false),
            ("abc", 0, "", true),
            ("abc", 2, "\n[", true),
            ("abcdefghijklmnop", marker + 2, "ab\n[truncated]", true),
            ("abcdefghijklmnop", marker, "\n[truncated]", true),
            // "é" is 2 bytes: a cut inside it falls back to before it.
            ("héééééééééééééé", marker + 2, "h\n[truncated]", true),
        ];
        for &(text, cap, expected, cut) in rows {
            let (capped, did_cut) = cap_text(text, cap);
            assert_eq!(
                (capped.as_str(), did_cut),
                (expected, cut),
                "{text:?} at {cap}"
            );
            assert!(
                capped.len() <= cap.max(text.len().min(cap)),
                "{text:?} at {cap}"
            );
        }
        for cap in 0..40 {
            let (capped, _) = cap_text("a longer text than most caps here, héé", cap);
            assert!(capped.len() <= cap, "{cap}: {capped:?}");
        }
    }

    #[test]
    fn every_edge_of_the_cap() {
        // (text, cap, expected text, cut?)
        let rows: &[(&str, usize, &str, bool)] = &[
            ("", 0, "", false),
            ("", 5, "", false),
            ("abc", 0, "\n[truncated]", true),
            ("abc", 2, "ab\n[truncated]", true),
            // Exactly `cap` long: untouched.
            ("abc", 3, "abc", false),
            ("abc", 4, "abc", false),
            // "é" is 2 bytes (0xC3 0xA9): a cut inside it falls back to before it.
            ("héllo", 1, "h\n[truncated]", true),
            ("héllo", 2, "h\n[truncated]", true),
            ("héllo", 3, "hé\n[truncated]", true),
            ("héllo", 6, "héllo", false),
            // A 4-byte character at the cut, at every offset inside it.
            ("a😀b", 1, "a\n[truncated]", true),
            ("a😀b", 2, "a\n[truncated]", true),
            ("a😀b", 4, "a\n[truncated]", true),
            ("a😀b", 5, "a😀\n[truncated]", true),
            ("😀", 3, "\n[truncated]", true),
            ("😀", 4, "😀", false),
        ];
        for &(text, cap, expected, cut) in rows {
            assert_eq!(
                cap_result(text, cap),
                (expected.to_owned(), cut),
                "cap_result({text:?}, {cap})"
            );
        }
    }

    #[test]
    fn a_cut_text_keeps_at_most_cap_bytes_of_the_original() {
        let text = "ü".repeat(1000);
        for cap in 0..50 {
            let (capped, cut) = cap_result(&text, cap);
            assert!(cut);
            let kept = capped.strip_suffix(TRUNCATION_MARKER).expect("marker");
            assert!(kept.len() <= cap && cap - kept.len() <= 1, "cap {cap}");
            assert!(text.starts_with(kept));
        }
    }
}
