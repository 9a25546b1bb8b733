//! What `read_file` returns, as a pure function: the guest runs it, and the host's tests
//! include this file (`#[path]`) and test it natively.

/// Lines `offset..offset + limit` of `text`, within `max_bytes` (whole lines only), and a last
/// line that says what was left out, if anything was.
pub fn select(text: &str, offset: usize, limit: usize, max_bytes: usize) -> String {
    let total = text.lines().count();
    let mut out = String::new();
    let mut shown = 0;
    for line in text.lines().skip(offset).take(limit) {
        if out.len() + line.len() + 1 > max_bytes {
            break;
        }
        out.push_str(line);
        out.push('\n');
        shown += 1;
    }
    let first = offset.min(total);
    if first + shown < total || first > 0 {
        out.push_str(&format!(
            "[truncated: showing lines {}-{} of {total}]",
            first + 1,
            first + shown
        ));
    }
    out
}
