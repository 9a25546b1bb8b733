//! Components as they are (issue 50): a component built against a world of its own, with no
//! toolcell crate or WIT, is read by its types, and every function it exports is a tool, with
//! schemas from its types and one JSON encoding for every value; the ones JSON cannot call are
//! left out with the reason; a `result`'s `err` is a failure the model reads.

use serde_json::{Value, json};
use toolcell::{FailureKind, Runtime, ToolPort as _, ToolRequest, ToolResponse};

fn probe() -> Runtime {
    crate::support::builder()
        .builtin_tools(false)
        .component("test:typed_probe", crate::guests::TYPED_PROBE)
        .build()
        .expect("runtime")
}

/// Call `tool` of `runtime` with `arguments`.
pub(crate) fn call(runtime: &Runtime, tool: &str, arguments: Value) -> ToolResponse {
    runtime.call(&ToolRequest::new("t", tool, arguments.to_string()))
}

/// The text of a result (any other answer fails the test).
pub(crate) fn text(response: ToolResponse) -> String {
    match response {
        ToolResponse::Result { text, .. } => text,
        other => panic!("expected a result, got {other:?}"),
    }
}

/// The names of the tools `runtime` serves, sorted.
pub(crate) fn tool_names(runtime: &Runtime) -> Vec<String> {
    let mut names: Vec<String> = runtime
        .registry()
        .entries()
        .iter()
        .map(|entry| entry.schema.name.clone())
        .collect();
    names.sort();
    names
}

/// The `{"result": ...}` of a structured answer.
pub(crate) fn result(response: ToolResponse) -> Value {
    let text = text(response);
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    value["result"].clone()
}

const SHAPES: &str = "probe_typed_shapes_0_1_0";

/// Every function is a tool, named as the ecosystem names them; what cannot be called with
/// JSON is left out, saying why; schemas hold each type's bounds.
#[test]
pub(crate) fn typed_probe() {
    let runtime = probe();
    let names = tool_names(&runtime);
    assert_eq!(
        names,
        [
            "add",
            "bytes",
            "code-point",
            "crash",
            "divide",
            "echo",
            "fail",
            "nothing",
            &format!("{SHAPES}_identity"),
            &format!("{SHAPES}_wide-identity"),
        ]
    );
    let left_out: Vec<String> = runtime
        .load_errors()
        .iter()
        .map(ToString::to_string)
        .collect();
    for function in [
        "peek",
        "make",
        "[constructor]counter",
        "[method]counter.next",
    ] {
        assert!(
            left_out
                .iter()
                .any(|error| error.contains(&format!("#{function}")) && error.contains("left out")),
            "{function}: {left_out:?}"
        );
    }
    assert!(
        left_out
            .iter()
            .any(|error| error.contains("resource handle")),
        "{left_out:?}"
    );
    // The schema: one property per parameter, all required, none other; a u8 is 0-255.
    let add = runtime.info("add").expect("add");
    assert_eq!(add.input_schema["required"], json!(["a", "b"]));
    assert_eq!(add.input_schema["additionalProperties"], json!(false));
    assert_eq!(add.input_schema["properties"]["a"]["maximum"], json!(255));
    assert_eq!(add.input_schema["properties"]["a"]["minimum"], json!(0));
    assert!(add.description.contains("`a`"), "{}", add.description);
    // A string result has no output schema; another has one, wrapped.
    assert!(runtime.info("echo").expect("echo").output_schema.is_none());
    assert_eq!(
        add.output_schema.expect("an output schema")["required"],
        json!(["result"])
    );

    assert_eq!(
        text(call(&runtime, "echo", json!({ "text": "héllo" }))),
        "héllo"
    );
    assert_eq!(
        result(call(&runtime, "add", json!({ "a": 200, "b": 100 }))),
        json!(300)
    );
    assert_eq!(
        result(call(&runtime, "divide", json!({ "a": 1, "b": 4 }))),
        json!(0.25)
    );
    assert_eq!(
        result(call(&runtime, "code-point", json!({ "c": "é" }))),
        json!(233)
    );
    assert_eq!(text(call(&runtime, "nothing", json!({}))), "");
    // A `result`'s `err` is the tool's failure, its payload what the model reads.
    assert_eq!(
        call(&runtime, "divide", json!({ "a": 1, "b": 0 })),
        ToolResponse::failed(FailureKind::Tool, "cannot divide 1 by zero")
    );
    assert_eq!(
        call(&runtime, "fail", json!({ "why": "no such thing" })),
        ToolResponse::failed(FailureKind::Tool, "no such thing")
    );
    // Arguments that do not fit: refused before anything runs, naming where.
    for (tool, arguments, says) in [
        ("add", json!({ "a": 256, "b": 1 }), "/a"),
        ("add", json!({ "a": -1, "b": 1 }), "/a"),
        ("add", json!({ "a": 1 }), "b"),
        ("add", json!({ "a": 1, "b": 2, "c": 3 }), "c"),
        ("code-point", json!({ "c": "ab" }), "/c"),
        ("echo", json!({ "text": { "a": 1 } }), "/text"),
    ] {
        match call(&runtime, tool, arguments.clone()) {
            ToolResponse::Failed {
                kind: FailureKind::InvalidInput,
                message,
            } => assert!(message.contains(says), "{tool} {arguments}: {message}"),
            other => panic!("{tool} {arguments}: {other:?}"),
        }
    }
    // A trap is a crash, and the next call is unaffected.
    match call(&runtime, "crash", json!({})) {
        ToolResponse::Failed {
            kind: FailureKind::Trap,
            message,
        } => assert!(message.contains("asked to crash"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        text(call(&runtime, "echo", json!({ "text": "after" }))),
        "after"
    );
    // A result of a hundred megabytes (as values the host would hold) is refused as it is
    // lifted, as a failure; a small one is fine.
    assert_eq!(
        result(call(&runtime, "bytes", json!({ "count": 3 }))),
        json!([7, 7, 7])
    );
    match call(&runtime, "bytes", json!({ "count": 8_000_000 })) {
        ToolResponse::Failed { kind, message } => {
            assert!(
                matches!(kind, FailureKind::InvalidOutput | FailureKind::OutOfMemory),
                "{kind:?}: {message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// A small deterministic generator (xorshift), so a failing value can be made again.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn int(&mut self, min: i128, max: i128) -> Value {
        let edge = [min, max, 0.max(min), (min + max) / 2];
        let n = if self.below(3) == 0 {
            *self.pick(&edge)
        } else {
            min + i128::from(self.next()) % (max - min + 1)
        };
        if n < 0 {
            json!(i64::try_from(n).expect("in range"))
        } else {
            json!(u64::try_from(n).expect("in range"))
        }
    }

    fn float(&mut self, single: bool) -> Value {
        match self.below(6) {
            0 => json!("NaN"),
            1 => json!("Infinity"),
            2 => json!("-Infinity"),
            _ => {
                let x = (self.next() as f64 / u64::MAX as f64 - 0.5) * 1e6;
                let x = if single { f64::from(x as f32) } else { x };
                json!(x)
            }
        }
    }

    fn text(&mut self) -> String {
        (0..self.below(12))
            .map(|_| {
                let pool = ['a', 'z', 'é', '日', '🦀', '"', '\\', '\n', '\u{0}', ' '];
                *self.pick(&pool)
            })
            .collect()
    }

    /// A random `everything`, in the documented encoding.
    fn everything(&mut self) -> Value {
        let letters = ['x', 'é', '日', '🦀', '\u{10FFFF}'];
        let maybe_maybe = match self.below(3) {
            0 => json!(null),
            1 => json!({ "some": null }),
            _ => json!({ "some": self.int(0, 255) }),
        };
        let outcome = if self.below(2) == 0 {
            json!({ "ok": self.int(0, u32::MAX.into()) })
        } else {
            json!({ "err": self.text() })
        };
        let figure = match self.below(3) {
            0 => json!({ "point": null }),
            1 => json!({ "circle": self.float(false) }),
            _ => json!({ "square": self.int(0, u32::MAX.into()) }),
        };
        let flags: Vec<&str> = ["read", "write", "execute"]
            .into_iter()
            .filter(|_| self.below(2) == 0)
            .collect();
        json!({
            "flag": self.below(2) == 0,
            "tiny": self.int(i8::MIN.into(), i8::MAX.into()),
            "byte": self.int(0, u8::MAX.into()),
            "short": self.int(i16::MIN.into(), i16::MAX.into()),
            "word": self.int(0, u16::MAX.into()),
            "int": self.int(i32::MIN.into(), i32::MAX.into()),
            "uint": self.int(0, u32::MAX.into()),
            "long": self.int(i64::MIN.into(), i64::MAX.into()),
            "ulong": self.int(0, u64::MAX.into()),
            "single": self.float(true),
            "double": self.float(false),
            "letter": self.pick(&letters).to_string(),
            "text": self.text(),
            "bytes": (0..self.below(5)).map(|_| self.int(0, 255)).collect::<Vec<_>>(),
            "names": (0..self.below(4)).map(|_| self.text()).collect::<Vec<_>>(),
            "pair": [self.text(), self.int(0, u32::MAX.into())],
            "maybe": if self.below(2) == 0 { json!(null) } else { json!(self.text()) },
            "maybe-maybe": maybe_maybe,
            "outcome": outcome,
            "bare": if self.below(2) == 0 { json!({ "ok": null }) } else { json!({ "err": null }) },
            "figure": figure,
            "colour": *self.pick(&["red", "green", "blue"]),
            "access": flags,
        })
    }
}

/// Every WIT type round-trips: 300 generated values of a record holding every type (edges of
/// every integer range, `u64` past 2^53, NaN and the infinities, nested options, every case)
/// go in as JSON and come back as the same JSON; and the same over a whole pipeline's
/// validation, so the schema admits every value the encoding can write.
#[test]
fn every_wit_type_round_trips_through_a_typed_component() {
    let runtime = probe();
    let tool = format!("{SHAPES}_identity");
    let mut generate = Gen(0x9E37_79B9_7F4A_7C15);
    for round in 0..300 {
        let value = generate.everything();
        let answer = call(&runtime, &tool, json!({ "value": value }));
        let back = match answer {
            ToolResponse::Result { text, .. } => {
                serde_json::from_str::<Value>(&text).expect("JSON")["result"].clone()
            }
            other => panic!("round {round}: {value}: {other:?}"),
        };
        assert_eq!(back, value, "round {round}");
    }
}

/// A component in the component model's text format around one core module (a memory, a
/// `realloc`, and functions answering 0), with `items` (types, functions, instances, exports)
/// after it.
fn component(items: &str) -> Vec<u8> {
    let text = format!(
        r#"(component
  (core module $m
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) i32.const 8)
    (func (export "zero") (result i32) i32.const 0)
    (func (export "one") (param i32) (result i32) i32.const 0)
    (func (export "list") (param i32 i32) (result i32) i32.const 0))
  (core instance $i (instantiate $m))
  (alias core export $i "memory" (core memory $mem))
  (alias core export $i "realloc" (core func $realloc))
  (func $zero (result u32) (canon lift (core func $i "zero")))
  {items}
)"#
    );
    wat::parse_str(&text).unwrap_or_else(|error| panic!("{error}"))
}

/// Components of a hostile shape: 10,000 exports, a type nested 1,000 deep, names of 10 KB, two
/// exports that make one tool name, docs that are not docs, an enum of 5,000 cases, twenty
/// functions of 4,000 cases each. Each is a bounded, typed answer at
/// load, naming why (the component refused, or the one function left out), and the other tools
/// keep serving.
#[test]
fn a_hostile_components_shape_is_refused_at_load_and_the_others_serve() {
    let many: String = (0..10_000)
        .map(|n| format!("(export \"f{n}\" (func $zero))\n"))
        .collect();
    // A list of lists `levels` deep, as the parameter of `deep`, beside a `shallow` function.
    let nested = |levels: usize| {
        let mut deep = String::from("(type $t0 (list u32))\n");
        for n in 1..levels {
            deep.push_str(&format!("(type $t{n} (list $t{}))\n", n - 1));
        }
        deep.push_str(&format!(
            "(func $deep (param \"x\" $t{}) (result u32) (canon lift (core func $i \"list\") \
             (memory $mem) (realloc $realloc)))\n(export \"deep\" (func $deep))\n\
             (export \"shallow\" (func $zero))\n",
            levels - 1
        ));
        deep
    };
    let long_name = "a".repeat(10_000);
    let long = format!(
        "(export \"{long_name}\" (func $zero))\n\
         (func $param (param \"{long_name}\" u32) (result u32) (canon lift (core func $i \"one\")))\n\
         (export \"long-param\" (func $param))\n(export \"short\" (func $zero))\n"
    );
    let collide = "(instance $c (export \"f\" (func $zero)))\n\
                   (instance $b (export \"c\" (instance $c)))\n\
                   (instance $a (export \"b\" (instance $b)))\n\
                   (export \"a\" (instance $a))\n\
                   (instance $abc (export \"f\" (func $zero)))\n\
                   (export \"a:b/c\" (instance $abc))\n";
    // An enum of `cases` cases (wasmparser counts its type as one), the parameter of `NAME`.
    let wide_enum = |name: &str, cases: usize| {
        let cases: String = (0..cases).map(|n| format!(" \"case-{n}\"")).collect();
        format!(
            "(type $e-{name} (enum{cases}))\n(export $x-{name} \"e-{name}\" (type $e-{name}))\n\
             (func $f-{name} (param \"x\" $x-{name}) (result u32) (canon lift (core func $i \"one\")))\n\
             (export \"{name}\" (func $f-{name}))\n"
        )
    };
    let wide = wide_enum("wide", 5000) + "(export \"narrow\" (func $zero))\n";
    // Twenty functions, each under its own bound, over the component's together.
    let broad: String = (0..20).map(|n| wide_enum(&format!("g{n}"), 4000)).collect();
    let mut bad_docs = component("(export \"fine\" (func $zero))");
    // A `package-docs` section of one byte of version and no JSON.
    bad_docs.extend_from_slice(&[0, 14, 12]);
    bad_docs.extend_from_slice(b"package-docs");
    bad_docs.push(0);
    let runtime = crate::support::builder()
        .builtin_tools(false)
        .component("many", component(&many))
        .component("deeper", component(&nested(1000)))
        .component("deep", component(&nested(40)))
        .component("long", component(&long))
        .component("collide", component(collide))
        .component("bad-docs", bad_docs)
        .component("wide", component(&wide))
        .component("broad", component(&broad))
        .component("test:typed_probe", crate::guests::TYPED_PROBE)
        .build()
        .expect("runtime");
    let errors: Vec<String> = runtime
        .load_errors()
        .iter()
        .map(ToString::to_string)
        .collect();
    let said = |source: &str, why: &str| {
        assert!(
            errors
                .iter()
                .any(|error| error.starts_with(source) && error.contains(why)),
            "{source}: {why}: {errors:#?}"
        );
    };
    said("many", "functions or more");
    said("deeper", "type nesting is too deep");
    said("deep#\"deep\"", "nest deeper");
    said("long#\"long-param\"", "more than 256 bytes");
    said("long#\"aaaa", "more than 256 bytes");
    said("collide#\"a:b/c#f\"", "is \"a/b/c#f\"'s already");
    said("bad-docs", "package-docs");
    said("wide#\"wide\"", "larger than toolcell serves");
    said("broad#\"g19\"", "component's types are larger");
    for error in &errors {
        assert!(error.len() < 2048, "an error of {} bytes", error.len());
    }
    // What could be served is served: the shallow function, the short one beside the long
    // names, the first of the colliding pair, and every other component's tools.
    let names: Vec<String> = runtime
        .registry()
        .entries()
        .iter()
        .map(|entry| entry.schema.name.clone())
        .collect();
    for served in ["shallow", "short", "a_b_c_f", "echo", "add", "narrow", "g0"] {
        assert!(
            names.iter().any(|name| name == served),
            "{served}: {names:?}"
        );
    }
    assert!(
        !names.iter().any(|name| name.starts_with("aaaa")),
        "{names:?}"
    );
    assert_eq!(result(call(&runtime, "shallow", json!({}))), json!(0));
    assert_eq!(result(call(&runtime, "a_b_c_f", json!({}))), json!(0));
    assert_eq!(
        text(call(&runtime, "echo", json!({ "text": "still here" }))),
        "still here"
    );
}

/// A call's values that do not fit its types: a string where a record is expected, a number
/// past `u64`, a float that is no number, a `char` of two: refused before anything runs as
/// invalid input naming where, and the next call is served.
#[test]
fn values_that_do_not_fit_are_refused_naming_where() {
    let runtime = probe();
    let tool = format!("{SHAPES}_identity");
    for (arguments, says) in [
        (json!({ "value": "a record" }), "/value"),
        (json!({ "value": { "flag": true } }), "/value"),
        (json!({ "a": 1e30, "b": 1 }), "/a"),
        (json!({ "a": "not a number", "b": 1 }), "/a"),
        (json!({ "c": "ab" }), "/c"),
    ] {
        let name = if arguments.get("value").is_some() {
            tool.as_str()
        } else if arguments.get("c").is_some() {
            "code-point"
        } else if arguments["a"].is_string() {
            "divide"
        } else {
            "add"
        };
        match call(&runtime, name, arguments.clone()) {
            ToolResponse::Failed {
                kind: FailureKind::InvalidInput,
                message,
            } => assert!(message.contains(says), "{arguments}: {message}"),
            other => panic!("{arguments}: {other:?}"),
        }
    }
    // The encoding's own words for what JSON has no number for.
    assert_eq!(
        result(call(&runtime, "divide", json!({ "a": "NaN", "b": 1 }))),
        json!("NaN")
    );
    assert_eq!(
        result(call(
            &runtime,
            "divide",
            json!({ "a": 1, "b": "-Infinity" })
        )),
        json!(-0.0)
    );
    assert_eq!(
        result(call(&runtime, "add", json!({ "a": 1, "b": 2 }))),
        json!(3)
    );
}

/// The conversion `micro`'s benchmark times (`toolcell::fuzzing::TypedConversion`) is the one a
/// call makes: a 20-field record round-tripped with no instance equals what the component's
/// `wide-identity` answers, and what does not fit is refused by both.
#[test]
fn the_benchmarked_conversion_is_the_one_a_call_makes() {
    let tool = format!("{SHAPES}_wide-identity");
    let wide = json!({
        "f1": 1, "f2": 2, "f3": 3, "f4": 4, "f5": 4_000_000_000u32,
        "f6": "six", "f7": "seven", "f8": "eight", "f9": "nine", "f10": "ten",
        "f11": true, "f12": false, "f13": 13.5, "f14": -14.25, "f15": -15,
        "f16": null, "f17": [1, 7, 255], "f18": "green", "f19": ["read", "write"],
        "f20": [2, 0]
    });
    let arguments = json!({ "value": wide });
    let conversion = toolcell::fuzzing::TypedConversion::of(crate::guests::TYPED_PROBE, &tool)
        .expect("the wide function");
    let converted = conversion.round_trip(&arguments).expect("fits");
    assert_eq!(converted, arguments);
    assert_eq!(result(call(&probe(), &tool, arguments)), wide);

    let mut too_big = wide.clone();
    too_big["f17"] = json!([256]);
    let refused = conversion
        .round_trip(&json!({ "value": too_big }))
        .expect_err("256 is not a u8");
    assert!(refused.contains("f17"), "{refused}");
    assert!(
        call(&probe(), &tool, json!({ "value": too_big })).is_error(),
        "a call refuses it too"
    );
}

/// A tenant's policy may not say what a typed tool's calls need (`capabilities`,
/// `policy_yaml`): that is made once at load from the server's policy, so per call it would be
/// silently ignored (a tenant who tied a read to `/path` would get the yaml's whole directory).
#[test]
fn a_context_policy_may_not_say_what_a_tools_calls_need() {
    let runtime = probe();
    for text in [
        "[tools.echo]\ncapabilities = [{ kind = \"filesystem.read\", argument = \"/path\" }]\n",
        "[tools.echo]\npolicy_yaml = \"echo.policy.yaml\"\n",
    ] {
        let policy = toolcell::Policy::from_toml(text).expect("a policy");
        let refused = runtime.check_policy(&policy).expect_err("refused");
        assert!(
            refused.to_string().contains("capabilities, policy_yaml"),
            "{refused}"
        );
    }
    let plain =
        toolcell::Policy::from_toml("[tools.echo]\nenv = { access = \"allow\", vars = [\"A\"] }\n")
            .expect("a policy");
    runtime.check_policy(&plain).expect("usable");
}

/// The smallest typed component, as other runtimes serve it (`echo: func(text: string) ->
/// string`, the file the `calls` bench serves from toolcell and Wassette alike): served over
/// MCP stdio from a tools directory, `find_tool` finds it as `echo` taking a required string
/// `text`, and
/// a call answers the text as text, in a fresh instance each time.
#[test]
pub(crate) fn typed_echo() {
    let tools = crate::support::tools_dir(&[("echo", crate::guests::TYPED_ECHO)]);
    let dir = tools.path().to_str().expect("utf-8 path");
    let mut server = crate::mcp::Server::start(&["--no-builtin", "--tools", dir]);
    server.call(1, "find_tool", json!({ "query": "echo" }));
    let found = server.response(1);
    let found = crate::mcp::text(&found);
    let mut lines = found.lines();
    assert_eq!(lines.next(), Some("1 tool(s) match:"), "{found}");
    let found: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("a schema");
    assert_eq!(found["name"], "echo");
    let schema = &found["parameters"];
    assert_eq!(schema["properties"]["text"]["type"], "string", "{schema}");
    assert_eq!(schema["required"], json!(["text"]), "{schema}");
    for (id, text) in [(2, "hello"), (3, "again, in another instance")] {
        server.call(id, "echo", json!({ "text": text }));
        let answer = server.response(id);
        assert_eq!(crate::mcp::text(&answer), text, "{answer}");
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }
    server.call(4, "echo", json!({ "text": 7 }));
    let refused = server.response(4);
    assert!(
        refused["error"].is_object() || refused["result"]["isError"] == true,
        "a number is not a string: {refused}"
    );
    let (_, clean, _, stderr) = server.close();
    assert!(clean, "{stderr}");
}
