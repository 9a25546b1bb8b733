//! How `grep` picks and prints lines, as pure functions: the guest runs them, and the host's
//! tests include this file (`#[path]`) and test them natively.

use std::fmt::Write as _;

/// Which lines of a file to show: `Some(true)` for a match, `Some(false)` for context, `None`
/// for neither. Stops after `budget` matches. Returns the marks, how many matches were marked,
/// and whether it stopped because the budget ran out.
pub fn mark_lines(
    lines: &[&str],
    is_match: impl Fn(&str) -> bool,
    context: usize,
    budget: usize,
) -> (Vec<Option<bool>>, usize, bool) {
    let mut shown = vec![None; lines.len()];
    let mut found = 0;
    for (index, line) in lines.iter().enumerate() {
        if !is_match(line) {
            continue;
        }
        if found == budget {
            return (shown, found, true);
        }
        found += 1;
        let last = (index + context).min(lines.len() - 1);
        for slot in shown
            .iter_mut()
            .take(last + 1)
            .skip(index.saturating_sub(context))
        {
            slot.get_or_insert(false);
        }
        shown[index] = Some(true);
    }
    (shown, found, false)
}

/// The marked lines of `file`, once each and in order: `file:line:text` for a match,
/// `file-line-text` for context.
pub fn render(file: &str, lines: &[&str], shown: &[Option<bool>]) -> String {
    let mut out = String::new();
    for (index, mark) in shown.iter().enumerate() {
        let separator = match mark {
            Some(true) => ':',
            Some(false) => '-',
            None => continue,
        };
        let _ = writeln!(
            out,
            "{file}{separator}{}{separator}{}",
            index + 1,
            lines[index]
        );
    }
    out
}
