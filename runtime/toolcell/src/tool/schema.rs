//! What a tool's JSON Schema may ask of the host, decided before the schema is compiled.
//!
//! Past the house's 700 lines only by its unit tests (one per bound), kept beside the code they
//! test.
//!
//! A schema comes from the tool (a component's `describe()`, or a native tool's
//! [`ToolInfo`](crate::ToolInfo)), yet the host compiles it and runs it on every call, outside
//! the sandbox. So it is untrusted input with limits, each a named constant below, checked
//! when the tool is loaded; a schema over any of them refuses its tool, by name, and the other
//! tools load.
//!
//! Most limits bound size. Two bound *work*, by a static estimate over the schema's graph:
//!
//! - **visits per value** ([`MAX_VALUE_VISITS`]): the most subschemas one argument value (the
//!   arguments object, or any value nested in it) can be checked against. Applicators on the
//!   same value (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas`,
//!   `$ref`) add up; so nested `anyOf`s through `$ref`s, which double the work (and the error
//!   tree) per level, are refused however small the schema. Children of a value (`properties`,
//!   `items`, ...) are counted per child, choosing adversarially between an object and an array
//!   at each level, down to [`MAX_ARGUMENT_DEPTH`].
//! - **nesting** ([`MAX_VALIDATION_NESTING`]): the longest chain of subschemas one check
//!   recurses through, which bounds the validator's stack.
//!
//! A `$ref` may only point inside the schema (`#` or `#/json/pointer`), and the keywords that
//! would make resolution depend on more than a pointer (`$dynamicRef`, `$recursiveRef`, dynamic
//! and recursive anchors, a nested `$id`, a `$ref` to an anchor) are refused: the estimate must
//! see the same graph the validator runs. A plain `$anchor` may name a subschema (MCP's JSON
//! Schema 2020-12 tools do, SEP-2106); since no `$ref` may use it, it changes no edge. A `$ref` loop that never descends into the arguments would recurse without end: it is
//! refused too. Patterns are compiled by the `regex` crate (linear time; no backreferences or
//! lookaround, which are refused), each with a bounded program size; and since the schema is
//! also served to clients whose engines backtrack, a pattern with the shapes that make those
//! take exponential time (`(a+)+`, `(a|a)*`) is refused (`tool/backtrack.rs`).

use serde_json::{Map, Value};
use std::collections::HashMap;

/// The most bytes a tool's schema may have, serialised. A model reads every schema with every
/// request, so real schemas are a few KB; this leaves room for generated ones (pydantic, zod)
/// while bounding what compiling one costs the host.
pub const MAX_SCHEMA_BYTES: usize = 128 * 1024;

/// The deepest a schema's JSON may nest. Bounds the recursion of everything that walks it
/// (serde_json, the compiler, this check); real schemas nest a dozen levels.
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// The most `$ref`s one schema may hold. Generated schemas use one per shared definition;
/// 20,000 chained `$ref`s overflowed the validator's stack.
pub const MAX_SCHEMA_REFS: usize = 256;

/// The most regular expressions (`pattern`, `patternProperties`) one schema may compile. Each
/// costs up to [`REGEX_SIZE_LIMIT`] of memory and time to compile; 20,000 took 203 s and 14 GB.
pub const MAX_SCHEMA_PATTERNS: usize = 128;

/// The longest one pattern may be, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;

/// The most memory one compiled pattern's program may take (the `regex` crate's size limit),
/// and its lazy DFA's cache. Bounds a pattern like `\w{1000}{1000}` that is short to write
/// but huge to compile; ordinary patterns (an email, a UUID, a date) take a few KB.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// The most subschemas one argument value may be checked against (see the module docs).
/// Ordinary schemas need a handful per value; a recursive one a few dozen.
pub const MAX_VALUE_VISITS: u64 = 4096;

/// The longest chain of subschemas one check may recurse through. Bounds the validator's
/// stack: a recursive schema over arguments [`MAX_ARGUMENT_DEPTH`] deep needs a few per level.
pub const MAX_VALIDATION_NESTING: u64 = 512;

/// The deepest a call's arguments may nest. The work estimates above hold up to this depth,
/// so deeper arguments are refused before validation (serde_json stops at 128 anyway); tool
/// arguments rarely nest more than five.
pub const MAX_ARGUMENT_DEPTH: usize = 64;

/// What checking a schema found: the estimates the caller decides where to validate by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SchemaCost {
    /// The most subschemas one argument value is checked against.
    pub(crate) visits_per_value: u64,
    /// The longest chain of subschemas one check recurses through.
    pub(crate) nesting: u64,
}

/// Same-value applicators whose value is one schema.
const SAME_ONE: [&str; 4] = ["not", "if", "then", "else"];
/// Same-value applicators whose value is an array of schemas.
const SAME_MANY: [&str; 3] = ["allOf", "anyOf", "oneOf"];
/// Keywords that make `$ref` resolution depend on more than a JSON pointer.
const UNSUPPORTED: [&str; 4] = [
    "$dynamicRef",
    "$recursiveRef",
    "$dynamicAnchor",
    "$recursiveAnchor",
];

/// Check `schema` against every limit in this module; return its cost, or why it is refused.
/// `schema` is the whole schema (its root is the document `#` refers to). It must be a JSON
/// object or a boolean.
pub(crate) fn check(schema: &Value) -> Result<SchemaCost, String> {
    let bytes = serialised_len(schema);
    if bytes > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its input schema is {bytes} bytes or more; a schema may have at most {MAX_SCHEMA_BYTES}"
        ));
    }
    let depth = json_depth(schema);
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "its input schema nests {depth} levels deep; a schema may nest at most {MAX_SCHEMA_DEPTH}"
        ));
    }
    let graph = Graph::build(schema)?;
    graph.cost()
}

/// The JSON pointers of every subschema of `schema` that [`check`] found, so a caller can
/// annotate each (the validator's watch keyword). Call only on a schema [`check`] accepted.
pub(crate) fn subschema_pointers(schema: &Value) -> Vec<String> {
    match Graph::build(schema) {
        Ok(graph) => graph.nodes.into_iter().map(|node| node.pointer).collect(),
        Err(_) => Vec::new(),
    }
}

/// The length of `value` serialised, counted without building the text; stops counting past
/// the limit.
fn serialised_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            if self.0 > MAX_SCHEMA_BYTES {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // An error only means the count passed the limit.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// How deep `value` nests (a scalar is 0), without recursion.
pub fn json_depth(value: &Value) -> usize {
    // Only arrays and objects go on the stack (a scalar is as deep as its container's other
    // members): a flat object of scalars, most calls' arguments, allocates nothing.
    let nested = |item: &&Value| matches!(item, Value::Array(_) | Value::Object(_));
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = Vec::new();
    let mut next = Some((value, 0));
    while let Some((value, depth)) = next.take().or_else(|| stack.pop()) {
        deepest = deepest.max(depth);
        match value {
            Value::Array(items) if !items.is_empty() => {
                deepest = deepest.max(depth + 1);
                stack.extend(items.iter().filter(nested).map(|item| (item, depth + 1)));
            }
            Value::Object(map) if !map.is_empty() => {
                deepest = deepest.max(depth + 1);
                stack.extend(map.values().filter(nested).map(|item| (item, depth + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// Children of a value, as one subschema applies them: `exclusive` ones each reach a different
/// child (named properties, tuple items), `shared` ones may all reach the same child.
#[derive(Default)]
struct Children {
    exclusive: Vec<usize>,
    shared: Vec<usize>,
}

/// One subschema and the subschemas it applies.
struct Node {
    /// Where it is, as a JSON pointer (for messages and annotation).
    pointer: String,
    /// Subschemas applied to the same value.
    same: Vec<usize>,
    /// Subschemas applied to an object's members.
    members: Children,
    /// Subschemas applied to an array's items.
    items: Children,
}

/// Every subschema reachable from the root (by applicators and `$ref`), and the definitions.
struct Graph<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    /// Each subschema's node, by the address of its value in the schema: two pointers to one
    /// place are one node.
    index: HashMap<*const Value, usize>,
    /// Subschemas found but not yet walked.
    pending: Vec<(usize, &'a Value)>,
    refs: usize,
    patterns: usize,
}

impl<'a> Graph<'a> {
    fn build(root: &'a Value) -> Result<Graph<'a>, String> {
        let mut graph = Graph {
            root,
            nodes: Vec::new(),
            index: HashMap::new(),
            pending: Vec::new(),
            refs: 0,
            patterns: 0,
        };
        graph.node(root, String::new());
        while let Some((id, value)) = graph.pending.pop() {
            graph.walk(id, value)?;
        }
        Ok(graph)
    }

    /// The node of the subschema `value` at `pointer`, added (and queued) if new.
    fn node(&mut self, value: &'a Value, pointer: String) -> usize {
        let key: *const Value = value;
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.nodes.len();
        self.nodes.push(Node {
            pointer,
            same: Vec::new(),
            members: Children::default(),
            items: Children::default(),
        });
        self.index.insert(key, id);
        self.pending.push((id, value));
        id
    }

    /// Read the subschema `value` (node `id`): its edges, refs and patterns.
    fn walk(&mut self, id: usize, value: &'a Value) -> Result<(), String> {
        let Value::Object(map) = value else {
            // `true` and `false` apply nothing.
            return Ok(());
        };
        let here = self.nodes[id].pointer.clone();
        let at = |keyword: &str| format!("{here}/{}", escape(keyword));
        for keyword in UNSUPPORTED {
            if map.contains_key(keyword) {
                return Err(format!(
                    "its input schema uses {keyword} at {:?}; toolcell resolves only $refs \
                     within the schema (\"#\" or \"#/json/pointer\")",
                    display(&here)
                ));
            }
        }
        if id != 0 && (map.contains_key("$id") || map.get("id").is_some_and(Value::is_string)) {
            return Err(format!(
                "its input schema sets an $id at {:?}; only the root may have one",
                display(&here)
            ));
        }
        if let Some(reference) = map.get("$ref") {
            self.refs += 1;
            if self.refs > MAX_SCHEMA_REFS {
                return Err(format!(
                    "its input schema has more than {MAX_SCHEMA_REFS} $refs"
                ));
            }
            let target = self.resolve(reference, &here)?;
            self.nodes[id].same.push(target);
        }
        for keyword in SAME_ONE {
            if let Some(sub) = map.get(keyword) {
                let target = self.node(sub, at(keyword));
                self.nodes[id].same.push(target);
            }
        }
        for keyword in SAME_MANY {
            for (i, sub) in array_items(map, keyword) {
                let target = self.node(sub, format!("{}/{i}", at(keyword)));
                self.nodes[id].same.push(target);
            }
        }
        for keyword in ["dependentSchemas", "dependencies"] {
            for (name, sub) in object_members(map, keyword) {
                // `dependencies` also holds arrays of property names, which are not schemas.
                if sub.is_object() || sub.is_boolean() {
                    let target = self.node(sub, format!("{}/{}", at(keyword), escape(name)));
                    self.nodes[id].same.push(target);
                }
            }
        }
        // Members of an object.
        for (name, sub) in object_members(map, "properties") {
            let target = self.node(sub, format!("{}/{}", at("properties"), escape(name)));
            self.nodes[id].members.exclusive.push(target);
        }
        for (pattern, sub) in object_members(map, "patternProperties") {
            self.pattern(pattern, &here)?;
            let target = self.node(
                sub,
                format!("{}/{}", at("patternProperties"), escape(pattern)),
            );
            self.nodes[id].members.shared.push(target);
        }
        for keyword in [
            "additionalProperties",
            "unevaluatedProperties",
            "propertyNames",
        ] {
            if let Some(sub) = map.get(keyword) {
                let target = self.node(sub, at(keyword));
                self.nodes[id].members.shared.push(target);
            }
        }
        // Items of an array.
        match map.get("items") {
            Some(Value::Array(_)) => {
                for (i, sub) in array_items(map, "items") {
                    let target = self.node(sub, format!("{}/{i}", at("items")));
                    self.nodes[id].items.exclusive.push(target);
                }
            }
            Some(sub) => {
                let target = self.node(sub, at("items"));
                self.nodes[id].items.shared.push(target);
            }
            None => {}
        }
        for (i, sub) in array_items(map, "prefixItems") {
            let target = self.node(sub, format!("{}/{i}", at("prefixItems")));
            self.nodes[id].items.exclusive.push(target);
        }
        for keyword in ["additionalItems", "unevaluatedItems", "contains"] {
            if let Some(sub) = map.get(keyword) {
                let target = self.node(sub, at(keyword));
                self.nodes[id].items.shared.push(target);
            }
        }
        if let Some(pattern) = map.get("pattern").and_then(Value::as_str) {
            self.pattern(pattern, &here)?;
        }
        // Definitions are subschemas too (checked and annotated like the rest), though they
        // apply only where a `$ref` reaches them.
        for keyword in ["$defs", "definitions"] {
            for (name, sub) in object_members(map, keyword) {
                self.node(sub, format!("{}/{}", at(keyword), escape(name)));
            }
        }
        Ok(())
    }

    /// Count one pattern, refusing it if there are too many or it is too long.
    fn pattern(&mut self, pattern: &str, here: &str) -> Result<(), String> {
        self.patterns += 1;
        if self.patterns > MAX_SCHEMA_PATTERNS {
            return Err(format!(
                "its input schema has more than {MAX_SCHEMA_PATTERNS} patterns"
            ));
        }
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(format!(
                "its input schema has a pattern of {} bytes at {:?}; a pattern may have at \
                 most {MAX_PATTERN_BYTES}",
                pattern.len(),
                display(here)
            ));
        }
        if let Some(why) = crate::tool::backtrack::risk(pattern) {
            return Err(format!(
                "its input schema has a pattern at {:?} that a backtracking regex engine (as \
                 clients that check arguments against the schema use) could take exponential \
                 time on: {why}",
                display(here)
            ));
        }
        Ok(())
    }

    /// The node a `$ref` (at `here`) points to.
    fn resolve(&mut self, reference: &Value, here: &str) -> Result<usize, String> {
        let refuse = |why: &str| {
            format!(
                "its input schema has a $ref {reference} at {:?} that {why}",
                display(here)
            )
        };
        let Some(fragment) = reference.as_str().and_then(|text| text.strip_prefix('#')) else {
            return Err(refuse(
                "does not point inside the schema (only \"#\" or \"#/json/pointer\" may)",
            ));
        };
        let pointer =
            percent_decode(fragment).ok_or_else(|| refuse("is not a valid URI fragment"))?;
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(refuse("names an anchor; only JSON pointers are supported"));
        }
        let root = self.root;
        match root.pointer(&pointer) {
            Some(target @ (Value::Object(_) | Value::Bool(_))) => Ok(self.node(target, pointer)),
            _ => Err(refuse("points at no subschema")),
        }
    }

    /// The estimates, or why the schema costs too much: see the module docs.
    fn cost(&self) -> Result<SchemaCost, String> {
        let order = self.same_value_order()?;
        let count = self.nodes.len();
        // Depth 0: only the same value. `visits[n]` is how many subschemas node n applies to
        // the value it is given; `nesting[n]` the longest chain it recurses through.
        let mut visits = vec![0u64; count];
        let mut nesting = vec![0u64; count];
        for &n in &order {
            let node = &self.nodes[n];
            visits[n] = node
                .same
                .iter()
                .fold(1u64, |sum, &t| sum.saturating_add(visits[t]));
            nesting[n] = 1 + node.same.iter().map(|&t| nesting[t]).max().unwrap_or(0);
        }
        let mut worst = visits[0];
        // Depth d: the value d levels below the one node n is given. For an object and for an
        // array, what reaches one child from n's children edges, plus the same from every
        // subschema n applies to the value itself; the worse of the two kinds.
        for _depth in 1..=MAX_ARGUMENT_DEPTH {
            let mut next = vec![0u64; count];
            let mut next_nesting = vec![0u64; count];
            let mut as_object = vec![0u64; count];
            let mut as_array = vec![0u64; count];
            for &n in &order {
                let node = &self.nodes[n];
                let reach = |children: &Children| {
                    let exclusive = children
                        .exclusive
                        .iter()
                        .map(|&t| visits[t])
                        .max()
                        .unwrap_or(0);
                    children
                        .shared
                        .iter()
                        .fold(exclusive, |sum, &t| sum.saturating_add(visits[t]))
                };
                as_object[n] = node.same.iter().fold(reach(&node.members), |sum, &t| {
                    sum.saturating_add(as_object[t])
                });
                as_array[n] = node.same.iter().fold(reach(&node.items), |sum, &t| {
                    sum.saturating_add(as_array[t])
                });
                next[n] = as_object[n].max(as_array[n]);
                let deepest_child = node
                    .members
                    .exclusive
                    .iter()
                    .chain(&node.members.shared)
                    .chain(&node.items.exclusive)
                    .chain(&node.items.shared)
                    .map(|&t| nesting[t])
                    .max()
                    .unwrap_or(0);
                let deepest_same = node.same.iter().map(|&t| next_nesting[t]).max();
                next_nesting[n] = 1 + deepest_child.max(deepest_same.unwrap_or(0));
            }
            worst = worst.max(next[0]);
            visits = next;
            nesting = next_nesting;
            if worst > MAX_VALUE_VISITS {
                break;
            }
        }
        if worst > MAX_VALUE_VISITS {
            return Err(format!(
                "its input schema could check one argument value against more than \
                 {MAX_VALUE_VISITS} subschemas (nested anyOf/oneOf/allOf or $refs multiply)"
            ));
        }
        let deepest = nesting[0];
        if deepest > MAX_VALIDATION_NESTING {
            return Err(format!(
                "its input schema could recurse through {deepest} subschemas in one check; \
                 at most {MAX_VALIDATION_NESTING} may"
            ));
        }
        Ok(SchemaCost {
            visits_per_value: worst,
            nesting: deepest,
        })
    }

    /// The nodes ordered so that everything a node applies to the same value comes before it;
    /// an error if a `$ref` loop applies a subschema to the same value without end.
    fn same_value_order(&self) -> Result<Vec<usize>, String> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Done,
        }
        let mut mark = vec![Mark::New; self.nodes.len()];
        let mut order = Vec::with_capacity(self.nodes.len());
        for start in 0..self.nodes.len() {
            if mark[start] != Mark::New {
                continue;
            }
            // Depth-first without recursion: (node, next edge to follow).
            let mut stack = vec![(start, 0usize)];
            mark[start] = Mark::Open;
            while let Some(&mut (n, ref mut edge)) = stack.last_mut() {
                if let Some(&t) = self.nodes[n].same.get(*edge) {
                    *edge += 1;
                    match mark[t] {
                        Mark::New => {
                            mark[t] = Mark::Open;
                            stack.push((t, 0));
                        }
                        Mark::Open => {
                            return Err(format!(
                                "its input schema loops: the subschema at {:?} applies itself \
                                 to the same value again through {:?}, without end",
                                display(&self.nodes[t].pointer),
                                display(&self.nodes[n].pointer)
                            ));
                        }
                        Mark::Done => {}
                    }
                } else {
                    mark[n] = Mark::Done;
                    order.push(n);
                    stack.pop();
                }
            }
        }
        Ok(order)
    }
}

/// The schemas in the array `map[keyword]`, with their indexes.
fn array_items<'a>(
    map: &'a Map<String, Value>,
    keyword: &str,
) -> impl Iterator<Item = (usize, &'a Value)> {
    map.get(keyword)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

/// The members of the object `map[keyword]`.
fn object_members<'a>(
    map: &'a Map<String, Value>,
    keyword: &str,
) -> impl Iterator<Item = (&'a String, &'a Value)> {
    map.get(keyword)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// `token` escaped for a JSON pointer.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// A pointer as messages show it: the root is `#`.
fn display(pointer: &str) -> String {
    format!("#{pointer}")
}

/// A URI fragment with its `%XX` escapes decoded; `None` if one is malformed or the result is
/// not UTF-8.
fn percent_decode(fragment: &str) -> Option<String> {
    let bytes = fragment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = fragment.get(i + 1..i + 3)?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cost(schema: Value) -> SchemaCost {
        check(&schema).expect("accepted")
    }

    fn refusal(schema: Value) -> String {
        check(&schema).expect_err("refused")
    }

    /// `levels` of `anyOf: [next, next]`, each a `$def`: 2^levels visits in a small schema.
    fn doubling(levels: usize) -> Value {
        let mut defs = Map::new();
        for level in 0..levels {
            let next = format!("#/$defs/l{}", level + 1);
            defs.insert(
                format!("l{level}"),
                json!({ "anyOf": [ { "$ref": next }, { "$ref": next } ] }),
            );
        }
        defs.insert(format!("l{levels}"), json!({ "type": "string" }));
        json!({
            "type": "object",
            "properties": { "x": { "$ref": "#/$defs/l0" } },
            "$defs": defs
        })
    }

    #[test]
    fn ordinary_schemas_cost_a_handful_of_visits() {
        let echo = cost(json!({
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"]
        }));
        assert_eq!(echo.visits_per_value, 1);
        assert!(echo.nesting <= 3, "{echo:?}");
        let nested = cost(json!({
            "type": "object",
            "properties": {
                "a": { "type": "array", "items": { "anyOf": [ {"type": "string"}, {"type": "null"} ] } },
                "b": { "$ref": "#/$defs/b" }
            },
            "$defs": { "b": { "type": "object", "properties": { "c": { "type": "integer" } } } }
        }));
        // An item of /a is checked against `items` and its two branches.
        assert_eq!(nested.visits_per_value, 3);
    }

    #[test]
    fn a_recursive_schema_costs_per_level_not_per_path() {
        // A JSON value as a tree of arrays and objects: only one branch descends at each
        // level, whichever kind the value is.
        let tree = cost(json!({
            "$ref": "#/$defs/node",
            "$defs": { "node": { "anyOf": [
                { "type": "array", "items": { "$ref": "#/$defs/node" } },
                { "type": "object", "additionalProperties": { "$ref": "#/$defs/node" } },
                { "type": ["string", "number", "boolean", "null"] }
            ] } }
        }));
        assert!(tree.visits_per_value <= 12, "{tree:?}");
        assert!(tree.nesting <= MAX_VALIDATION_NESTING, "{tree:?}");
    }

    #[test]
    fn doubling_anyof_is_refused_however_small_the_schema() {
        assert!(cost(doubling(10)).visits_per_value >= 1024);
        let schema = doubling(26);
        assert!(schema.to_string().len() < 2048);
        let error = refusal(schema);
        assert!(error.contains("more than 4096 subschemas"), "{error}");
    }

    #[test]
    fn a_long_ref_chain_is_refused() {
        let mut defs = Map::new();
        for i in 0..20_000 {
            defs.insert(
                format!("d{i}"),
                json!({ "$ref": format!("#/$defs/d{}", i + 1) }),
            );
        }
        defs.insert("d20000".to_owned(), json!({ "type": "string" }));
        let error = refusal(json!({ "$ref": "#/$defs/d0", "$defs": defs }));
        assert!(error.contains("bytes or more"), "{error}");
        // Under the size limit, the count of $refs and the nesting still stop it.
        let mut defs = Map::new();
        for i in 0..300 {
            defs.insert(
                format!("d{i}"),
                json!({ "$ref": format!("#/$defs/d{}", i + 1) }),
            );
        }
        defs.insert("d300".to_owned(), json!({}));
        let error = refusal(json!({ "$ref": "#/$defs/d0", "$defs": defs }));
        assert!(error.contains("more than 256 $refs"), "{error}");
    }

    #[test]
    fn a_ref_loop_on_one_value_is_refused_but_recursion_through_children_is_not() {
        let error = refusal(json!({ "$ref": "#" }));
        assert!(error.contains("loops"), "{error}");
        let error = refusal(json!({
            "$defs": { "a": { "allOf": [ { "$ref": "#/$defs/b" } ] }, "b": { "$ref": "#/$defs/a" } },
            "$ref": "#/$defs/a"
        }));
        assert!(error.contains("loops"), "{error}");
        cost(json!({ "type": "object", "additionalProperties": { "$ref": "#" } }));
    }

    #[test]
    fn refs_must_stay_inside_the_schema() {
        for (reference, why) in [
            ("https://example.com/s.json", "does not point inside"),
            ("other.json#/a", "does not point inside"),
            ("#anchor", "anchor"),
            ("#/$defs/missing", "no subschema"),
            ("#/$defs/%zz", "not a valid URI fragment"),
        ] {
            let error = refusal(json!({ "$ref": reference, "$defs": { "a": {} } }));
            assert!(error.contains(why), "{reference}: {error}");
        }
        // Escapes are decoded: `%24` is `$`.
        cost(json!({ "$ref": "#/%24defs/a", "$defs": { "a": {} } }));
        for keyword in UNSUPPORTED {
            let error = refusal(json!({ "properties": { "a": { keyword: "#x" } } }));
            assert!(error.contains(keyword), "{error}");
        }
        let error = refusal(json!({ "properties": { "a": { "$id": "https://other/" } } }));
        assert!(error.contains("only the root"), "{error}");
        // An anchor may name a subschema, but nothing may refer to it by that name.
        cost(json!({ "$defs": { "a": { "$anchor": "a" } }, "$ref": "#/$defs/a" }));
        let error = refusal(json!({ "$defs": { "a": { "$anchor": "a" } }, "$ref": "#a" }));
        assert!(error.contains("anchor"), "{error}");
        cost(json!({ "$id": "https://example.com/root", "type": "object" }));
    }

    #[test]
    fn sizes_depth_and_patterns_are_bounded() {
        let big = "x".repeat(MAX_SCHEMA_BYTES);
        assert!(refusal(json!({ "description": big })).contains("bytes or more"));
        let mut deep = json!({});
        for _ in 0..MAX_SCHEMA_DEPTH + 1 {
            deep = json!({ "not": deep });
        }
        assert!(refusal(deep).contains("nests"));
        let many: Map<String, Value> = (0..=MAX_SCHEMA_PATTERNS)
            .map(|i| (format!("^p{i}$"), json!({})))
            .collect();
        let error = refusal(json!({ "patternProperties": many }));
        assert!(error.contains("patterns"), "{error}");
        let long = "a".repeat(MAX_PATTERN_BYTES + 1);
        assert!(refusal(json!({ "pattern": long })).contains("a pattern of"));
    }

    #[test]
    fn a_deep_chain_of_children_is_refused_for_nesting() {
        // Each level descends one child through nine same-value hops; at the argument depth
        // limit that is more nesting than a check may recurse through, though each value is
        // checked against only ten subschemas.
        let mut level = json!({ "additionalProperties": { "$ref": "#/$defs/n" } });
        for _ in 0..8 {
            level = json!({ "allOf": [level] });
        }
        let schema = json!({ "$ref": "#/$defs/n", "$defs": { "n": level } });
        let error = refusal(schema);
        assert!(error.contains("recurse through"), "{error}");
    }

    /// The depth of a value: 0 for a scalar or an empty container, one more than its deepest
    /// member's for any other container, as the plain recursive reading says.
    #[test]
    fn json_depth_counts_the_levels_of_containers() {
        fn reference(value: &Value) -> usize {
            let members: Vec<&Value> = match value {
                Value::Array(items) => items.iter().collect(),
                Value::Object(map) => map.values().collect(),
                _ => Vec::new(),
            };
            members
                .into_iter()
                .map(|member| reference(member) + 1)
                .max()
                .unwrap_or(0)
        }
        for (value, depth) in [
            (json!("a"), 0),
            (json!({}), 0),
            (json!([]), 0),
            (json!({ "text": "hi", "n": 1 }), 1),
            (json!({ "a": {} }), 1),
            (json!({ "a": [[]] }), 2),
            (json!([1, [2, [3, [4]]], { "b": 5 }]), 4),
            (
                json!({ "a": 1, "b": { "c": [1, { "d": null }] }, "e": [] }),
                4,
            ),
        ] {
            assert_eq!(json_depth(&value), depth, "{value}");
            assert_eq!(reference(&value), depth, "{value}");
        }
    }
}
