//! Tools known from the cache's index start with no component read and no code in memory;
//! their code is loaded on the first call and dropped under the budget; the index is believed
//! only under its MAC; and a running runtime reloads tools added, changed and removed, keeping
//! a refused replacement's old version in service and calls in flight on theirs.

use crate::support::result_text;
use sha2::Digest as _;
use std::path::{Path, PathBuf};
use toolcell::cache::CacheStats;
use toolcell::{Policy, Runtime, ToolPort as _, ToolRequest, ToolResponse};

/// The `numbered` guest as the tool `numbered_NNN` answering `version-VVVV`: the same
/// component with its two marker strings rewritten (same lengths).
pub(crate) fn numbered_guest(number: u16, version: &str) -> Vec<u8> {
    assert_eq!(version.len(), 4, "a version is four characters");
    let mut bytes = crate::guests::NUMBERED.to_vec();
    replace_once(
        &mut bytes,
        b"numbered_000",
        format!("numbered_{number:03}").as_bytes(),
    );
    replace_once(
        &mut bytes,
        b"version-0000",
        format!("version-{version}").as_bytes(),
    );
    bytes
}

fn replace_once(bytes: &mut [u8], marker: &[u8], with: &[u8]) {
    assert_eq!(marker.len(), with.len());
    let at: Vec<usize> = bytes
        .windows(marker.len())
        .enumerate()
        .filter(|(_, window)| *window == marker)
        .map(|(at, _)| at)
        .collect();
    assert_eq!(
        at.len(),
        1,
        "the marker {marker:?} appears once in the guest"
    );
    bytes[at[0]..at[0] + marker.len()].copy_from_slice(with);
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A tools directory and a compile cache of its own, in a temporary directory.
pub(crate) struct Rig {
    pub(crate) temp: tempfile::TempDir,
    pub(crate) tools: PathBuf,
    pub(crate) cache: PathBuf,
    pub(crate) key: PathBuf,
}

impl Rig {
    pub(crate) fn new() -> Rig {
        let temp = tempfile::tempdir().expect("temp dir");
        let tools = temp.path().join("tools");
        std::fs::create_dir(&tools).expect("tools dir");
        Rig {
            cache: temp.path().join("cache"),
            key: temp.path().join("cache.key"),
            tools,
            temp,
        }
    }

    /// `numbered_NNN` at `file` in the tools directory: written beside it and renamed in, as an
    /// installer does (never a half-written file).
    pub(crate) fn put_as(&self, file: &str, number: u16, version: &str) -> Vec<u8> {
        let bytes = numbered_guest(number, version);
        let temp = self.tools.join(format!(".{file}.tmp"));
        std::fs::write(&temp, &bytes).expect("write");
        std::fs::rename(&temp, self.tools.join(file)).expect("rename");
        bytes
    }

    /// `numbered_NNN` at `numbered_NNN.wasm`.
    pub(crate) fn put(&self, number: u16, version: &str) -> Vec<u8> {
        self.put_as(&format!("numbered_{number:03}.wasm"), number, version)
    }

    pub(crate) fn builder(&self) -> toolcell::RuntimeBuilder {
        Runtime::builder()
            .builtin_tools(false)
            .tools_dir(&self.tools)
            .cache_dir(Some(self.cache.clone()))
            .cache_key_file(Some(self.key.clone()))
    }

    fn build(&self) -> Runtime {
        let runtime = self.builder().build().expect("runtime");
        assert_eq!(runtime.load_errors(), &[]);
        runtime
    }

    pub(crate) fn index_files(&self) -> Vec<PathBuf> {
        files_named(&self.cache, "index-")
    }
}

fn files_named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("cache dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(prefix))
        })
        .collect();
    found.sort();
    found
}

pub(crate) fn answer(runtime: &Runtime, tool: &str, arguments: &str) -> ToolResponse {
    runtime.call(&ToolRequest::new("t", tool, arguments))
}

/// The test named after the guest: one build of it stands for many tools, each described
/// once and then known from the index with nothing read, compiled or instantiated at start.
#[test]
pub(crate) fn numbered() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    for number in 1..=3 {
        rig.put(number, "AAAA");
    }
    let cold = rig.build();
    assert_eq!(
        cold.cache_stats(),
        CacheStats {
            misses: 3,
            ..CacheStats::default()
        },
        "described and compiled once"
    );
    drop(cold);

    let warm = rig.build();
    assert_eq!(
        warm.cache_stats(),
        CacheStats {
            indexed: 3,
            ..CacheStats::default()
        },
        "known from the index: no component read, no code loaded"
    );
    assert_eq!(warm.resident_code_bytes(), 0);
    assert_eq!(
        warm.info("numbered_002").map(|info| info.description),
        Some("Answers with its version (a test tool rewritten into many).".to_owned())
    );
    assert_eq!(
        result_text(answer(&warm, "numbered_002", "{}")),
        "version-AAAA"
    );
    assert_eq!(
        warm.cache_stats(),
        CacheStats {
            indexed: 3,
            hits: 1,
            ..CacheStats::default()
        },
        "the first call read its code from the cache"
    );
    assert!(warm.resident_code_bytes() > 0);
    // Arguments are still checked against the schema (compiled on the first call).
    let refused = answer(&warm, "numbered_001", r#"{"sleep_ms":"soon"}"#);
    assert!(
        matches!(
            &refused,
            ToolResponse::Failed {
                kind: toolcell::FailureKind::InvalidInput,
                ..
            }
        ),
        "{refused:?}"
    );
}

/// An index whose bytes were changed, or that was written under another key, is not believed:
/// the components are described again from their bytes.
#[test]
fn a_changed_or_foreign_index_is_not_believed() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    drop(rig.build());
    let index = rig.index_files().pop().expect("an index was written");
    let genuine = std::fs::read(&index).expect("read index");
    let forged = String::from_utf8_lossy(&genuine)
        .replace("Answers with its version", "Deletes all of your files");
    assert_ne!(forged.as_bytes(), genuine.as_slice());
    std::fs::write(&index, forged.as_bytes()).expect("forge");
    let runtime = rig.build();
    assert_eq!(
        runtime.cache_stats().indexed,
        0,
        "the forged index was not read"
    );
    assert_eq!(
        runtime.cache_stats().hits,
        1,
        "the component was described again"
    );
    assert!(
        runtime
            .info("numbered_001")
            .is_some_and(|info| info.description.starts_with("Answers with its version")),
        "what it says is what the component says"
    );
    drop(runtime);
    assert_eq!(
        std::fs::read(&index).expect("read"),
        genuine,
        "and written again"
    );

    // The same index under another cache key is someone else's.
    std::fs::remove_file(&rig.key).expect("remove key");
    let runtime = rig.build();
    assert_eq!(runtime.cache_stats().indexed, 0);
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-AAAA"
    );
}

/// A file changed since the index saw it is read and described again; and one changed after
/// the runtime started, whose compiled entry is gone, is never run in its old one's place.
#[test]
fn a_changed_file_is_read_again_and_never_run_as_the_old_one() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    drop(rig.build());
    rig.put(1, "BBBB");
    let runtime = rig.build();
    assert_eq!(runtime.cache_stats().indexed, 0);
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-BBBB"
    );
    drop(runtime);

    // Started from the index (nothing read); then the compiled entries go and the file
    // changes: the first call reads the file, finds other bytes, and refuses.
    let runtime = rig.build();
    assert_eq!(runtime.cache_stats().indexed, 1);
    for entry in files_named(&rig.cache, "") {
        if entry.extension().is_some_and(|ext| ext == "cwasm") {
            std::fs::remove_file(entry).expect("remove entry");
        }
    }
    rig.put(1, "CCCC");
    let refused = answer(&runtime, "numbered_001", "{}");
    let ToolResponse::Failed { message, .. } = &refused else {
        panic!("ran: {refused:?}");
    };
    assert!(
        message.contains("has changed since it was loaded"),
        "{message}"
    );
}

/// Past the budget, the code called least recently is dropped, and read again when called.
#[test]
fn code_past_the_budget_is_dropped_and_read_again() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    for number in 1..=3 {
        rig.put(number, "AAAA");
    }
    drop(rig.build());
    let runtime = rig
        .builder()
        .code_memory_budget(1)
        .build()
        .expect("runtime");
    assert_eq!(runtime.resident_code_bytes(), 0);
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-AAAA"
    );
    let one = runtime.resident_code_bytes();
    assert!(one > 0);
    assert_eq!(
        result_text(answer(&runtime, "numbered_002", "{}")),
        "version-AAAA"
    );
    let now = runtime.resident_code_bytes();
    assert!(
        now < 2 * one,
        "001's code was dropped for 002's: {now} bytes resident"
    );
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-AAAA"
    );
    assert_eq!(
        runtime.cache_stats().hits,
        3,
        "001 was read from the cache twice"
    );
}

/// A running runtime reloads: a tool added is served, a changed one answers anew, a removed
/// one is gone; a replacement that breaks its pin is refused and the old version serves on;
/// a call in flight finishes on the version it started with.
#[test]
fn reload_adds_replaces_removes_and_keeps_what_it_refuses() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    rig.put(1, "AAAA");
    let pinned = numbered_guest(2, "AAAA");
    let policy = Policy::from_toml(&format!(
        "[tools.numbered_002]\nsha256 = \"{}\"\n",
        sha256(&pinned)
    ))
    .expect("policy");
    let runtime = rig.builder().policy(policy).build().expect("runtime");
    assert_eq!(runtime.load_errors(), &[]);
    let unchanged = runtime.reload_blocking().expect("reload");
    assert!(!unchanged.changed(), "{unchanged:?}");

    rig.put(2, "AAAA");
    let added = runtime.reload_blocking().expect("reload");
    assert_eq!(added.added, ["numbered_002"]);
    assert_eq!(
        result_text(answer(&runtime, "numbered_002", "{}")),
        "version-AAAA"
    );

    // A long call of 001 is in flight while 001 is replaced.
    let runtime = std::sync::Arc::new(runtime);
    let in_flight = std::thread::spawn({
        let runtime = std::sync::Arc::clone(&runtime);
        move || answer(&runtime, "numbered_001", r#"{"sleep_ms":1500}"#)
    });
    let waiting = std::time::Instant::now();
    while runtime.calls_in_flight() == 0 {
        assert!(waiting.elapsed().as_secs() < 30, "the call never started");
        std::thread::yield_now();
    }
    rig.put(1, "BBBB");
    let replaced = runtime.reload_blocking().expect("reload");
    assert_eq!(replaced.replaced, ["numbered_001"]);
    assert_eq!(
        result_text(answer(&runtime, "numbered_001", "{}")),
        "version-BBBB"
    );
    assert_eq!(
        result_text(in_flight.join().expect("the call")),
        "version-AAAA",
        "the call in flight finished on its own version"
    );

    // 002 is pinned: a replacement that breaks the pin is refused, and A keeps serving.
    rig.put(2, "BBBB");
    let refused = runtime.reload_blocking().expect("reload");
    assert!(!refused.changed(), "{refused:?}");
    assert!(
        refused
            .errors
            .iter()
            .any(|error| error.message.contains("pins numbered_002")
                && error.message.contains("keeps serving")),
        "{refused:?}"
    );
    assert_eq!(
        result_text(answer(&runtime, "numbered_002", "{}")),
        "version-AAAA"
    );

    std::fs::remove_file(rig.tools.join("numbered_001.wasm")).expect("remove");
    let removed = runtime.reload_blocking().expect("reload");
    assert_eq!(removed.removed, ["numbered_001"]);
    assert!(runtime.registry().get("numbered_001").is_none());
    assert!(matches!(
        answer(&runtime, "numbered_001", "{}"),
        ToolResponse::Failed {
            kind: toolcell::FailureKind::UnknownTool,
            ..
        }
    ));
}

/// `toolcell serve` over stdio with a client connected: a tool added, replaced and removed in
/// its tools directory is served without a restart and the client is told
/// (`notifications/tools/list_changed`); a replacement that breaks its pin is refused, and the
/// old version keeps serving.
#[test]
fn serve_reloads_its_tools_directory_and_tells_the_client() {
    use crate::mcp::{Server, text};
    use serde_json::json;
    let rig = Rig::new();
    rig.put(1, "AAAA");
    let policy = rig.tools.parent().expect("temp").join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[tools.numbered_001]\ncore = true\n\
             [tools.numbered_002]\ncore = true\nsha256 = \"{}\"\n\
             [tools.numbered_003]\ncore = true\n",
            sha256(&numbered_guest(2, "AAAA"))
        ),
    )
    .expect("policy");
    let tools = rig.tools.to_str().expect("utf-8 path");
    let mut server = Server::start(&[
        "--no-builtin",
        "--tools",
        tools,
        "--policy",
        policy.to_str().expect("utf-8 path"),
    ]);
    let mut id = 0;
    let mut listed = |server: &mut Server| -> Vec<String> {
        id += 1;
        server.send(json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list" }));
        let response = server.response(id);
        response["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        listed(&mut server),
        ["numbered_001", "find_tool", "call_tool"]
    );

    rig.put(2, "AAAA");
    server.notification("notifications/tools/list_changed");
    assert_eq!(
        listed(&mut server),
        ["numbered_001", "numbered_002", "find_tool", "call_tool"]
    );
    server.call(100, "numbered_002", json!({}));
    assert_eq!(text(&server.response(100)), "version-AAAA");

    rig.put(1, "BBBB");
    server.notification("notifications/tools/list_changed");
    server.call(101, "numbered_001", json!({}));
    assert_eq!(text(&server.response(101)), "version-BBBB");

    // 002's replacement breaks its pin; 003 arrives after it, so the reload that brings 003
    // has seen it.
    rig.put(2, "BBBB");
    rig.put(3, "AAAA");
    server.notification("notifications/tools/list_changed");
    server.call(102, "numbered_003", json!({}));
    assert_eq!(text(&server.response(102)), "version-AAAA");
    server.call(103, "numbered_002", json!({}));
    assert_eq!(
        text(&server.response(103)),
        "version-AAAA",
        "the old version serves on"
    );

    std::fs::remove_file(rig.tools.join("numbered_001.wasm")).expect("remove");
    server.notification("notifications/tools/list_changed");
    assert_eq!(
        listed(&mut server),
        ["numbered_002", "numbered_003", "find_tool", "call_tool"]
    );
    server.call(104, "numbered_001", json!({}));
    assert_eq!(server.response(104)["error"]["code"], -32602);

    let (_, clean, _, stderr) = server.close();
    assert!(clean, "{stderr}");
    assert!(
        stderr.contains("pins numbered_002") && stderr.contains("keeps serving"),
        "{stderr}"
    );
}

/// A component of plain typed exports is kept in the index as a contract component is: a later
/// start serves its functions (and says which were left out) with nothing read, compiled or
/// instantiated, and its first call reads its code from the cache.
#[test]
fn a_typed_component_is_known_from_the_index() {
    let _guard = crate::support::exclusive();
    let rig = Rig::new();
    std::fs::write(rig.tools.join("probe.wasm"), crate::guests::TYPED_PROBE).expect("write");
    let names = |runtime: &Runtime| -> (Vec<String>, Vec<String>) {
        let tools = crate::typed::tool_names(runtime);
        let mut left_out: Vec<String> = runtime
            .load_errors()
            .iter()
            .map(ToString::to_string)
            .collect();
        left_out.sort();
        (tools, left_out)
    };
    let cold = rig.builder().build().expect("runtime");
    assert_eq!(cold.cache_stats().misses, 1, "{:?}", cold.cache_stats());
    let (tools, left_out) = names(&cold);
    assert!(tools.contains(&"echo".to_owned()), "{tools:?}");
    assert!(!left_out.is_empty(), "the resource functions are left out");
    let schema = cold.info("add").map(|info| info.input_schema);
    drop(cold);

    let warm = rig.builder().build().expect("runtime");
    assert_eq!(
        warm.cache_stats(),
        CacheStats {
            indexed: 1,
            ..CacheStats::default()
        },
        "known from the index: no component read, no code loaded"
    );
    assert_eq!(warm.resident_code_bytes(), 0);
    assert_eq!(
        names(&warm),
        (tools, left_out),
        "the same tools, the same left out"
    );
    assert_eq!(warm.info("add").map(|info| info.input_schema), schema);
    assert_eq!(
        result_text(answer(&warm, "echo", r#"{"text":"from the index"}"#)),
        "from the index"
    );
    assert_eq!(warm.cache_stats().hits, 1, "{:?}", warm.cache_stats());
    assert!(warm.resident_code_bytes() > 0);
    // Its arguments are still checked against the schema made from its types.
    let refused = answer(&warm, "add", r#"{"a":256,"b":1}"#);
    assert!(
        matches!(
            &refused,
            ToolResponse::Failed {
                kind: toolcell::FailureKind::InvalidInput,
                ..
            }
        ),
        "{refused:?}"
    );
}
