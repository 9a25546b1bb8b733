//! `edit_file`'s replacement rule, as a pure function: the guest runs it, and the host's tests
//! include this file (`#[path]`) and test it natively.

/// `text` with its one occurrence of `old` replaced, or how many occurrences there are.
pub fn replace_once(text: &str, old: &str, new: &str) -> Result<String, usize> {
    let count = text.matches(old).count();
    if count != 1 {
        return Err(count);
    }
    Ok(text.replacen(old, new, 1))
}
