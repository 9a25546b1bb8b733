//! The built-in tools' own logic, tested natively: each tool keeps its pure functions in a
//! `logic.rs` that holds no bindings and no WASI, and this module includes those very files.

#[path = "../../guest-tools/read_file/src/logic.rs"]
mod read_file;

#[path = "../../guest-tools/edit_file/src/logic.rs"]
mod edit_file;

#[path = "../../guest-tools/grep/src/logic.rs"]
mod grep;

#[path = "../../guest-tools/http_fetch/src/logic.rs"]
mod http_fetch;

#[test]
fn read_file_selects_lines_and_says_what_it_left_out() {
    let text = "a\nbb\nccc\ndddd\n";
    // (offset, limit, max_bytes, expected)
    let rows: &[(usize, usize, usize, &str)] = &[
        (0, 10, 1000, "a\nbb\nccc\ndddd\n"),
        (1, 2, 1000, "bb\nccc\n[truncated: showing lines 2-3 of 4]"),
        (0, 10, 5, "a\nbb\n[truncated: showing lines 1-2 of 4]"),
        (3, 10, 1000, "dddd\n[truncated: showing lines 4-4 of 4]"),
        (9, 10, 1000, "[truncated: showing lines 5-4 of 4]"),
        (0, 10, 1, "[truncated: showing lines 1-0 of 4]"),
    ];
    for &(offset, limit, max_bytes, expected) in rows {
        assert_eq!(
            read_file::select(text, offset, limit, max_bytes),
            expected,
            "offset {offset}, limit {limit}, max_bytes {max_bytes}"
        );
    }
    assert_eq!(read_file::select("", 0, 10, 10), "");
}

#[test]
fn edit_file_replaces_only_a_unique_occurrence() {
    assert_eq!(
        edit_file::replace_once("a b c", "b", "B"),
        Ok("a B c".to_owned())
    );
    assert_eq!(edit_file::replace_once("a b c", "x", "B"), Err(0));
    assert_eq!(edit_file::replace_once("b b", "b", "B"), Err(2));
    // Occurrences are counted without overlap, as `str::matches` does.
    assert_eq!(
        edit_file::replace_once("aaa", "aa", "x"),
        Ok("xa".to_owned())
    );
}

#[test]
fn grep_marks_matches_and_context_once_each_in_order() {
    let lines = ["one", "two x", "three", "four x", "five", "six", "seven x"];
    let is_match = |line: &str| line.ends_with(" x");
    let (shown, found, stopped) = grep::mark_lines(&lines, is_match, 1, 10);
    assert_eq!((found, stopped), (3, false));
    assert_eq!(
        grep::render("f", &lines, &shown),
        "f-1-one\nf:2:two x\nf-3-three\nf:4:four x\nf-5-five\nf-6-six\nf:7:seven x\n"
    );
    let (shown, found, stopped) = grep::mark_lines(&lines, is_match, 0, 2);
    assert_eq!((found, stopped), (2, true));
    assert_eq!(grep::render("f", &lines, &shown), "f:2:two x\nf:4:four x\n");
    let (_, found, stopped) = grep::mark_lines(&lines, is_match, 0, 0);
    assert_eq!((found, stopped), (0, true));
}

#[test]
fn http_fetch_parses_urls_and_resolves_redirects() {
    let target = http_fetch::parse("https://example.org:8443/a/b?q=1#frag").expect("parses");
    assert_eq!(
        target,
        http_fetch::Target {
            https: true,
            authority: "example.org:8443".to_owned(),
            path: "/a/b?q=1".to_owned(),
        }
    );
    assert_eq!(http_fetch::parse("http://h").expect("parses").path, "/");
    assert_eq!(
        http_fetch::parse("http://h?x=1").expect("parses").path,
        "/?x=1"
    );
    for bad in ["ftp://h/", "h/path", "http:///path", ""] {
        assert!(http_fetch::parse(bad).is_err(), "{bad:?}");
    }
    let base = "http://h:1/dir/page?x=1";
    for (location, expected) in [
        ("https://other/x", "https://other/x"),
        ("/root", "http://h:1/root"),
        ("sibling", "http://h:1/dir/sibling"),
    ] {
        assert_eq!(
            http_fetch::resolve(base, location).as_deref(),
            Ok(expected),
            "{location}"
        );
    }
}
