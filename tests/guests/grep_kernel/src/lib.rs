//! A compute-heavy kernel shared, as source, by the `compute` guest and the native side of the
//! benchmark, so the two run the same Rust.

/// A deterministic pseudo-random text of `bytes` bytes: words from a small vocabulary,
/// separated by spaces, about ten to a line.
pub fn corpus(seed: u64, bytes: usize) -> String {
    const WORDS: &[&str] = &[
        "tool",
        "call",
        "instance",
        "fresh",
        "sandbox",
        "grant",
        "policy",
        "deadline",
        "memory",
        "result",
        "agent",
        "model",
        "wasm",
        "component",
        "host",
        "guest",
        "needle",
        "haystack",
    ];
    let mut state = seed | 1;
    let mut text = String::with_capacity(bytes + 16);
    let mut on_line = 0;
    while text.len() < bytes {
        // xorshift64*: fast, deterministic, good enough to vary the text.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let pick = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33;
        text.push_str(WORDS[pick as usize % WORDS.len()]);
        on_line += 1;
        if on_line == 10 {
            text.push('\n');
            on_line = 0;
        } else {
            text.push(' ');
        }
    }
    text.truncate(bytes);
    text
}

/// How many lines of `text` contain `needle` (what `grep -c -F` counts). `needle` must not
/// contain a newline.
///
/// It searches the whole text with `memchr::memmem` (SIMD on both x86_64 and wasm `simd128`)
/// and counts each line at its first match, as a real grep does, rather than splitting lines
/// and searching each.
pub fn count_matching_lines(text: &str, needle: &str) -> usize {
    let text = text.as_bytes();
    let mut count = 0;
    let mut line_end = 0;
    for found in memchr::memmem::find_iter(text, needle.as_bytes()) {
        if found < line_end {
            continue;
        }
        count += 1;
        line_end = memchr::memchr(b'\n', &text[found..]).map_or(text.len(), |at| found + at);
    }
    count
}

/// Generate the corpus and count the lines with `needle`: the whole benchmarked job.
pub fn run(seed: u64, bytes: usize, needle: &str) -> usize {
    count_matching_lines(&corpus(seed, bytes), needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_is_deterministic_and_sized() {
        assert_eq!(corpus(7, 1000), corpus(7, 1000));
        assert_eq!(corpus(7, 1000).len(), 1000);
        assert_ne!(corpus(7, 1000), corpus(8, 1000));
        assert_eq!(count_matching_lines("a b\nb c\nc d", "b"), 2);
        assert_eq!(count_matching_lines("b b b\nb", "b"), 2);
        assert_eq!(count_matching_lines("", "b"), 0);
        let text = corpus(9, 100_000);
        let plain = text
            .lines()
            .filter(|line| line.contains("fresh grant"))
            .count();
        assert_eq!(count_matching_lines(&text, "fresh grant"), plain);
    }
}
