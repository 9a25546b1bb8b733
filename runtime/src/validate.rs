//! Arguments checked against the tool's JSON Schema, before the gate and before anything is
//! instantiated.
//!
//! Each tool's schema is compiled once, at load; a schema that does not compile refuses the
//! tool. `jsonschema` is built without its network features, so a schema can never make the
//! host fetch anything: a remote `$ref` is a compile error.

use serde_json::Value;

/// The most schema violations one refusal lists: enough to fix a call in one go, bounded so a
/// huge argument cannot produce a huge message.
pub const MAX_LISTED_VIOLATIONS: usize = 20;

/// A tool's compiled argument schema.
pub(crate) struct ArgumentSchema {
    validator: jsonschema::Validator,
}

impl ArgumentSchema {
    /// Compile `schema`; the error says why it does not compile.
    pub(crate) fn compile(schema: &Value) -> Result<ArgumentSchema, String> {
        jsonschema::validator_for(schema)
            .map(|validator| ArgumentSchema { validator })
            .map_err(|error| format!("its input schema is not a valid JSON Schema: {error}"))
    }

    /// Parse `arguments` and check them; returns them parsed. The error names every failing
    /// place in the arguments (as a JSON pointer) and what is wrong there.
    pub(crate) fn check(&self, tool: &str, arguments: &str) -> Result<Value, String> {
        let instance: Value = serde_json::from_str(arguments)
            .map_err(|error| format!("the arguments for {tool} are not JSON: {error}"))?;
        let mut violations = self.validator.iter_errors(&instance).peekable();
        if violations.peek().is_none() {
            drop(violations);
            return Ok(instance);
        }
        let mut message = format!("the arguments do not fit {tool}'s schema:");
        for (listed, violation) in violations.enumerate() {
            if listed == MAX_LISTED_VIOLATIONS {
                message.push_str("\n- (and more)");
                break;
            }
            let path = violation.instance_path().to_string();
            let at = if path.is_empty() {
                "(the arguments)".to_owned()
            } else {
                path
            };
            message.push_str(&format!("\n- at {at}: {violation}"));
        }
        Err(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> ArgumentSchema {
        ArgumentSchema::compile(&json!({
            "type": "object",
            "properties": {
                "text": { "type": "string" },
                "count": { "type": "integer", "minimum": 0 },
                "nested": { "type": "object", "properties": { "flag": { "type": "boolean" } } }
            },
            "required": ["text"],
            "additionalProperties": false
        }))
        .expect("compiles")
    }

    #[test]
    fn valid_arguments_pass() {
        assert_eq!(
            schema().check("t", r#"{"text":"x","count":3}"#),
            Ok(json!({"text":"x","count":3}))
        );
    }

    #[test]
    fn every_failing_path_is_listed() {
        let error = schema()
            .check("t", r#"{"count":-1,"nested":{"flag":"yes"},"extra":1}"#)
            .expect_err("invalid");
        assert!(
            error.starts_with("the arguments do not fit t's schema:"),
            "{error}"
        );
        for needle in [
            "/count",
            "/nested/flag",
            "\"text\" is a required property",
            "extra",
        ] {
            assert!(error.contains(needle), "{needle} missing from {error}");
        }
        assert!(error.lines().count() >= 5, "{error}");
    }

    #[test]
    fn arguments_that_are_not_json_say_so() {
        let error = schema().check("t", "{not json").expect_err("invalid");
        assert!(error.contains("not JSON"), "{error}");
    }

    #[test]
    fn a_schema_that_does_not_compile_is_refused() {
        let error = ArgumentSchema::compile(&json!({ "type": "no-such-type" }))
            .err()
            .expect("refused");
        assert!(error.contains("not a valid JSON Schema"), "{error}");
    }

    #[test]
    fn a_remote_ref_is_never_fetched() {
        let schema = json!({ "$ref": "https://example.com/schema.json" });
        assert!(ArgumentSchema::compile(&schema).is_err());
    }

    #[test]
    fn the_list_of_violations_is_bounded() {
        let schema = ArgumentSchema::compile(&json!({
            "type": "object",
            "additionalProperties": { "type": "string" }
        }))
        .expect("compiles");
        let many: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
        let error = schema
            .check("t", &Value::Object(many).to_string())
            .expect_err("invalid");
        assert_eq!(
            error.lines().count(),
            1 + MAX_LISTED_VIOLATIONS + 1,
            "{error}"
        );
    }
}
