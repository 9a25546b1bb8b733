//! The nearest names to one that does not exist: "did you mean read_file?" for a tool name a
//! person or a model misspelled, and for a property a schema does not know.
//!
//! Written here rather than taken from a crate: it is one bounded edit distance (thirty lines),
//! and the bounds (how far a name may be from what was typed, how many are offered, how much of
//! the typed name is echoed) are ours to choose and to test.

/// At most this many names are suggested: enough to catch a typo, few enough that a model
/// cannot use an unknown name to list the tools (`tools/list` is the way to list them).
pub const MAX_SUGGESTIONS: usize = 3;

/// A typed name is echoed in a message up to this many characters (then `…`): a name is a
/// caller's text, and a caller may send a megabyte of it. Tool names are at most
/// [`MAX_TOOL_NAME_CHARS`](crate::tool::info::MAX_TOOL_NAME_CHARS) characters, so a real one
/// always shows whole.
pub const MAX_ECHOED_NAME_CHARS: usize = 80;

/// A name is compared with the candidates only up to this many characters; a longer one is a
/// typo of nothing. It bounds the work of one comparison to 128 × 128 steps.
const MAX_COMPARED_CHARS: usize = 128;

/// The candidates nearest to `typed`, nearest first (ties in the candidates' order), at most
/// [`MAX_SUGGESTIONS`]. A candidate is near when it differs from `typed` by at most a third of
/// its length in edits (one edit at least, three at most), ignoring case; or when one of the
/// two contains the other and the shorter has three characters or more. `typed` itself is
/// never suggested.
pub fn nearest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let typed_chars: Vec<char> = typed.to_lowercase().chars().collect();
    if typed_chars.is_empty() || typed_chars.len() > MAX_COMPARED_CHARS {
        return Vec::new();
    }
    let typed_lower: String = typed_chars.iter().collect();
    let mut near: Vec<(usize, usize, &str)> = Vec::new();
    for (order, candidate) in candidates.into_iter().enumerate() {
        if candidate == typed || candidate.chars().count() > MAX_COMPARED_CHARS {
            continue;
        }
        let lower = candidate.to_lowercase();
        let chars: Vec<char> = lower.chars().collect();
        let allowed = (chars.len().max(typed_chars.len()) / 3).clamp(1, 3);
        let distance = edit_distance(&typed_chars, &chars);
        let contains = typed_chars.len().min(chars.len()) >= 3
            && (lower.contains(&typed_lower) || typed_lower.contains(&lower));
        if distance <= allowed || contains {
            near.push((distance, order, candidate));
        }
    }
    near.sort_unstable();
    near.into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, _, name)| name)
        .collect()
}

/// `name` as a message quotes it: escaped, and cut to `MAX_ECHOED_NAME_CHARS` characters.
pub fn echoed(name: &str) -> String {
    match name.char_indices().nth(MAX_ECHOED_NAME_CHARS) {
        Some((end, _)) => format!("{:?}…", &name[..end]),
        None => format!("{name:?}"),
    }
}

/// `"; did you mean read_file?"`, `"; did you mean a, b or c?"`, or nothing.
pub fn did_you_mean(suggestions: &[&str]) -> String {
    match suggestions {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        [first @ .., last] => format!("; did you mean {} or {last}?", first.join(", ")),
    }
}

/// The Levenshtein distance of `a` and `b` (insertions, deletions, substitutions; and a swap
/// of two neighbours counts as one, the commonest typo).
fn edit_distance(a: &[char], b: &[char]) -> usize {
    // Three rows of the table: two back (for swaps), one back, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            let mut best = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
            if i > 0 && j > 0 && ca == b[j - 1] && a[i - 1] == cb {
                best = best.min(before[j - 1] + 1);
            }
            current[j + 1] = best;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: [&str; 6] = [
        "read_file",
        "write_file",
        "list_dir",
        "echo",
        "fetch",
        "clock",
    ];

    #[test]
    fn a_typo_finds_the_tool_it_meant() {
        let rows: &[(&str, &[&str])] = &[
            ("reed_file", &["read_file"]),
            ("raed_file", &["read_file"]),
            ("READ_FILE", &["read_file"]),
            ("read", &["read_file"]),
            ("readfile", &["read_file"]),
            ("write", &["write_file"]),
            ("ecko", &["echo"]),
            ("clcok", &["clock"]),
            ("_file", &["read_file", "write_file"]),
            ("zzzzzz", &[]),
            ("", &[]),
            ("x", &[]),
        ];
        for (typed, expected) in rows {
            assert_eq!(&nearest(typed, TOOLS)[..], *expected, "{typed}");
        }
    }

    #[test]
    fn at_most_a_few_names_are_offered_and_never_the_typed_one() {
        let many: Vec<String> = (0..50).map(|i| format!("tool_{i:02}")).collect();
        let found = nearest("tool_0", many.iter().map(String::as_str));
        assert_eq!(found.len(), MAX_SUGGESTIONS);
        // Nearest first: one edit away (tool_00..tool_09) before anything further.
        assert!(
            found.iter().all(|name| name.starts_with("tool_0")),
            "{found:?}"
        );
        assert!(nearest("echo", TOOLS).is_empty());
    }

    #[test]
    fn a_huge_name_is_compared_with_nothing_and_echoed_cut() {
        let huge = "a".repeat(1 << 20);
        assert!(nearest(&huge, TOOLS).is_empty());
        let shown = echoed(&huge);
        assert!(
            shown.chars().count() <= MAX_ECHOED_NAME_CHARS + 3,
            "{}",
            shown.len()
        );
        assert!(shown.ends_with('…'));
        // Control characters are escaped, not echoed raw into a terminal or a log.
        assert_eq!(echoed("a\u{1b}[2Jb\n"), r#""a\u{1b}[2Jb\n""#);
    }

    #[test]
    fn suggestions_read_as_a_sentence() {
        assert_eq!(did_you_mean(&[]), "");
        assert_eq!(did_you_mean(&["a"]), "; did you mean a?");
        assert_eq!(did_you_mean(&["a", "b"]), "; did you mean a or b?");
        assert_eq!(did_you_mean(&["a", "b", "c"]), "; did you mean a, b or c?");
    }

    #[test]
    fn swaps_count_once() {
        let d = |a: &str, b: &str| {
            edit_distance(
                &a.chars().collect::<Vec<_>>(),
                &b.chars().collect::<Vec<_>>(),
            )
        };
        assert_eq!(d("ab", "ba"), 1);
        assert_eq!(d("kitten", "sitting"), 3);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("abc", ""), 3);
        assert_eq!(d("same", "same"), 0);
    }
}
