//! Arguments checked against the tool's JSON Schema, as the first stage of the call: under its
//! deadline and stop token, and never on the async threads when it could take long.
//!
//! Past the house's 700 lines only by its unit tests, kept beside the code they test.
//!
//! Each tool's schema is checked against [`crate::tool::schema`]'s limits and compiled once, at load,
//! itself bounded in time ([`SCHEMA_COMPILE_TIMEOUT`]); a schema over a limit or that does not
//! compile refuses the tool. `jsonschema` is built without its network features, so a schema
//! can never make the host fetch anything, and patterns are compiled by the `regex` crate
//! (linear time, no backreferences or lookaround) with a bounded program size.
//!
//! At call time, a check whose estimated work is small ([`INLINE_VALIDATION_WORK`]) runs where
//! the call is: it ends in microseconds. A larger one runs on the host's blocking pool, on a
//! [`VALIDATION_STACK_BYTES`] stack that the schema's nesting limit cannot overflow, while the
//! call waits for it, its deadline or its stop token, whichever comes first. Every compiled
//! subschema carries a watch keyword that, every [`WATCH_EVERY`] subschemas, looks at the
//! deadline and the stop token; past either, the check unwinds at once and its thread is free
//! (with `panic = "abort"` there is no unwinding: the check then runs to its end, which the
//! limits bound, but the call still answers at its deadline).

use crate::call::names;
use crate::call::stop::StopToken;
use crate::tool::schema::{self, MAX_ARGUMENT_DEPTH, REGEX_SIZE_LIMIT, SchemaCost};
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most schema violations one refusal lists: enough to fix a call in one go, bounded so a
/// huge argument cannot produce a huge message.
pub const MAX_LISTED_VIOLATIONS: usize = 20;

/// The most characters of one violation's description: a violation quotes the failing value,
/// which may be most of a megabyte of arguments.
pub const MAX_VIOLATION_CHARS: usize = 400;

/// The most allowed property names a refusal of an unknown one lists: enough to show what an
/// object takes, bounded for a schema with hundreds.
pub const MAX_LISTED_ALLOWED: usize = 12;

/// How long compiling one tool's schema may take at load. Compiling a schema within the size
/// limits takes milliseconds; one that takes longer is refused rather than allowed to stall
/// the host's start (like [`DESCRIBE_TIMEOUT`](crate::call::limits::DESCRIBE_TIMEOUT)).
pub const SCHEMA_COMPILE_TIMEOUT: Duration = Duration::from_secs(1);

/// The most estimated work ([`estimated_work`]: subschema visits) a check may take where the
/// call is, rather than on the blocking pool. A subschema visit costs up to ~150 ns, so this is
/// about two milliseconds at worst; an echo's arguments are a few visits, a `write_file` of
/// 4 KiB a few hundred. Above it, the hand-off to another thread (tens of microseconds, and a
/// stack the schema's nesting cannot overflow) is worth its cost.
pub const INLINE_VALIDATION_WORK: u64 = 16 * 1024;

/// How many bytes of a string a length check may count for the cost of one subschema visit,
/// in a schema with no `pattern` or `format`: a character count runs at about a nanosecond a
/// byte, so a visit's ~150 ns pays for 16 bytes many times over.
pub const BYTES_PER_VISIT: u64 = 16;

/// What one byte of a string costs, in subschema visits, where the schema has a `pattern`,
/// `patternProperties` or `format`: the `regex` crate's slowest engine (the one it falls back
/// to when its automata give up on a large pattern such as `a[ab]{300}c`) was measured at
/// about 2 µs a byte, some thirteen visits.
pub const PATTERN_BYTE_VISITS: u64 = 16;

/// The most subschema nesting a check may have to run where the call is, on a stack the host
/// does not choose (a tokio worker's is 2 MiB).
pub const INLINE_MAX_NESTING: u64 = 32;

/// The stack of the threads that run larger checks and compile schemas: room for
/// [`MAX_VALIDATION_NESTING`](crate::tool::schema::MAX_VALIDATION_NESTING) subschemas many times
/// over (reserved address space; only what is used is backed by memory).
pub const VALIDATION_STACK_BYTES: usize = 32 * 1024 * 1024;

/// How many subschemas a check visits between two looks at its deadline and stop token.
pub const WATCH_EVERY: u32 = 64;

/// The keyword added to every compiled subschema to watch the deadline and the stop token.
const WATCH_KEYWORD: &str = "x-toolcell-watch";

/// A tool's compiled argument schema (or, with [`Subject::Result`], its output schema).
#[derive(Clone)]
pub(crate) struct ArgumentSchema {
    validator: Arc<jsonschema::Validator>,
    /// The schema as the tool gave it, where a refusal looks up the names an object allows.
    schema: Arc<Value>,
    cost: SchemaCost,
    /// What a value and a string's byte may cost beyond a visit (its `enum`s, its patterns).
    weights: Weights,
    subject: Subject,
}

/// What checking a value and a string's byte may cost against one schema, beyond a subschema
/// visit each: read from the schema when it is compiled, for [`estimated_work`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Weights {
    /// The most subschemas one value is checked against ([`SchemaCost`]).
    pub(crate) visits_per_value: u64,
    /// The most members of one `enum` in the schema (at least 1): a value is compared with
    /// them one by one.
    pub(crate) enum_members: u64,
    /// Whether a keyword scans strings with a regular expression or a format checker
    /// (`pattern`, `patternProperties`, `format`): bytes then cost [`PATTERN_BYTE_VISITS`]
    /// each, not one [`BYTES_PER_VISIT`]th.
    pub(crate) scans_slowly: bool,
}

impl Weights {
    /// The weights of `schema`, whose values meet at most `visits_per_value` subschemas and
    /// whose subschemas are at `pointers`.
    fn of(schema: &Value, pointers: &[String], visits_per_value: u64) -> Weights {
        let mut weights = Weights {
            visits_per_value,
            enum_members: 1,
            scans_slowly: false,
        };
        for pointer in pointers {
            let Some(Value::Object(map)) = schema.pointer(pointer) else {
                continue;
            };
            weights.scans_slowly |= ["pattern", "patternProperties", "format"]
                .iter()
                .any(|keyword| map.contains_key(*keyword));
            if let Some(Value::Array(members)) = map.get("enum") {
                let members = u64::try_from(members.len()).unwrap_or(u64::MAX);
                weights.enum_members = weights.enum_members.max(members);
            }
        }
        weights
    }
}

/// What a schema checks: a call's arguments, or a tool's result. Only the words differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subject {
    Arguments,
    Result,
}

impl Subject {
    /// Which of the tool's schemas it is.
    fn schema(self) -> &'static str {
        match self {
            Subject::Arguments => "input schema",
            Subject::Result => "output schema",
        }
    }

    /// The checked text, as a refusal names it.
    fn of(self, tool: &str) -> String {
        match self {
            Subject::Arguments => format!("the arguments for {tool}"),
            Subject::Result => format!("the result of {tool}"),
        }
    }

    /// The whole checked value, as a violation's place.
    fn whole(self) -> &'static str {
        match self {
            Subject::Arguments => "(the arguments)",
            Subject::Result => "(the result)",
        }
    }
}

/// What checking a call's arguments came to.
#[derive(Debug, PartialEq)]
pub(crate) enum Checked {
    /// They fit; here they are, parsed.
    Valid(Value),
    /// They do not (or are not JSON); why, naming each failing place.
    Invalid(String),
    /// The deadline passed first.
    TimedOut,
    /// The stop token was stopped first.
    Stopped,
}

impl ArgumentSchema {
    /// [`ArgumentSchema::compile_for`] the arguments.
    #[cfg(test)]
    pub(crate) fn compile(schema: &Value) -> Result<ArgumentSchema, String> {
        ArgumentSchema::compile_for(schema, Subject::Arguments)
    }

    /// Check `subject`'s schema against the limits and compile it; the error says why it is
    /// refused.
    pub(crate) fn compile_for(schema: &Value, subject: Subject) -> Result<ArgumentSchema, String> {
        if subject == Subject::Result {
            refuse_patterns(schema)?;
        }
        let cost = schema::check(schema)?;
        // The compiled copy carries the watch keyword in every subschema.
        let pointers = schema::subschema_pointers(schema);
        let mut watched = schema.clone();
        for pointer in &pointers {
            if let Some(Value::Object(map)) = watched.pointer_mut(pointer) {
                map.insert(WATCH_KEYWORD.to_owned(), Value::Bool(true));
            }
        }
        let validator = jsonschema::options()
            .with_pattern_options(
                jsonschema::PatternOptions::regex()
                    .size_limit(REGEX_SIZE_LIMIT)
                    .dfa_size_limit(REGEX_SIZE_LIMIT),
            )
            .with_keyword(WATCH_KEYWORD, |_, _, _| Ok(Box::new(Watch)))
            .build(&watched)
            .map_err(|error| {
                format!(
                    "its {} is not a valid JSON Schema: {error}",
                    subject.schema()
                )
            })?;
        Ok(ArgumentSchema {
            validator: Arc::new(validator),
            schema: Arc::new(schema.clone()),
            weights: Weights::of(schema, &pointers, cost.visits_per_value),
            cost,
            subject,
        })
    }

    /// [`ArgumentSchema::compile_for`] the arguments, on the blocking pool, given at most
    /// [`SCHEMA_COMPILE_TIMEOUT`]. Call it inside the host's runtime.
    pub(crate) async fn compile_bounded(schema: &Value) -> Result<ArgumentSchema, String> {
        ArgumentSchema::compile_bounded_for(schema, Subject::Arguments).await
    }

    /// [`ArgumentSchema::compile_bounded`] for `subject`'s schema.
    pub(crate) async fn compile_bounded_for(
        schema: &Value,
        subject: Subject,
    ) -> Result<ArgumentSchema, String> {
        let schema = schema.clone();
        let compiling = tokio::task::spawn_blocking(move || {
            catch_unwind(AssertUnwindSafe(|| {
                ArgumentSchema::compile_for(&schema, subject)
            }))
        });
        match tokio::time::timeout(SCHEMA_COMPILE_TIMEOUT, compiling).await {
            Ok(Ok(Ok(compiled))) => compiled,
            Ok(Ok(Err(_))) | Ok(Err(_)) => Err(format!(
                "compiling its {} failed inside the validator",
                subject.schema()
            )),
            Err(_) => Err(format!(
                "compiling its {} took longer than {} ms",
                subject.schema(),
                SCHEMA_COMPILE_TIMEOUT.as_millis()
            )),
        }
    }

    /// Whether the validator's two walks give `value` the same verdict: the yes-or-no walk a
    /// call's verdict comes from ([`ArgumentSchema::check`]), and the walk that names the
    /// violations (the fuzz target `schema` asserts it).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn walks_agree(&self, value: &Value) -> bool {
        self.validator.is_valid(value) == self.validator.iter_errors(value).next().is_none()
    }

    /// Parse `arguments` and check them, here and to the end. The error names every failing
    /// place in the arguments (as a JSON pointer) and what is wrong there.
    pub(crate) fn check(&self, tool: &str, arguments: &str) -> Result<Value, String> {
        // Named only in an error: a valid call formats nothing.
        let subject = || self.subject.of(tool);
        let instance: Value =
            serde_json::from_str(arguments).map_err(|error| match self.subject {
                Subject::Arguments => format!("{} are not JSON: {error}", subject()),
                Subject::Result => format!("{} is not JSON: {error}", subject()),
            })?;
        let depth = schema::json_depth(&instance);
        if depth > MAX_ARGUMENT_DEPTH {
            let nest = match self.subject {
                Subject::Arguments => "nest",
                Subject::Result => "nests",
            };
            return Err(format!(
                "{} {nest} {depth} levels deep; at most {MAX_ARGUMENT_DEPTH} may",
                subject()
            ));
        }
        // The yes-or-no walk first: it stops at the first violation and builds no error, so a
        // valid value (nearly every call) costs least. Only an invalid one is walked again
        // for the violations to name; both walks read this one parsed value.
        if self.validator.is_valid(&instance) {
            return Ok(instance);
        }
        let mut violations = self.validator.iter_errors(&instance).peekable();
        if violations.peek().is_none() {
            // The two walks disagree only if the library does; the value is not let through
            // on the word of the second.
            return Err(format!(
                "{} could not be checked against the schema (the validator disagreed with \
                 itself)",
                subject()
            ));
        }
        let mut message = match self.subject {
            Subject::Arguments => format!("the arguments do not fit {tool}'s schema:"),
            Subject::Result => format!("the result of {tool} does not fit its output schema:"),
        };
        for (listed, violation) in violations.enumerate() {
            if listed == MAX_LISTED_VIOLATIONS {
                message.push_str("\n- (and more)");
                break;
            }
            let path = violation.instance_path().to_string();
            let at = if path.is_empty() {
                self.subject.whole().to_owned()
            } else {
                path
            };
            // A violation may quote a subschema: without the host's own keyword.
            let mut what = match violation.kind() {
                ValidationErrorKind::AdditionalProperties { unexpected } => {
                    self.unexpected(&violation.schema_path().to_string(), unexpected)
                }
                ValidationErrorKind::Required { property } => {
                    required(violation.to_string(), property, violation.instance())
                }
                _ => violation.to_string(),
            };
            for watch in [
                format!(",\"{WATCH_KEYWORD}\":true"),
                format!("\"{WATCH_KEYWORD}\":true,"),
                format!("\"{WATCH_KEYWORD}\":true"),
            ] {
                what = what.replace(&watch, "");
            }
            if let Some((cut, _)) = what.char_indices().nth(MAX_VIOLATION_CHARS) {
                what.truncate(cut);
                what.push_str(" [...]");
            }
            message.push_str(&format!("\n- at {at}: {what}"));
        }
        Err(message)
    }

    /// What a refusal says of properties an object's schema does not allow
    /// (`additionalProperties: false`): each by name (escaped and cut), with the nearest name
    /// the object does allow, when one is near. `schema_path` is the pointer to the
    /// `additionalProperties` keyword; the names allowed are the `properties` beside it (none
    /// when the path went through a `$ref`, which a pointer cannot follow).
    fn unexpected(&self, schema_path: &str, unexpected: &[String]) -> String {
        let beside = schema_path
            .strip_suffix("/additionalProperties")
            .unwrap_or_default();
        // None when the path cannot be followed; the object's `properties` (perhaps none).
        let allowed: Option<Vec<&str>> = self.schema.pointer(beside).map(|object| {
            object
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| properties.keys().map(String::as_str).collect())
                .unwrap_or_default()
        });
        let candidates = allowed.as_deref().unwrap_or_default();
        let mut said = String::new();
        for (index, name) in unexpected.iter().enumerate() {
            if said.len() > MAX_VIOLATION_CHARS {
                said.push_str(&format!("; and {} more", unexpected.len() - index));
                break;
            }
            if index > 0 {
                said.push_str("; ");
            }
            said.push_str(&format!("{} is not a property here", names::echoed(name)));
            if let Some(near) = names::nearest(name, candidates.iter().copied()).first() {
                said.push_str(&format!(" (did you mean {near:?}?)"));
            }
        }
        match allowed {
            None => {}
            Some(allowed) if allowed.is_empty() => said.push_str("; it takes no properties"),
            Some(allowed) => {
                let listed: Vec<String> = allowed
                    .iter()
                    .take(MAX_LISTED_ALLOWED)
                    .map(|name| format!("{name:?}"))
                    .collect();
                let more = if allowed.len() > MAX_LISTED_ALLOWED {
                    ", ..."
                } else {
                    ""
                };
                said.push_str(&format!("; it takes {}{more}", listed.join(", ")));
            }
        }
        said
    }

    /// Check `arguments` as a call's first stage: where the call is if the work is small,
    /// otherwise on the blocking pool of `pool` (whose threads must have
    /// [`VALIDATION_STACK_BYTES`] of stack), ending at `deadline` or when `stop` is stopped.
    pub(crate) async fn check_within(
        &self,
        pool: &tokio::runtime::Handle,
        tool: &str,
        arguments: &str,
        deadline: Instant,
        stop: Option<&StopToken>,
    ) -> Checked {
        if stop.is_some_and(StopToken::is_stopped) {
            return Checked::Stopped;
        }
        let work = estimated_work(arguments, &self.weights);
        if work <= INLINE_VALIDATION_WORK && self.cost.nesting <= INLINE_MAX_NESTING {
            return match self.check(tool, arguments) {
                Ok(value) => Checked::Valid(value),
                Err(why) => Checked::Invalid(why),
            };
        }
        let schema = self.clone();
        let tool_name = tool.to_owned();
        let (tool, arguments) = (tool.to_owned(), arguments.to_owned());
        let watched_stop = stop.cloned();
        let checking = pool.spawn_blocking(move || {
            watch(deadline, watched_stop, || schema.check(&tool, &arguments))
        });
        let never_stopped = StopToken::new();
        let stop = stop.unwrap_or(&never_stopped);
        tokio::select! {
            joined = checking => match joined {
                Ok(checked) => checked,
                Err(_) => Checked::Invalid(format!(
                    "checking {} failed inside the validator",
                    self.subject.of(&tool_name)
                )),
            },
            () = tokio::time::sleep_until(deadline.into()) => Checked::TimedOut,
            () = stop.stopped() => Checked::Stopped,
        }
    }
}

/// The subschema visits checking `arguments` may take, at most, against a schema of
/// `weights`: every value (and object key) is at most one structural character's worth (a
/// value follows `[`, `,` or `:`, a key `{` or `,`, and the first starts the text), checked
/// against each subschema a value meets and compared with the members of its largest `enum`;
/// and every byte may be scanned by each of those subschemas, at [`PATTERN_BYTE_VISITS`] a byte
/// where the schema has patterns or formats, one [`BYTES_PER_VISIT`]th of a visit where it
/// has none. A long string is one value and its bytes, not a value per byte: the arguments of
/// a `write_file` of 4 KiB are a few hundred visits, not 4,096 times the schema. An estimate
/// already past [`INLINE_VALIDATION_WORK`] from the bytes alone is not scanned.
pub(crate) fn estimated_work(arguments: &str, weights: &Weights) -> u64 {
    let bytes = u64::try_from(arguments.len()).unwrap_or(u64::MAX);
    let visits_per_value = weights.visits_per_value;
    let scanned = if weights.scans_slowly {
        bytes.saturating_mul(PATTERN_BYTE_VISITS)
    } else {
        bytes / BYTES_PER_VISIT
    }
    .saturating_mul(visits_per_value);
    if scanned > INLINE_VALIDATION_WORK {
        return scanned;
    }
    let structural = arguments
        .bytes()
        .filter(|byte| matches!(byte, b'[' | b'{' | b',' | b':'))
        .count();
    let values = u64::try_from(structural)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    values
        .saturating_mul(visits_per_value)
        .saturating_mul(weights.enum_members)
        .saturating_add(scanned)
}

/// A missing required property, and the property given in its place when one was given
/// under a near name (`"text" is a required property; "txt" was given: did you mean
/// "text"?`): the likeliest mistake, for a person and for a model.
fn required(said: String, property: &Value, object: &Value) -> String {
    let (Some(property), Some(object)) = (property.as_str(), object.as_object()) else {
        return said;
    };
    match names::nearest(property, object.keys().map(String::as_str)).first() {
        Some(given) => format!(
            "{said}; {} was given: did you mean {property:?}?",
            names::echoed(given)
        ),
        None => said,
    }
}

/// Refuse an output schema that uses a regular expression anywhere (`pattern`,
/// `patternProperties`). The host's own engine is linear-time, but the schema is served to MCP
/// clients as `outputSchema`, and clients check structured results with their own engines:
/// Python's `re`, JavaScript's `RegExp`, which backtrack. A hostile tool could otherwise hang
/// the client with a pattern such as `^(a|a)*$` and a result made to match it badly.
fn refuse_patterns(schema: &Value) -> Result<(), String> {
    for pointer in schema::subschema_pointers(schema) {
        if let Some(Value::Object(map)) = schema.pointer(&pointer)
            && let Some(keyword) = ["pattern", "patternProperties"]
                .into_iter()
                .find(|keyword| map.contains_key(*keyword))
        {
            let at = if pointer.is_empty() {
                "its root"
            } else {
                &pointer
            };
            return Err(format!(
                "its output schema uses `{keyword}` (at {at}): MCP clients check structured \
                 results with their own regular-expression engines, which may backtrack, so an \
                 output schema may not use `pattern` or `patternProperties`"
            ));
        }
    }
    Ok(())
}

/// Why a watched check unwound.
enum Interrupted {
    TimedOut,
    Stopped,
}

/// What the watch keyword looks at, for the check running on this thread.
struct Watched {
    deadline: Cell<Option<Instant>>,
    stop: RefCell<Option<StopToken>>,
    visits: Cell<u32>,
}

thread_local! {
    static WATCHED: Watched = const {
        Watched {
            deadline: Cell::new(None),
            stop: RefCell::new(None),
            visits: Cell::new(0),
        }
    };
}

/// Run `check` on this thread, unwinding out of it at `deadline` or when `stop` is stopped.
fn watch(
    deadline: Instant,
    stop: Option<StopToken>,
    check: impl FnOnce() -> Result<Value, String>,
) -> Checked {
    WATCHED.with(|watched| {
        watched.deadline.set(Some(deadline));
        watched.stop.replace(stop);
        watched.visits.set(0);
    });
    let outcome = catch_unwind(AssertUnwindSafe(check));
    WATCHED.with(|watched| {
        watched.deadline.set(None);
        watched.stop.replace(None);
    });
    match outcome {
        Ok(Ok(value)) => Checked::Valid(value),
        Ok(Err(why)) => Checked::Invalid(why),
        Err(payload) => match payload.downcast::<Interrupted>().map(|why| *why) {
            Ok(Interrupted::TimedOut) => Checked::TimedOut,
            Ok(Interrupted::Stopped) => Checked::Stopped,
            Err(_) => Checked::Invalid("checking the arguments failed inside the validator".into()),
        },
    }
}

/// The watch keyword: always valid; every [`WATCH_EVERY`] visits on a watched thread, it
/// unwinds the check if the deadline has passed or the stop token is stopped.
struct Watch;

impl Watch {
    fn visit() {
        let interrupted = WATCHED.with(|watched| {
            let deadline = watched.deadline.get()?;
            let visits = watched.visits.get().wrapping_add(1);
            watched.visits.set(visits);
            if visits % WATCH_EVERY != 0 {
                return None;
            }
            if Instant::now() >= deadline {
                return Some(Interrupted::TimedOut);
            }
            let stopped = watched
                .stop
                .borrow()
                .as_ref()
                .is_some_and(StopToken::is_stopped);
            stopped.then_some(Interrupted::Stopped)
        });
        if let Some(why) = interrupted {
            // Not a panic: `resume_unwind` skips the panic hook, so nothing is printed.
            std::panic::resume_unwind(Box::new(why));
        }
    }
}

impl<'i> jsonschema::Keyword<'i> for Watch {
    fn validate(&self, _instance: &'i Value) -> Result<(), jsonschema::ValidationError<'i>> {
        Watch::visit();
        Ok(())
    }

    fn is_valid(&self, _instance: &'i Value) -> bool {
        Watch::visit();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output schema is served to clients whose regex engines backtrack: no patterns in it,
    /// at any depth; a property merely named "pattern" is fine.
    #[test]
    fn an_output_schema_may_not_use_regular_expressions() {
        for refused in [
            json!({ "type": "object", "properties": { "s": { "not": { "pattern": "^a+$" } } } }),
            json!({ "type": "object", "patternProperties": { "^x": {} } }),
            json!({ "type": "object", "$defs": { "d": { "type": "string", "pattern": "a" } } }),
        ] {
            let why = ArgumentSchema::compile_for(&refused, Subject::Result)
                .err()
                .unwrap_or_else(|| panic!("refused: {refused}"));
            assert!(why.contains("may not use `pattern`"), "{refused}: {why}");
            // The same schema is fine for arguments, which the host alone checks.
            assert!(ArgumentSchema::compile_for(&refused, Subject::Arguments).is_ok());
        }
        let named = json!({ "type": "object", "properties": { "pattern": { "type": "string" } } });
        assert!(ArgumentSchema::compile_for(&named, Subject::Result).is_ok());
    }
    use serde_json::json;

    fn schema() -> ArgumentSchema {
        ArgumentSchema::compile(&json!({
            "type": "object",
            "properties": {
                "text": { "type": "string" },
                "count": { "type": "integer", "minimum": 0 },
                "nested": {
                    "type": "object",
                    "properties": { "flag": { "type": "boolean" } },
                    "additionalProperties": false
                }
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
    fn an_unknown_property_is_named_with_the_nearest_allowed_one() {
        // Forbidden by the schema: named, with the name it likely meant, and what is allowed.
        let error = schema()
            .check("t", r#"{"txt":"hi","nested":{"flgg":true}}"#)
            .expect_err("invalid");
        for needle in [
            r#""txt" is not a property here (did you mean "text"?); it takes "count", "nested", "text""#,
            r#""text" is a required property; "txt" was given: did you mean "text"?"#,
            r#"at /nested: "flgg" is not a property here (did you mean "flag"?); it takes "flag""#,
        ] {
            assert!(error.contains(needle), "{needle} missing from {error}");
        }
        // Not forbidden: the missing property still names the near one given in its place.
        let open = ArgumentSchema::compile(&json!({
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"]
        }))
        .expect("compiles");
        let error = open.check("t", r#"{"txt":"hi"}"#).expect_err("invalid");
        assert!(
            error.contains(r#""txt" was given: did you mean "text"?"#),
            "{error}"
        );
        // An object that takes nothing says so; a huge unknown name is cut.
        let none = ArgumentSchema::compile(
            &json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        )
        .expect("compiles");
        let huge = "k".repeat(100_000);
        let error = none
            .check("t", &format!(r#"{{"{huge}":1}}"#))
            .expect_err("invalid");
        assert!(error.contains("it takes no properties"), "{error}");
        assert!(error.len() < 2 * MAX_VIOLATION_CHARS, "{}", error.len());
    }

    #[test]
    fn a_quoted_subschema_is_shown_as_the_tool_wrote_it() {
        let schema =
            ArgumentSchema::compile(&json!({ "properties": { "n": { "not": { "const": 1 } } } }))
                .expect("compiles");
        let error = schema.check("t", r#"{"n":1}"#).expect_err("invalid");
        assert!(error.contains(r#"{"const":1}"#), "{error}");
        assert!(!error.contains(WATCH_KEYWORD), "{error}");
    }

    #[test]
    fn arguments_that_are_not_json_say_so() {
        let error = schema().check("t", "{not json").expect_err("invalid");
        assert!(error.contains("not JSON"), "{error}");
    }

    #[test]
    fn arguments_nested_too_deep_are_refused_before_validation() {
        let deep = format!(
            "{{\"text\":\"x\",\"nested\":{}1{}}}",
            "[".repeat(MAX_ARGUMENT_DEPTH),
            "]".repeat(MAX_ARGUMENT_DEPTH)
        );
        let error = schema().check("t", &deep).expect_err("too deep");
        assert!(error.contains("levels deep"), "{error}");
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
        // A server on loopback that would serve the referenced schema: it is never asked.
        let server = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        server.set_nonblocking(true).expect("nonblocking");
        let port = server.local_addr().expect("address").port();
        for reference in [
            format!("http://127.0.0.1:{port}/schema.json"),
            format!("http://127.0.0.1:{port}/schema.json#/definitions/a"),
        ] {
            let schema = json!({ "properties": { "a": { "$ref": reference } } });
            let error = ArgumentSchema::compile(&schema).err().expect("refused");
            assert!(error.contains("does not point inside"), "{error}");
            // And the validator itself, given the schema directly, does not fetch it either
            // (it is built without network features).
            assert!(jsonschema::validator_for(&schema).is_err());
        }
        assert!(
            matches!(server.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "something connected to the schema server"
        );
    }

    #[test]
    fn backreferences_and_lookaround_are_refused_and_patterns_still_work() {
        for pattern in [r"^(a|a)*\1b", r"^(?=a)a", r"(?<!x)y"] {
            let schema = json!({ "properties": { "s": { "type": "string", "pattern": pattern } } });
            let error = ArgumentSchema::compile(&schema).err().expect("refused");
            assert!(
                error.contains("not a valid JSON Schema"),
                "{pattern}: {error}"
            );
        }
        let schema = ArgumentSchema::compile(&json!({
            "properties": { "id": { "type": "string", "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}$" } }
        }))
        .expect("compiles");
        assert!(schema.check("t", r#"{"id":"0123abcd-ef01"}"#).is_ok());
        assert!(schema.check("t", r#"{"id":"nope"}"#).is_err());
    }

    #[test]
    fn a_pattern_too_big_to_compile_is_refused() {
        let schema =
            json!({ "properties": { "s": { "type": "string", "pattern": r"\w{100000}" } } });
        let error = ArgumentSchema::compile(&schema).err().expect("refused");
        assert!(error.contains("not a valid JSON Schema"), "{error}");
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
        // Each line is bounded too, however big the value it quotes.
        let schema =
            ArgumentSchema::compile(&json!({ "properties": { "a": { "type": "number" } } }))
                .expect("compiles");
        let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(100_000));
        let error = schema.check("t", &big).expect_err("invalid");
        assert!(error.len() < MAX_VIOLATION_CHARS + 200, "{}", error.len());
        assert!(error.ends_with("[...]"), "{error}");
    }

    /// A schema that checks every item of an array against 4,000 subschemas (two per branch),
    /// and arguments that make that take about a minute unwatched (58 s measured).
    fn slow() -> (ArgumentSchema, String) {
        let branches: Vec<Value> = (0..2000)
            .map(|i| json!({ "not": { "const": i } }))
            .collect();
        let schema = ArgumentSchema::compile(&json!({
            "type": "object",
            "properties": { "xs": { "type": "array", "items": { "allOf": branches } } }
        }))
        .expect("compiles");
        let arguments = format!(r#"{{"xs":[{}0]}}"#, "-1,".repeat(100_000));
        (schema, arguments)
    }

    #[test]
    fn the_estimate_counts_values_not_the_bytes_of_a_string() {
        // write_file's arguments with 4 KiB of text: three values and the text's bytes.
        let text = "lorem ipsum dolor sit amet ".repeat(152);
        let write = serde_json::to_string(&json!({ "path": "out.txt", "content": text }))
            .expect("serialises");
        assert!(write.len() > 4096, "{}", write.len());
        let scanned = |text: &str| u64::try_from(text.len()).expect("fits") / BYTES_PER_VISIT;
        let plain = |visits_per_value| Weights {
            visits_per_value,
            enum_members: 1,
            scans_slowly: false,
        };
        let work = estimated_work(&write, &plain(1));
        // `{` `:` `,` `:` and the first: five.
        assert_eq!(work, 5 + scanned(&write));
        assert!(work <= INLINE_VALIDATION_WORK);
        // Against a schema whose values each meet four subschemas, it is still checked here;
        // the estimate before (every byte a value) sent it to the pool.
        assert!(estimated_work(&write, &plain(4)) <= INLINE_VALIDATION_WORK);
        assert!(u64::try_from(write.len()).expect("fits") * 4 > INLINE_VALIDATION_WORK);
        // Commas inside a string are counted as if they were values: an estimate over, never under.
        assert_eq!(
            estimated_work(r#"{"a":",,,,"}"#, &plain(2)),
            2 * (1 + 2 + 4)
        );
        // Many small values: each one, times the subschemas a value meets.
        let many = format!("[{}0]", "1,".repeat(5000));
        assert_eq!(
            estimated_work(&many, &plain(3)),
            3 * (1 + 1 + 5000) + 3 * scanned(&many)
        );
        assert!(estimated_work(&many, &plain(4)) > INLINE_VALIDATION_WORK);
        // The slow schema below, with a handful of values, goes to the pool.
        let (slow, _) = slow();
        assert!(estimated_work(r#"{"xs":[-1,-2,-3]}"#, &slow.weights) > INLINE_VALIDATION_WORK);
        // Bytes alone past the bound: answered without the scan, still past it.
        let huge = "x".repeat(1 << 20);
        assert!(estimated_work(&huge, &plain(1)) > INLINE_VALIDATION_WORK);
    }

    /// The two shapes a hostile review found checked where the call is for about a second
    /// (past any deadline): a large `enum` compared with many values, and a pattern that runs
    /// on the regex crate's slowest engine over a long string. Both now go to the pool.
    #[test]
    fn large_enums_and_patterns_weigh_in_the_estimate() {
        let members: Vec<Value> = (0..16_500).map(|i| json!(f64::from(i) + 0.5)).collect();
        let enums = ArgumentSchema::compile(&json!({
            "type": "array", "items": { "enum": members }
        }))
        .expect("compiles");
        assert_eq!(enums.weights.enum_members, 16_500);
        let zeros = format!("[{}0]", "0,".repeat(14_499));
        assert!(estimated_work(&zeros, &enums.weights) > INLINE_VALIDATION_WORK);
        // A handful of values against a small enum is still checked here.
        let small = ArgumentSchema::compile(&json!({
            "type": "object", "properties": { "mode": { "enum": ["r", "w", "a"] } }
        }))
        .expect("compiles");
        assert!(estimated_work(r#"{"mode":"r"}"#, &small.weights) <= INLINE_VALIDATION_WORK);

        let pattern = ArgumentSchema::compile(&json!({
            "type": "object", "properties": { "s": { "type": "string", "pattern": "a[ab]{300}c" } }
        }))
        .expect("compiles");
        assert!(pattern.weights.scans_slowly);
        let long = serde_json::to_string(&json!({ "s": "ab".repeat(1024) })).expect("json");
        assert!(estimated_work(&long, &pattern.weights) > INLINE_VALIDATION_WORK);
        let format = ArgumentSchema::compile(&json!({ "format": "email" })).expect("compiles");
        assert!(format.weights.scans_slowly);
        // Without patterns the same string is a few hundred visits.
        let free = ArgumentSchema::compile(&json!({
            "type": "object", "properties": { "s": { "type": "string", "maxLength": 5000 } }
        }))
        .expect("compiles");
        assert!(!free.weights.scans_slowly);
        assert!(estimated_work(&long, &free.weights) <= INLINE_VALIDATION_WORK);
    }

    #[test]
    fn a_slow_check_ends_at_the_deadline_and_frees_its_thread() {
        let (schema, arguments) = slow();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_time()
            .build()
            .expect("runtime");
        let started = Instant::now();
        let deadline = started + Duration::from_millis(100);
        let checked = runtime.block_on(schema.check_within(
            runtime.handle(),
            "t",
            &arguments,
            deadline,
            None,
        ));
        assert_eq!(checked, Checked::TimedOut);
        // The one blocking thread is free again at once: the check unwound, it did not run on.
        let quick = ArgumentSchema::compile(&json!({ "type": "object" })).expect("compiles");
        let next = runtime.block_on(async {
            tokio::task::spawn_blocking(move || quick.check("t", "{}"))
                .await
                .expect("joined")
        });
        assert!(next.is_ok());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the slow check ran on: {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_slow_check_ends_when_stopped() {
        let (schema, arguments) = slow();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .expect("runtime");
        let stop = StopToken::new();
        let stopper = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            stopper.stop();
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let checked = runtime.block_on(schema.check_within(
            runtime.handle(),
            "t",
            &arguments,
            deadline,
            Some(&stop),
        ));
        assert_eq!(checked, Checked::Stopped);
        // Already stopped: not even started.
        let checked = runtime.block_on(schema.check_within(
            runtime.handle(),
            "t",
            "{}",
            deadline,
            Some(&stop),
        ));
        assert_eq!(checked, Checked::Stopped);
    }

    #[test]
    fn the_deepest_admitted_check_fits_its_stack() {
        // A recursive schema at the nesting limit's edge, and arguments at the depth limit,
        // checked on a thread with the validation stack.
        let mut level = json!({ "additionalProperties": { "$ref": "#/$defs/n" } });
        for _ in 0..5 {
            level = json!({ "allOf": [level] });
        }
        let schema =
            ArgumentSchema::compile(&json!({ "$ref": "#/$defs/n", "$defs": { "n": level } }))
                .expect("compiles");
        assert!(schema.cost.nesting > 400, "{:?}", schema.cost);
        let arguments = format!(
            "{}1{}",
            "{\"a\":".repeat(MAX_ARGUMENT_DEPTH),
            "}".repeat(MAX_ARGUMENT_DEPTH)
        );
        let checked = std::thread::Builder::new()
            .stack_size(VALIDATION_STACK_BYTES)
            .spawn(move || schema.check("t", &arguments))
            .expect("thread")
            .join()
            .expect("no overflow");
        assert!(checked.is_ok(), "{checked:?}");
    }
}
