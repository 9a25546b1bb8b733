//! Results beyond text (`toolcell:tool@0.3.0`): a tool returns parts (text, images, audio,
//! embedded resources, links); the host checks each (types from its list and true to their
//! bytes, plain URIs, the cap counted as base64) and passes them on: to MCP clients as content
//! blocks, to the CLI as text and files, to an agent loop as text. Components built against
//! 0.2.0 keep loading.

use crate::support::{exclusive, toolcell_binary, toolcell_command, tools_dir};
use serde_json::{Value, json};
use toolcell::content::{Contents, Part};
use toolcell::limits::DEFAULT_RESULT_CAP;
use toolcell::{
    CallOptions, CallReport, FailureKind, Runtime, ToolPort as _, ToolRequest, ToolResponse,
};

fn runtime(cap: usize) -> Runtime {
    crate::support::builder()
        .builtin_tools(false)
        .component("painter.wasm", crate::guests::PAINTER)
        .component("structured.wasm", crate::guests::STRUCTURED)
        .component("contract_v2.wasm", crate::guests::CONTRACT_V2)
        .component("contract_v3.wasm", crate::guests::CONTRACT_V3)
        .build()
        .expect("runtime")
        .with_cap(cap)
}

fn call(runtime: &Runtime, tool: &str, arguments: Value) -> CallReport {
    runtime.call_with_report(
        &ToolRequest::new("t", tool, arguments.to_string()),
        &CallOptions::default(),
    )
}

/// The message of an InvalidOutput failure, or a panic naming what came instead.
fn invalid_output(report: &CallReport) -> &str {
    match &report.response {
        ToolResponse::Failed {
            kind: FailureKind::InvalidOutput,
            message,
        } => message,
        other => panic!("not an invalid_output failure: {other:?}"),
    }
}

/// Every kind of part passes the host's checks and reaches the report whole, in order; the
/// response's text (what an agent loop reads) names each.
#[test]
pub(crate) fn painter() {
    let runtime = runtime(DEFAULT_RESULT_CAP);
    let report = call(&runtime, "painter", json!({"make": "honest"}));
    let kinds: Vec<&str> = report
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { .. } => "text",
            Part::Image(_) => "image",
            Part::Audio(_) => "audio",
            Part::Resource {
                contents: Contents::Text(_),
                ..
            } => "resource text",
            Part::Resource { .. } => "resource blob",
            Part::ResourceLink { .. } => "link",
            _ => "a kind this test does not know",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "text",
            "image",
            "audio",
            "resource text",
            "resource blob",
            "link"
        ],
        "{report:?}"
    );
    let Part::Image(image) = &report.parts[1] else {
        unreachable!()
    };
    assert_eq!(image.mime_type, "image/png");
    assert!(image.data.starts_with(b"\x89PNG"));
    let ToolResponse::Result { text, .. } = &report.response else {
        panic!("not a result: {:?}", report.response)
    };
    assert_eq!(
        text,
        "a picture:\n[image: image/png, 70 bytes]\n[audio: audio/wav, 16 bytes]\n\
         [resource: test://notes (text/markdown)]\n# notes\n\
         [resource: test://blob (application/octet-stream), 4 bytes]\n\
         [link: report <file:///report.pdf>]"
    );
    // Two text parts (no output schema) are parts too: each its own block for MCP.
    let report = call(&runtime, "painter", json!({"make": "texts"}));
    assert_eq!(report.parts, [Part::text("one"), Part::text("two")]);
}

/// A part that breaks a rule fails the whole result with `invalid_output`, saying which part
/// and why; nothing of it is passed on.
#[test]
fn parts_that_break_the_rules_are_typed_failures() {
    let runtime = runtime(DEFAULT_RESULT_CAP);
    for (make, why) in [
        (
            "svg",
            "part 0 of the result: image type \"image/svg+xml\" is not allowed",
        ),
        (
            "liar",
            "part 0 of the result: the image's bytes are not image/png (they begin 3c68746d6c3e3c73...)",
        ),
        (
            "many",
            "the result has 65 parts; a result may have at most 64",
        ),
        ("uri", "URI \"not a uri at all\" is not a URI"),
    ] {
        let report = call(&runtime, "painter", json!({"make": make}));
        let message = invalid_output(&report);
        assert!(message.contains(why), "{make}: {message}");
        assert!(report.parts.is_empty(), "{make}: parts passed on");
    }
}

/// The cap counts an image as the model receives it, base64: an image whose base64 and type
/// fit exactly passes, one byte of base64 more fails (never cut); a larger cap admits it.
#[test]
fn the_cap_counts_bytes_as_base64() {
    let cap = 4096;
    let runtime = runtime(cap);
    // 3,060 bytes are 4,080 of base64, and "image/png" 9 more: 4,089, within 4,096.
    let fits = call(&runtime, "painter", json!({"make": "huge", "bytes": 3060}));
    assert!(
        matches!(fits.response, ToolResponse::Result { .. }),
        "{:?}",
        fits.response
    );
    // 3,063 bytes are 4,084 of base64: 4,093. 3,066 are 4,088: 4,097, one over.
    let over = call(&runtime, "painter", json!({"make": "huge", "bytes": 3066}));
    assert!(
        invalid_output(&over)
            .contains("4097 bytes as the model receives it (text, and bytes as base64), more than the result cap of 4096"),
        "{:?}",
        over.response
    );
    let roomy = self::runtime(8192);
    let report = call(&roomy, "painter", json!({"make": "huge", "bytes": 3066}));
    assert!(matches!(report.response, ToolResponse::Result { .. }));
}

/// A tool with an output schema returns its object as one text part, and may put parts
/// beside it; its object split over two text parts is a failure.
#[test]
fn a_structured_result_holds_its_object_in_one_text_part() {
    let runtime = runtime(DEFAULT_RESULT_CAP);
    let report = call(
        &runtime,
        "structured",
        json!({"a": 2, "b": 3, "lie": "picture"}),
    );
    assert_eq!(report.structured, Some(json!({"sum": 5})));
    assert_eq!(report.parts.len(), 2);
    assert!(matches!(&report.parts[1], Part::Image(image) if image.mime_type == "image/gif"));
    let report = call(
        &runtime,
        "structured",
        json!({"a": 2, "b": 3, "lie": "twice"}),
    );
    assert!(
        invalid_output(&report)
            .contains("must hold its JSON object as one text part; this one has 2"),
        "{:?}",
        report.response
    );
    assert_eq!(report.structured, None);
}

/// A component built against 0.2.0 loads and runs: its string is one text part, checked
/// against the output schema it declared.
#[test]
pub(crate) fn contract_v2() {
    let runtime = runtime(DEFAULT_RESULT_CAP);
    assert_eq!(runtime.load_errors(), &[]);
    let report = call(&runtime, "contract_v2", json!({"text": "héllo"}));
    assert_eq!(report.response, ToolResponse::text(r#"{"chars":5}"#));
    assert_eq!(report.structured, Some(json!({"chars": 5})));
    assert!(report.parts.is_empty());
    let report = call(&runtime, "contract_v2", json!({"text": "lie"}));
    assert!(
        invalid_output(&report).contains("not JSON"),
        "{:?}",
        report.response
    );
}

/// A component built against 0.3.0 (the types inside `tool`, no client needs) loads and
/// runs: its parts come through as a 0.4.0 tool's do, and it holds no way to its client.
#[test]
pub(crate) fn contract_v3() {
    let runtime = runtime(DEFAULT_RESULT_CAP);
    assert_eq!(runtime.load_errors(), &[]);
    let info = runtime.info("contract_v3").expect("listed");
    assert!(info.capabilities.is_empty() && info.required_client.is_empty());
    let report = call(&runtime, "contract_v3", json!({"text": "memo"}));
    assert_eq!(report.parts.len(), 2, "{report:?}");
    assert_eq!(
        report.parts[0],
        toolcell::content::Part::Text {
            text: "text: memo".to_owned()
        }
    );
    assert!(
        matches!(&report.parts[1], toolcell::content::Part::ResourceLink { uri, .. } if uri == "memo://memo"),
        "{report:?}"
    );
}

/// `toolcell call` prints text as text and names every other part; with `--save-parts` it
/// writes the bytes of images, sounds and binary resources to files (refusing a name already
/// taken unless `--overwrite`, then replacing it, never writing through it); with `--json`
/// each part is described by its type, size and digest.
#[test]
fn the_cli_prints_parts_and_saves_their_bytes() {
    use std::os::unix::fs::FileTypeExt as _;
    let tools = tools_dir(&[("painter", crate::guests::PAINTER)]);
    let saved = tempfile::tempdir().expect("temp dir");
    // Planted where the parts go by whoever can write there: a hard link to a file elsewhere
    // (which a write through it would change) and a FIFO (which an open would wait on). Each
    // is replaced, never written through or waited on.
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let victim = elsewhere.path().join("victim");
    std::fs::write(&victim, "untouched").expect("the victim");
    std::fs::hard_link(&victim, saved.path().join("part-1.png")).expect("the hard link");
    let made = std::process::Command::new("mkfifo")
        .arg(saved.path().join("part-2.wav"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let save = |overwrite: bool| {
        let mut command = toolcell_command();
        command
            .args(["--tools"])
            .arg(tools.path())
            .args([
                "--no-builtin",
                "call",
                "painter",
                r#"{"make":"honest"}"#,
                "--save-parts",
            ])
            .arg(saved.path());
        if overwrite {
            command.arg("--overwrite");
        }
        command.output().expect("run toolcell")
    };
    // Without --overwrite, a name already taken is refused, naming it: nothing replaced.
    let output = save(false);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "{}/part-1.png already exists: give --overwrite",
            saved.path().display()
        )),
        "{stderr}"
    );
    assert!(
        std::fs::symlink_metadata(saved.path().join("part-2.wav"))
            .expect("the FIFO")
            .file_type()
            .is_fifo()
    );
    let output = save(true);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dir = saved.path().display();
    assert_eq!(
        stdout,
        format!(
            "a picture:\n[image: image/png, 70 bytes] saved to {dir}/part-1.png\n\
             [audio: audio/wav, 16 bytes] saved to {dir}/part-2.wav\n\
             [resource: test://notes (text/markdown)]\n# notes\n\
             [resource: test://blob (application/octet-stream), 4 bytes] saved to {dir}/part-4.bin\n\
             [link: report <file:///report.pdf>]\n"
        )
    );
    let png = std::fs::read(saved.path().join("part-1.png")).expect("the image");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() == 70);
    assert_eq!(
        std::fs::read(saved.path().join("part-4.bin")).expect("the blob"),
        [0, 1, 2, 255]
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("the victim"),
        "untouched"
    );
    assert!(
        std::fs::symlink_metadata(saved.path().join("part-2.wav"))
            .expect("the sound")
            .is_file()
    );

    let output = toolcell_command()
        .args(["--tools"])
        .arg(tools.path())
        .args([
            "--no-builtin",
            "call",
            "painter",
            r#"{"make":"honest"}"#,
            "--json",
        ])
        .output()
        .expect("run toolcell");
    let line: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    assert_eq!(line["outcome"], "result");
    assert_eq!(line["parts"][1]["type"], "image");
    assert_eq!(line["parts"][1]["data"]["bytes"], 70);
    assert_eq!(line["parts"][5]["type"], "resource_link");

    // A part that breaks a rule: the failure, exit 1, nothing saved.
    let output = toolcell_command()
        .args(["--tools"])
        .arg(tools.path())
        .args(["--no-builtin", "call", "painter", r#"{"make":"svg"}"#])
        .output()
        .expect("run toolcell");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("image type \"image/svg+xml\" is not allowed"),
        "{output:?}"
    );
}

/// What a part says of itself (a URI of `..`s, look-alike dots, a link's name) never reaches a
/// path: `--save-parts` names every file itself (`part-N` and a type from its own list), so
/// nothing is written outside the folder; a blob that calls itself a PNG but is not one is
/// saved as `.bin`.
#[test]
fn saved_parts_stay_in_their_folder_whatever_they_say_they_are() {
    let tools = tools_dir(&[("painter", crate::guests::PAINTER)]);
    let outer = tempfile::tempdir().expect("temp dir");
    let saved = outer.path().join("parts");
    std::fs::create_dir(&saved).expect("mkdir");
    let output = toolcell_command()
        .args(["--tools"])
        .arg(tools.path())
        .args([
            "--no-builtin",
            "call",
            "painter",
            r#"{"make":"paths"}"#,
            "--save-parts",
        ])
        .arg(&saved)
        .output()
        .expect("run toolcell");
    assert!(output.status.success(), "{output:?}");
    let mut names: Vec<String> = std::fs::read_dir(&saved)
        .expect("the folder")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["part-0.bin", "part-1.bin", "part-3.png"]);
    assert_eq!(
        std::fs::read(saved.join("part-0.bin")).expect("the blob"),
        b"* * * * * root sh"
    );
    // Nothing beside the folder, nor where the URIs point.
    let beside: Vec<_> = std::fs::read_dir(outer.path())
        .expect("outer")
        .map(|entry| entry.expect("an entry").file_name())
        .collect();
    assert_eq!(beside, [std::ffi::OsString::from("parts")]);
    assert!(!std::path::Path::new("/tmp/escape").exists());
}

/// A disk that fills while parts are saved (a 64 KiB file system of the test's own, mounted in
/// a mount namespace, as root): the call fails with one line naming the file and the reason,
/// and no partial file is left.
#[test]
fn a_full_disk_while_saving_parts_is_a_clear_failure_that_leaves_nothing_behind() {
    let tools = tools_dir(&[("painter", crate::guests::PAINTER)]);
    let saved = tempfile::tempdir().expect("temp dir");
    let toolcell = crate::support::toolcell_binary();
    let script = format!(
        "mount -t tmpfs -o size=64k tmpfs {dir} && \
         {toolcell} --tools {tools} --no-builtin call --cap 2000000 painter \
           '{{\"make\":\"huge\",\"bytes\":400000}}' --save-parts {dir}; \
         echo \"exit=$?\"; ls -A {dir}; echo end",
        dir = saved.path().display(),
        toolcell = toolcell.display(),
        tools = tools.path().display()
    );
    let output = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env(
            toolcell::cache::CACHE_DIR_ENV,
            crate::support::test_cache().0,
        )
        .env(
            toolcell::cache::CACHE_KEY_ENV,
            crate::support::test_cache().1,
        )
        .output()
        .expect("unshare (util-linux; the tests run as root)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stdout.contains("exit=1"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("part-0.png") && stderr.contains("No space left on device"),
        "{stderr}"
    );
    assert!(
        stdout.trim_end().ends_with("exit=1\nend"),
        "a file was left behind: {stdout}"
    );
}

/// A real MCP client (the Python `mcp` package) receives each part as the content block MCP
/// defines (image and audio as base64 of the very bytes, resources and links), over stdio in
/// both eras and over HTTP; a part that breaks a rule is an error result; a misspelt tool is
/// named with the one it meant.
#[test]
fn parts_reach_a_real_mcp_client_as_content_blocks() {
    let _guard = exclusive();
    let tools = tools_dir(&[
        ("painter", crate::guests::PAINTER),
        ("test_image_content", crate::guests::TEST_IMAGE_CONTENT),
        ("test_audio_content", crate::guests::TEST_AUDIO_CONTENT),
        (
            "test_embedded_resource",
            crate::guests::TEST_EMBEDDED_RESOURCE,
        ),
    ]);
    for mode in ["auto", "legacy"] {
        let (passed, said) = crate::mcp::run_client(
            "parts.py",
            [
                "stdio".as_ref(),
                mode.as_ref(),
                toolcell_binary().as_os_str(),
                tools.path().as_os_str(),
            ],
        );
        assert!(passed, "stdio, {mode}: {said}");
    }
    let server = crate::http::Server::start(&["--tools", &tools.path().to_string_lossy()]);
    for mode in ["auto", "legacy"] {
        let (passed, said) =
            crate::mcp::run_client("parts.py", ["http", mode, server.url().as_str()]);
        assert!(passed, "http, {mode}: {said}\nserver: {}", server.stderr());
    }
}
