//! Loading components: a bad one is refused by name, and the others keep serving.

use crate::support::result_text;
use toolcell::{ToolPort, ToolRequest, ToolResponse};

#[test]
fn broken_components_in_the_tools_directory_are_named_and_the_rest_serve() {
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path();
    let echo = toolcell::builtin_components()
        .iter()
        .find(|(name, _)| *name == "echo")
        .map(|(_, bytes)| *bytes)
        .expect("echo is built in");
    let files: &[(&str, &[u8])] = &[
        ("a_counter.wasm", crate::guests::COUNTER),
        ("garbage.wasm", b"this is not wasm"),
        ("core_module.wasm", b"\0asm\x01\0\0\0"),
        ("truncated.wasm", &echo[..echo.len() / 2]),
        ("empty.wasm", b""),
        ("duplicate_echo.wasm", echo),
        ("notes.txt", b"not a component, and not named like one"),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).expect("write");
    }
    // What is named like a component but is not a regular file of this directory: each is
    // refused by name, none stops the others, and none is waited on or read without end.
    let outside = temp
        .path()
        .parent()
        .expect("parent")
        .join(format!("outside-{}.wasm", std::process::id()));
    std::fs::write(&outside, crate::guests::COUNTER).expect("write");
    std::os::unix::fs::symlink(&outside, dir.join("link_out.wasm")).expect("symlink");
    std::os::unix::fs::symlink("nowhere.wasm", dir.join("dangling.wasm")).expect("symlink");
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.wasm")).expect("symlink");
    std::fs::create_dir(dir.join("d.wasm")).expect("mkdir");
    // Larger than any component may be (sparse: it costs no disk), refused before it is read.
    std::fs::File::create(dir.join("huge.wasm"))
        .and_then(|file| file.set_len(toolcell::limits::MAX_COMPONENT_BYTES + 1))
        .expect("sparse file");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(dir.join("fifo.wasm"))
            .status()
            .expect("mkfifo")
            .success()
    );

    let port = crate::support::builder()
        .tools_dir(dir)
        .build()
        .expect("port");

    let mut refused: Vec<String> = port
        .load_errors()
        .iter()
        .map(|error| {
            std::path::Path::new(&error.source)
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    refused.sort();
    assert_eq!(
        refused,
        [
            "core_module.wasm",
            "d.wasm",
            "dangling.wasm",
            "duplicate_echo.wasm",
            "empty.wasm",
            "fifo.wasm",
            "garbage.wasm",
            "huge.wasm",
            "link_out.wasm",
            "truncated.wasm",
            "zero.wasm",
        ]
    );
    let _ = std::fs::remove_file(&outside);
    for error in port.load_errors() {
        assert!(!error.message.is_empty());
        assert!(error.to_string().starts_with(&error.source));
    }
    let duplicate = port
        .load_errors()
        .iter()
        .find(|error| error.source.ends_with("duplicate_echo.wasm"))
        .expect("duplicate refused");
    assert!(
        duplicate
            .message
            .contains("already loaded from builtin:echo")
    );

    let call = |tool: &str, arguments: &str| port.call(&ToolRequest::new("t", tool, arguments));
    assert_eq!(
        result_text(call("echo", r#"{"text":"still here"}"#)),
        "still here"
    );
    assert_eq!(result_text(call("counter", "{}")), "1");
}

#[test]
fn a_missing_tools_directory_is_an_error_that_names_it() {
    let error = crate::support::builder()
        .tools_dir("/no/such/toolcell/dir")
        .build()
        .expect_err("a missing directory is an error");
    assert!(format!("{error:#}").contains("/no/such/toolcell/dir"));
}

/// Load one component alone and return the reason it was refused.
fn refusal(source: &str, bytes: &[u8]) -> String {
    // Compiles a component: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
    let port = crate::support::builder()
        .builtin_tools(false)
        .component(source, bytes)
        .build()
        .expect("port");
    assert!(port.registry().entries().is_empty(), "{source} was loaded");
    let [error] = port.load_errors() else {
        panic!(
            "{source}: expected one load error, got {:?}",
            port.load_errors()
        );
    };
    assert_eq!(error.source, source);
    error.message.clone()
}

#[test]
pub(crate) fn liar_schema() {
    let why = refusal("liar_schema.wasm", crate::guests::LIAR_SCHEMA);
    assert!(why.contains("input schema is not JSON"), "{why}");
}

#[test]
pub(crate) fn liar_name() {
    let why = refusal("liar_name.wasm", crate::guests::LIAR_NAME);
    assert!(why.contains("\"rm -rf /; echo\""), "{why}");
    assert!(why.contains("a-z A-Z 0-9 _ -"), "{why}");
}

#[test]
pub(crate) fn slow_describe() {
    let started = std::time::Instant::now();
    let why = refusal("slow_describe.wasm", crate::guests::SLOW_DESCRIBE);
    assert!(why.contains("deadline"), "{why}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

/// A component that exports the contract's interface by its very name, with a `describe` true
/// to the contract and a `call` of another type (`func(arguments: u32) -> u32`): the host checks
/// the function's type, not the interface's name, so the component is refused at load with the
/// mismatch named, and nothing of it is served, neither as the contract's tool nor read by its
/// types (a component that claims the contract is held to it).
#[test]
pub(crate) fn wrong_call() {
    let why = refusal("wrong_call.wasm", crate::guests::WRONG_CALL);
    assert!(why.contains("describe() failed"), "{why}");
    assert!(why.contains("type mismatch"), "{why}");
    assert!(why.contains("`u32`"), "{why}");
    // Compiles it again: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
    let port = crate::support::builder()
        .component("wrong_call.wasm", crate::guests::WRONG_CALL)
        .build()
        .expect("port");
    for name in ["wrong_call", "call"] {
        let answer = port.call(&ToolRequest::new("t", name, r#"{"arguments":1}"#));
        assert!(
            matches!(&answer, ToolResponse::Failed { message, .. } if message.contains("no tool named")),
            "{name}: {answer:?}"
        );
    }
    assert_eq!(
        port.call(&ToolRequest::new("t", "echo", r#"{"text":"still here"}"#)),
        ToolResponse::text("still here")
    );
}

/// A component of another world than toolcell's (`run: func() -> string`) is no longer
/// refused: it is read by its types, and its function is a tool answering what it returns.
#[test]
pub(crate) fn wrong_world() {
    let port = crate::support::builder()
        .builtin_tools(false)
        .component("wrong_world.wasm", crate::guests::WRONG_WORLD)
        .build()
        .expect("port");
    assert!(port.load_errors().is_empty(), "{:?}", port.load_errors());
    assert_eq!(
        port.call(&ToolRequest::new("t", "run", "{}")),
        ToolResponse::text("not a tool")
    );
}

/// A component that names itself differently each time it is asked is asked once: its
/// registry entry and its calls stay the same.
#[test]
pub(crate) fn shifty() {
    let port = crate::support::builder()
        .builtin_tools(false)
        .component("shifty.wasm", crate::guests::SHIFTY)
        .build()
        .expect("port");
    let registry = port.registry().clone();
    let [entry] = registry.entries() else {
        panic!("expected one tool, got {registry:?}");
    };
    let name = entry.schema.name.clone();
    assert!(name.starts_with("shifty_"), "{name}");
    for _ in 0..5 {
        let response = port.call(&ToolRequest::new("t", &name, "{}"));
        assert_eq!(result_text(response), "steady");
    }
    assert_eq!(port.registry(), registry);
}

/// The instance pool's limits per component (`toolcell::limits`), each met by a component
/// built to sit exactly at it and by one just past it. The one past it is refused with
/// wasmtime's own reason, and nothing is written to the compile cache for it; the one at it
/// gets past the pool and is refused only for not being a tool (so the pool was not why).
/// Tables are counted over all the component's core instances (each holds one here), since
/// [`toolcell::limits::MAX_INSTANCES`] is above [`toolcell::limits::MAX_TABLES`].
#[test]
fn instance_pool_limits_refuse_with_their_reason_and_cache_nothing() {
    use toolcell::limits::{MAX_INSTANCES, MAX_MEMORIES, MAX_TABLE_ELEMENTS, MAX_TABLES};
    const {
        assert!(
            MAX_INSTANCES > MAX_TABLES,
            "the tables case needs a module per table"
        )
    };
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
    let cache = tempfile::tempdir().expect("temp dir");
    let entries = cache.path().join("entries");
    let load = |wat: &str| -> String {
        let bytes = wat::parse_str(wat).expect("valid WAT");
        let port = toolcell::Runtime::builder()
            .builtin_tools(false)
            .cache_dir(Some(entries.clone()))
            .cache_key_file(Some(cache.path().join("cache.key")))
            .component("test:limits", bytes)
            .build()
            .expect("port");
        let [error] = port.load_errors() else {
            panic!("one load error expected: {:?}", port.load_errors());
        };
        error.message.clone()
    };
    let cached = || -> usize {
        std::fs::read_dir(&entries)
            .map(|dir| dir.flatten().filter(|entry| entry.path().is_file()).count())
            .unwrap_or(0)
    };
    // `count` core instances of one empty module.
    let instances = |count: usize| {
        format!(
            "(component (core module $m) {})",
            "(core instance (instantiate $m))".repeat(count)
        )
    };
    // `count` core instances, each with a memory of its own.
    let memories = |count: usize| {
        format!(
            "(component (core module $m (memory 1)) {})",
            "(core instance (instantiate $m))".repeat(count)
        )
    };
    // `count` core instances, each with a table of its own.
    let tables = |count: usize| {
        format!(
            "(component (core module $m (table 1 funcref)) {})",
            "(core instance (instantiate $m))".repeat(count)
        )
    };
    // One table of `count` elements.
    let table = |count: usize| {
        format!(
            "(component (core module $m (table {count} funcref)) (core instance (instantiate $m)))"
        )
    };
    let cases = [
        (
            "core instances",
            instances(MAX_INSTANCES),
            instances(MAX_INSTANCES + 1),
        ),
        (
            "memories",
            memories(MAX_MEMORIES),
            memories(MAX_MEMORIES + 1),
        ),
        ("tables", tables(MAX_TABLES), tables(MAX_TABLES + 1)),
        (
            "table elements",
            table(MAX_TABLE_ELEMENTS),
            table(MAX_TABLE_ELEMENTS + 1),
        ),
    ];
    for (at_limit, (what, at, past)) in cases.iter().enumerate() {
        let why = load(at);
        assert!(
            why.contains("exports neither the toolcell:tool/tool"),
            "{what} at the limit: {why}"
        );
        assert_eq!(
            cached(),
            at_limit + 1,
            "the component at the limit is cached"
        );
        let why = load(past);
        assert!(
            why.starts_with("wasmtime refused the compiled component")
                && why.contains(
                    &(match *what {
                        "core instances" => MAX_INSTANCES,
                        "memories" => MAX_MEMORIES,
                        "tables" => MAX_TABLES,
                        _ => MAX_TABLE_ELEMENTS,
                    })
                    .to_string()
                ),
            "{what} past the limit: {why}"
        );
        assert_eq!(
            cached(),
            at_limit + 1,
            "nothing cached for {what} past the limit"
        );
    }
}

/// A component that uses the component model's async ABI (what componentize-qjs emits by
/// default) is refused with the reason and the fix: build for the synchronous ABI.
#[test]
fn a_component_using_the_async_abi_is_refused_with_the_fix() {
    let bytes = wat::parse_str("(component (core func (canon task.cancel)))").expect("valid WAT");
    let why = refusal("async.wasm", &bytes);
    assert!(why.contains("async ABI") && why.contains("--sync"), "{why}");
}
