//! Attacks on lazy tools and hot reload (first made by a hostile review): each test is one
//! attack on the index, the file identity, the reload or the code budget. A test that passes is
//! an attack that failed. The six that worked at first (phantom resident bytes from refused or
//! duplicate tools, a FIFO or a huge file at the index path, non-UTF-8 names taken for each
//! other) and the name takeover at reload were mended and their tests now pass.

use crate::lazy::{Rig, answer, numbered_guest, sha256};
use crate::support::result_text;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcell::{Policy, Runtime, ToolPort as _, ToolRequest, ToolResponse};

/// [`Runtime::reload_if_changed`], from synchronous code.
fn reload_if_changed(runtime: &Runtime) -> Option<toolcell::Reloaded> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("executor")
        .block_on(runtime.reload_if_changed())
        .expect("reload")
}

fn pin_policy(number: u16, bytes: &[u8]) -> Policy {
    Policy::from_toml(&format!(
        "[tools.numbered_{number:03}]\nsha256 = \"{}\"\n",
        sha256(bytes)
    ))
    .expect("policy")
}

/// The size of one numbered tool's resident code, as the runtime counts it.
fn one_tool_code_bytes(rig: &Rig) -> usize {
    // Warm first: a cold start compiles and keeps every tool's code.
    drop(rig.builder().build().expect("runtime"));
    let runtime = rig.builder().build().expect("runtime");
    assert_eq!(runtime.resident_code_bytes(), 0);
    let name = runtime.registry().entries()[0].schema.name.clone();
    assert_eq!(
        result_text(answer(&runtime, &name, "{}")).len(),
        "version-AAAA".len()
    );
    let bytes = runtime.resident_code_bytes();
    assert!(bytes > 0);
    bytes
}

/// A replacement refused at reload (its pin broken) was compiled and admitted under the code
/// budget before the pin was checked; dropped, its bytes stay counted as resident for ever.
#[test]
fn a_refused_replacement_leaves_no_phantom_resident_code() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    let pinned = rig.put(1, "AAAA");
    let one = one_tool_code_bytes(&rig);
    // A warm start: nothing resident.
    let runtime = rig
        .builder()
        .policy(pin_policy(1, &pinned))
        .build()
        .expect("runtime");
    assert_eq!(runtime.resident_code_bytes(), 0);
    for (round, version) in ["BBBB", "CCCC", "DDDD"].iter().enumerate() {
        rig.put(1, version);
        let refused = runtime.reload_blocking().expect("reload");
        assert!(!refused.changed(), "{refused:?}");
        assert!(
            runtime.resident_code_bytes() < one,
            "after {} refused replacements, {} bytes are counted resident with no tool's code \
             in memory (one tool's is {one})",
            round + 1,
            runtime.resident_code_bytes()
        );
    }
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-AAAA"
    );
}

/// Two files claiming one name: the second is compiled and admitted, then left out of the
/// catalog; its bytes stay counted.
#[test]
fn a_duplicate_name_leaves_no_phantom_resident_code() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    let one = one_tool_code_bytes(&rig);
    std::fs::remove_dir_all(&rig.cache).expect("cold cache");
    // The same name from a second file, other bytes: a cold start compiles and admits both.
    rig.put_as("zz_impostor.wasm", 1, "BBBB");
    let runtime = rig.builder().build().expect("runtime");
    assert!(
        runtime
            .load_errors()
            .iter()
            .any(|error| error.message.contains("already loaded")),
        "{:?}",
        runtime.load_errors()
    );
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-AAAA",
        "the first file by name wins"
    );
    assert!(
        runtime.resident_code_bytes() < 2 * one,
        "{} bytes counted resident for one tool of {one}",
        runtime.resident_code_bytes()
    );
}

/// The phantom bytes are not only a wrong number: past the budget, every admission evicts the
/// code of every other tool, so each call reads its code from the cache again.
#[test]
fn phantom_code_bytes_do_not_make_the_budget_thrash() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    let pinned = rig.put(1, "AAAA");
    rig.put(2, "AAAA");
    let one = one_tool_code_bytes(&rig);
    let runtime = rig
        .builder()
        .policy(pin_policy(1, &pinned))
        // Room for three tools' code.
        .code_memory_budget(3 * one + one / 2)
        .build()
        .expect("runtime");
    for version in ["BBBB", "CCCC", "DDDD"] {
        rig.put(1, version);
        runtime.reload_blocking().expect("reload");
    }
    let hits = runtime.cache_stats().hits;
    for _ in 0..3 {
        for tool in ["numbered_001", "numbered_002"] {
            assert_eq!(result_text(answer(&runtime, tool, "{}")), "version-AAAA");
        }
    }
    assert_eq!(
        runtime.cache_stats().hits - hits,
        2,
        "two tools fit the budget: each is read from the cache once, not on every call"
    );
}

/// An index renamed into the place of another directory's (same engine, same key) is not
/// believed: its MAC binds its directory.
#[test]
fn an_index_swapped_between_directories_is_not_believed() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    let other = rig.temp.path().join("other");
    std::fs::create_dir(&other).expect("other dir");
    rig.put(1, "AAAA");
    // The other directory's file has the same name, and another tool's bytes.
    std::fs::write(other.join("numbered_001.wasm"), numbered_guest(2, "BBBB")).expect("write");
    let build = || rig.builder().tools_dir(&other).build().expect("runtime");
    drop(build());
    let indexes = rig.index_files();
    assert_eq!(indexes.len(), 2, "{indexes:?}");
    let (first, second) = (
        std::fs::read(&indexes[0]).expect("read"),
        std::fs::read(&indexes[1]).expect("read"),
    );
    std::fs::write(&indexes[0], &second).expect("swap");
    std::fs::write(&indexes[1], &first).expect("swap");
    let runtime = build();
    assert_eq!(
        runtime.cache_stats().indexed,
        0,
        "neither index was believed"
    );
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-AAAA"
    );
    assert_eq!(
        result_text(answer(&runtime, "numbered_002", "{}")),
        "version-BBBB"
    );
}

/// A file rewritten in place with bytes of the same size, its modification time set back: the
/// change time gives it away, to a reload and to the next start.
#[test]
fn a_same_size_rewrite_with_its_mtime_set_back_is_noticed() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    let path = rig.tools.join("numbered_001.wasm");
    let runtime = rig.builder().build().expect("runtime");
    let before = std::fs::metadata(&path).expect("meta");
    std::thread::sleep(Duration::from_millis(20));
    // In place: same inode, same size, same mtime afterwards.
    std::fs::write(&path, numbered_guest(1, "BBBB")).expect("rewrite");
    let file = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open");
    file.set_modified(before.modified().expect("mtime"))
        .expect("set mtime back");
    drop(file);
    let after = std::fs::metadata(&path).expect("meta");
    {
        use std::os::unix::fs::MetadataExt as _;
        assert_eq!(
            (
                before.ino(),
                before.len(),
                before.mtime(),
                before.mtime_nsec()
            ),
            (after.ino(), after.len(), after.mtime(), after.mtime_nsec())
        );
    }
    let reloaded = reload_if_changed(&runtime).expect("the change was seen");
    assert_eq!(reloaded.replaced, ["numbered_001"]);
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-BBBB"
    );
    drop(runtime);
    let fresh = rig.builder().build().expect("runtime");
    assert_eq!(
        result_text(answer(&fresh, "numbered_001", "{}")),
        "version-BBBB"
    );
}

/// Another tool's file renamed over a tool's (the index knows both): the file is described
/// from its bytes, never as the one whose path it took.
#[test]
fn a_file_renamed_over_another_is_not_taken_for_it() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    rig.put(2, "BBBB");
    drop(rig.builder().build().expect("runtime"));
    std::fs::rename(
        rig.tools.join("numbered_002.wasm"),
        rig.tools.join("numbered_001.wasm"),
    )
    .expect("rename over");
    let runtime = rig.builder().build().expect("runtime");
    assert!(runtime.info("numbered_001").is_none());
    assert_eq!(
        result_text(answer(&runtime, "numbered_002", "{}")),
        "version-BBBB"
    );
    assert_eq!(
        runtime.source("numbered_002").as_deref(),
        Some(rig.tools.join("numbered_001.wasm").to_str().expect("utf-8"))
    );
}

/// A FIFO at the index's path (anyone who can write the cache directory can make one) does
/// not hang a start: the index is only a hint.
#[test]
fn a_fifo_at_the_index_path_does_not_hang_a_start() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    drop(rig.builder().build().expect("runtime"));
    let index = rig.index_files().pop().expect("an index");
    std::fs::remove_file(&index).expect("remove");
    make_fifo(&index);
    let started = Instant::now();
    let (done, finished) = std::sync::mpsc::channel();
    let builder = rig.builder();
    let building = std::thread::spawn(move || {
        let runtime = builder.build();
        let _ = done.send(());
        runtime.map(drop)
    });
    let hung = finished.recv_timeout(Duration::from_secs(10)).is_err();
    if hung {
        // Let it go: a writer that closes at once gives the reader its end of file.
        let _ = std::fs::OpenOptions::new().write(true).open(&index);
    }
    building.join().expect("thread").expect("runtime");
    assert!(!hung, "the start waited {:?} on a FIFO", started.elapsed());
}

fn make_fifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// A FIFO, a link out of the directory and a directory named `*.wasm` appearing in a served
/// tools directory: a reload refuses each without waiting, and the tools served stay.
#[test]
fn fifos_and_outward_links_appearing_under_reload_are_refused_at_once() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    let runtime = rig.builder().build().expect("runtime");
    let outside = rig.temp.path().join("outside.wasm");
    std::fs::write(&outside, numbered_guest(2, "AAAA")).expect("write");
    make_fifo(&rig.tools.join("fifo.wasm"));
    std::os::unix::fs::symlink(&outside, rig.tools.join("link.wasm")).expect("symlink");
    std::fs::create_dir(rig.tools.join("dir.wasm")).expect("dir");
    let started = Instant::now();
    let reloaded = runtime.reload_blocking().expect("reload");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!reloaded.changed(), "{reloaded:?}");
    assert_eq!(reloaded.errors.len(), 3, "{reloaded:?}");
    assert!(runtime.info("numbered_002").is_none());
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-AAAA"
    );
    // And the next look finds nothing new to do.
    assert!(reload_if_changed(&runtime).is_none());
}

/// A replacement that renames itself into another pinned tool's name, under reload: refused by
/// that pin, and the file's old tool keeps serving; registry and tools agree.
#[test]
fn a_replacement_that_takes_a_pinned_name_is_refused_and_the_old_one_serves() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    let pinned = rig.put(2, "AAAA");
    let runtime = rig
        .builder()
        .policy(pin_policy(2, &pinned))
        .build()
        .expect("runtime");
    // numbered_001.wasm now claims to be numbered_002 (sorted first, so it would win).
    rig.put_as("numbered_001.wasm", 2, "EVIL");
    let reloaded = runtime.reload_blocking().expect("reload");
    assert!(!reloaded.changed(), "{reloaded:?}");
    assert_eq!(
        result_text(answer(&runtime, "numbered_002", "{}")),
        "version-AAAA"
    );
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-AAAA"
    );
    assert_eq!(runtime.digest("numbered_002"), Some(sha256(&pinned)));
    for entry in runtime.registry().entries() {
        let name = &entry.schema.name;
        assert!(runtime.info(name).is_some(), "{name}");
    }
}

/// Without a pin, an added file that sorts first and claims a served tool's name does not take
/// that name (nor its policy entry) at a reload: the tool serving it keeps it, and the newcomer
/// is refused. (At start, load order decides: there is no tool in service yet.)
#[test]
fn an_added_file_claiming_a_served_name_does_not_take_it_over() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(2, "AAAA");
    let runtime = rig.builder().build().expect("runtime");
    rig.put_as("aaa_first.wasm", 2, "EVIL");
    let reloaded = runtime.reload_blocking().expect("reload");
    assert!(!reloaded.changed(), "{reloaded:?}");
    assert_eq!(
        result_text(answer(&runtime, "numbered_002", "{}")),
        "version-AAAA",
        "the name stays with the tool serving it"
    );
    assert!(
        reloaded
            .errors
            .iter()
            .any(|error| error.message.contains("already served")),
        "{reloaded:?}"
    );
}

/// Many reloads, each replacing a tool: no file descriptors and no resident code pile up.
#[test]
fn many_reloads_leak_neither_code_nor_descriptors() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    rig.put(2, "AAAA");
    let one = one_tool_code_bytes(&rig);
    let runtime = rig.builder().build().expect("runtime");
    let fds = || std::fs::read_dir("/proc/self/fd").expect("fds").count();
    let mut baseline = None;
    for round in 0..60 {
        let version = format!("{:04}", round % 7);
        rig.put(1, &version);
        let reloaded = runtime.reload_blocking().expect("reload");
        assert_eq!(reloaded.replaced, ["numbered_001"], "{reloaded:?}");
        assert_eq!(
            result_text(answer(&runtime, "numbered_001", "{}")),
            format!("version-{version}")
        );
        if round == 5 {
            baseline = Some(fds());
        }
    }
    assert!(
        runtime.resident_code_bytes() <= 2 * one,
        "{} bytes resident for two tools of {one}",
        runtime.resident_code_bytes()
    );
    let now = fds();
    assert!(
        now <= baseline.expect("baseline") + 4,
        "{now} descriptors, {baseline:?} after five reloads"
    );
}

/// Many first calls of one tool at once load its code once; with a budget of one byte and
/// four tools called from eight threads, every call answers with its own tool's version.
#[test]
fn concurrent_first_calls_under_a_tiny_budget_stay_correct() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    for number in 1..=4 {
        rig.put(number, &format!("{number:04}"));
    }
    drop(rig.builder().build().expect("runtime"));
    let runtime = Arc::new(rig.builder().build().expect("runtime"));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let runtime = Arc::clone(&runtime);
            std::thread::spawn(move || answer(&runtime, "numbered_001", "{}"))
        })
        .collect();
    for thread in threads {
        assert_eq!(result_text(thread.join().expect("call")), "version-0001");
    }
    assert_eq!(runtime.cache_stats().hits, 1, "loaded once");
    drop(runtime);

    let runtime = Arc::new(
        rig.builder()
            .code_memory_budget(1)
            .build()
            .expect("runtime"),
    );
    let threads: Vec<_> = (0..8u16)
        .map(|thread| {
            let runtime = Arc::clone(&runtime);
            std::thread::spawn(move || {
                for call in 0..6u16 {
                    let number = (thread + call) % 4 + 1;
                    let text =
                        result_text(answer(&runtime, &format!("numbered_{number:03}"), "{}"));
                    assert_eq!(text, format!("version-{number:04}"));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("calls");
    }
    let resident = runtime.resident_code_bytes();
    // Nothing wrapped below zero, and at most the last admitted tool stays.
    assert!(resident < usize::MAX / 2, "{resident}");
}

/// A tool removed while a call to it is in flight: the call finishes on its code, and the
/// code is let go afterwards.
#[test]
fn a_tool_removed_mid_call_finishes_and_is_let_go() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    let runtime = Arc::new(rig.builder().build().expect("runtime"));
    let in_flight = std::thread::spawn({
        let runtime = Arc::clone(&runtime);
        move || answer(&runtime, "numbered_001", r#"{"sleep_ms":1000}"#)
    });
    let waiting = Instant::now();
    while runtime.calls_in_flight() == 0 {
        assert!(waiting.elapsed().as_secs() < 30, "the call never started");
        std::thread::yield_now();
    }
    std::fs::remove_file(rig.tools.join("numbered_001.wasm")).expect("remove");
    let removed = runtime.reload_blocking().expect("reload");
    assert_eq!(removed.removed, ["numbered_001"]);
    assert_eq!(result_text(in_flight.join().expect("call")), "version-AAAA");
    assert_eq!(runtime.resident_code_bytes(), 0);
}

/// A tool with a write grant on the whole workspace cannot put a component into a tools
/// directory inside it: not by name, not through a link to the directory, not through a
/// dangling link whose target is in it.
#[test]
fn no_write_reaches_a_tools_directory_through_a_link() {
    let temp = tempfile::tempdir().expect("temp");
    let ws = temp.path().join("ws");
    let tools = ws.join("tools");
    std::fs::create_dir_all(&tools).expect("tools");
    std::os::unix::fs::symlink("tools", ws.join("alias")).expect("link to dir");
    std::os::unix::fs::symlink("tools/dangling.wasm", ws.join("dangling.wasm"))
        .expect("dangling link");
    let policy = "[tools.write_file]\nfilesystem.write = { access = \"allow\", roots = [\".\"] }\n";
    let runtime = crate::support::builder()
        .tools_dir(&tools)
        .policy(Policy::from_toml(policy).expect("policy"))
        .workspace(&ws)
        .build()
        .expect("runtime");
    for path in [
        "alias/evil.wasm",
        "./alias/../tools/evil.wasm",
        "dangling.wasm",
    ] {
        let response = runtime.call(&ToolRequest::new(
            "t",
            "write_file",
            serde_json::json!({ "path": path, "content": "(component)" }).to_string(),
        ));
        assert!(
            matches!(
                response,
                ToolResponse::Denied { .. } | ToolResponse::Failed { .. }
            ),
            "{path}: {response:?}"
        );
    }
    let entries: Vec<_> = std::fs::read_dir(&tools)
        .expect("tools")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(
        entries,
        Vec::<std::ffi::OsString>::new(),
        "nothing was written"
    );
}

/// The peak resident memory of this process, in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .expect("status")
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// A huge (sparse) file at the index's path is refused from its size, before it is read:
/// an index is at most `MAX_INDEX_BYTES` (64 MiB), not the 1 GiB a cache entry may be.
#[test]
fn a_huge_file_at_the_index_path_is_not_read() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    drop(rig.builder().build().expect("runtime"));
    let index = rig.index_files().pop().expect("an index");
    std::fs::remove_file(&index).expect("remove");
    let file = std::fs::File::create(&index).expect("create");
    file.set_len(1000 << 20).expect("sparse");
    drop(file);
    let before = peak_rss_kib();
    let started = Instant::now();
    let runtime = rig.builder().build().expect("runtime");
    let grown_mib = (peak_rss_kib() - before) / 1024;
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-AAAA"
    );
    assert!(
        grown_mib < 200,
        "the start grew the peak RSS by {grown_mib} MiB in {:?}",
        started.elapsed()
    );
}

/// Two files whose names are not UTF-8 and show alike (`\xfe.wasm`, `\xff.wasm` both show as
/// `\u{fffd}.wasm`): the index and a reload know files by their names as text, so such names
/// are refused, each with why, and a reload with nothing changed changes nothing.
#[test]
fn names_that_show_alike_are_not_taken_for_each_other() {
    use std::os::unix::ffi::OsStrExt as _;
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    for (byte, number) in [(0xfe_u8, 1_u16), (0xff, 2)] {
        let name = [byte, b'.', b'w', b'a', b's', b'm'];
        std::fs::write(
            rig.tools.join(std::ffi::OsStr::from_bytes(&name)),
            numbered_guest(number, "AAAA"),
        )
        .expect("write");
    }
    let runtime = rig.builder().build().expect("runtime");
    assert_eq!(
        runtime.load_errors().len(),
        2,
        "{:?}",
        runtime.load_errors()
    );
    assert!(
        runtime
            .load_errors()
            .iter()
            .all(|error| error.message.contains("not UTF-8")),
        "{:?}",
        runtime.load_errors()
    );
    let reloaded = runtime.reload_blocking().expect("reload");
    assert!(!reloaded.changed(), "nothing changed: {reloaded:?}");
}
