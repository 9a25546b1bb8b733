//! Tools written in JavaScript (`guest-tools/js/`), built from one source with componentize-js
//! (StarlingMonkey) and with componentize-qjs `--sync` (QuickJS), against the same WIT as the
//! Rust ones, and called through the same pipeline, error paths included.
//!
//! The toolchains are pinned by `guest-tools/js/package-lock.json` and installed with `npm ci`
//! into `target/js-tooling` on first use (`.ci/run` does it up front); see `toolchains.rs`.

use crate::toolchains::{Js, js_tool};
use toolcell::{Call, FailureKind, ToolResponse};

/// `json_pick`, the shipped JavaScript example, from each toolchain: its answers, each failure
/// it reports, arguments its schema refuses before JavaScript runs, and a crash.
#[test]
fn json_pick_in_javascript_answers_fails_and_is_validated() {
    for toolchain in [Js::StarlingMonkey, Js::QuickJs] {
        let runtime = {
            // Builds and compiles a component of up to 12 MB: CPU-heavy, so not while a
            // timing test measures.
            let _guard = crate::support::exclusive();
            let bytes = js_tool("json_pick", toolchain);
            crate::support::builder()
                .builtin_tools(false)
                .component("js:json_pick", bytes)
                .build()
                .expect("the runtime builds")
        };
        assert_eq!(runtime.load_errors(), &[], "{toolchain:?}");
        let info = runtime.info("json_pick").expect("json_pick is registered");
        assert!(
            info.read_only && info.capabilities.is_empty(),
            "{toolchain:?}"
        );
        // It declares its result's schema (an optional field, from JavaScript).
        assert_eq!(
            info.output_schema.as_ref().map(|schema| &schema["type"]),
            Some(&serde_json::json!("object")),
            "{toolchain:?}"
        );
        let call = |arguments: &str| {
            runtime
                .run_blocking(&Call::new("1", "json_pick", arguments))
                .response
        };
        let document = serde_json::json!({"tools": [{"name": "echo"}, {"a/b~c": 2}]});
        let pick = |pointers: serde_json::Value| {
            call(
                &serde_json::json!({"json": document.to_string(), "pointers": pointers})
                    .to_string(),
            )
        };
        let picked = |response: &ToolResponse| -> serde_json::Value {
            let ToolResponse::Result { text, .. } = response else {
                panic!("{toolchain:?}: not a result: {response:?}")
            };
            serde_json::from_str(text).expect("a JSON object")
        };

        assert_eq!(
            picked(&pick(serde_json::json!(["/tools/0", ""]))),
            serde_json::json!({"/tools/0": {"name": "echo"}, "": document}),
            "{toolchain:?}"
        );
        // RFC 6901's escapes: ~1 is "/", ~0 is "~".
        let escaped = pick(serde_json::json!(["/tools/1/a~1b~0c"]));
        assert_eq!(
            picked(&escaped),
            serde_json::json!({"/tools/1/a~1b~0c": 2}),
            "{toolchain:?}"
        );
        let missing = pick(serde_json::json!(["/tools/0", "/tools/0/name/x"]));
        assert!(
            matches!(&missing, ToolResponse::Failed { kind: FailureKind::NotFound, message } if message.contains("/tools/0/name/x")),
            "{toolchain:?}: {missing:?}"
        );
        // "01" is not an array index.
        let leading_zero = pick(serde_json::json!(["/tools/01"]));
        assert!(
            matches!(
                &leading_zero,
                ToolResponse::Failed {
                    kind: FailureKind::NotFound,
                    ..
                }
            ),
            "{toolchain:?}: {leading_zero:?}"
        );

        // The tool's own refusal of what its schema cannot express.
        let not_json = call(r#"{"json":"{nope","pointers":[""]}"#);
        assert!(
            matches!(&not_json, ToolResponse::Failed { kind: FailureKind::InvalidInput, message } if message.contains("not JSON")),
            "{toolchain:?}: {not_json:?}"
        );
        // Refused by the schema the tool declared, before any instance.
        for (arguments, why) in [
            (r#"{"json":"{}","pointers":[]}"#, "less than 1 item"),
            (r#"{"json":"{}","pointers":["tools"]}"#, "does not match"),
            (r#"{"json":"{}"}"#, "pointers"),
        ] {
            let refused = call(arguments);
            assert!(
                matches!(&refused, ToolResponse::Failed { kind: FailureKind::InvalidInput, message } if message.contains("schema") && message.contains(why)),
                "{toolchain:?} {arguments}: {refused:?}"
            );
        }

        // A crash: a document nested 3,000 deep overflows the engine's recursion when it is
        // written out again, an exception that is not a tool error. The guest traps; the call
        // answers with the failure, and the next one, in a fresh instance, answers as before.
        let deep = format!("{}{}", "[".repeat(3_000), "]".repeat(3_000));
        let crashed = call(&serde_json::json!({"json": deep, "pointers": [""]}).to_string());
        assert!(
            matches!(&crashed, ToolResponse::Failed { kind: FailureKind::Trap, message } if message.contains("crashed")),
            "{toolchain:?}: {crashed:?}"
        );
        assert_eq!(
            pick(serde_json::json!(["/tools/1/a~1b~0c"])),
            escaped,
            "{toolchain:?}"
        );
    }
}
