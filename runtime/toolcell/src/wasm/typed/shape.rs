//! A WIT type as toolcell serves it: the [`Shape`] of a parameter or a result, made once at load
//! from wasmtime's type, its JSON Schema, and the one JSON encoding every value of it has.
//!
//! The encoding (documented, with an example per type, in `docs/writing-tools.md`, "Components
//! as they are"):
//!
//! | WIT | JSON |
//! |---|---|
//! | `bool` | `true` |
//! | `u8` ... `s64` | an integer within the type's own range (`u64` up to 18446744073709551615) |
//! | `f32`, `f64` | a number, or `"NaN"`, `"Infinity"`, `"-Infinity"` |
//! | `char` | a string of one character |
//! | `string` | a string |
//! | `list<T>` | an array of T (`list<u8>` too: an array of integers 0-255) |
//! | `record` | an object with every field, and no other |
//! | `tuple<A, B>` | an array `[a, b]` of exactly that length |
//! | `option<T>` | `null` for none, T for some; when T is itself an option, some is `{"some": T}` |
//! | `result<T, E>` | `{"ok": T}` or `{"err": E}` (`null` for a missing payload) |
//! | `variant` | `{"case": payload}` (`null` for a case without one) |
//! | `enum` | the case's name, a string |
//! | `flags` | an array of the names set, each once |
//!
//! Resource handles (`own`, `borrow`), and the async types (`future`, `stream`,
//! `error-context`) cannot be sent as JSON: a function that takes or returns one is left out,
//! with the reason.

use serde_json::{Value, json};
use wasmtime::component::types::Type;

/// The most nodes (types, and each field's, case's and flag's name) one function's parameters
/// and result may hold together: far above a real function's (a 20-field record is 41), low
/// enough that a hostile component's 10,000-field records or 10,000-case enums cannot make
/// schemas of megabytes or conversions of milliseconds.
pub const MAX_SHAPE_NODES: usize = 4096;

/// The most nodes all of one component's functions may hold together: sixteen functions at
/// [`MAX_SHAPE_NODES`], far above a real component's, so that 256 functions each just under
/// their own bound cannot make a load of gigabytes (each name is held once per use, and again
/// in the schema).
pub const MAX_COMPONENT_SHAPE_NODES: usize = 16 * MAX_SHAPE_NODES;

/// How deeply a function's types may nest (a list of records of options of ...): a real
/// function's nest a handful deep, and a model writes no deeper. Bounds every walk over a
/// shape, a schema or a value (each recurses once a level) whatever a hostile component says.
pub const MAX_SHAPE_DEPTH: usize = 32;

/// The longest name (a field's, a case's, a flag's, a parameter's) a function may use: WIT
/// names are identifiers; a longer one is a hostile component's, and would be echoed in
/// schemas and messages.
pub const MAX_WIT_NAME_BYTES: usize = 256;

/// A WIT type, as toolcell converts and describes its values.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Shape {
    Bool,
    S8,
    U8,
    S16,
    U16,
    S32,
    U32,
    S64,
    U64,
    F32,
    F64,
    Char,
    String,
    List(Box<Shape>),
    Record(Vec<(String, Shape)>),
    Tuple(Vec<Shape>),
    Variant(Vec<(String, Option<Shape>)>),
    Enum(Vec<String>),
    Option(Box<Shape>),
    Result(Option<Box<Shape>>, Option<Box<Shape>>),
    Flags(Vec<String>),
}

/// Why a type cannot be served.
pub(crate) type Unservable = String;

impl Shape {
    /// The shape of `ty`, counting its nodes against `budget`: why not, for a resource handle,
    /// an async type, a name too long, or a type past the budget.
    pub(crate) fn of(ty: &Type, budget: &mut usize) -> Result<Shape, Unservable> {
        Shape::at(ty, budget, 0)
    }

    /// [`Shape::of`], `depth` levels down.
    fn at(ty: &Type, budget: &mut usize, depth: usize) -> Result<Shape, Unservable> {
        if depth > MAX_SHAPE_DEPTH {
            return Err(format!(
                "its types nest deeper than toolcell serves ({MAX_SHAPE_DEPTH} levels)"
            ));
        }
        let depth = depth + 1;
        if *budget == 0 {
            return Err(format!(
                "its types are larger than toolcell serves ({MAX_SHAPE_NODES} types, fields and \
                 cases in all)"
            ));
        }
        *budget -= 1;
        // Every name (a field's, a case's, a flag's) is a node of its own: an enum of 10,000
        // cases is 10,000 nodes, however small wasmparser counts its type.
        let named = |name: &str, budget: &mut usize| -> Result<String, Unservable> {
            if name.len() > MAX_WIT_NAME_BYTES {
                return Err(format!(
                    "it names something with {} bytes; at most {MAX_WIT_NAME_BYTES} are served",
                    name.len()
                ));
            }
            if *budget == 0 {
                return Err(format!(
                    "its types are larger than toolcell serves ({MAX_SHAPE_NODES} types, \
                     fields and cases in all)"
                ));
            }
            *budget -= 1;
            Ok(name.to_owned())
        };
        Ok(match ty {
            Type::Bool => Shape::Bool,
            Type::S8 => Shape::S8,
            Type::U8 => Shape::U8,
            Type::S16 => Shape::S16,
            Type::U16 => Shape::U16,
            Type::S32 => Shape::S32,
            Type::U32 => Shape::U32,
            Type::S64 => Shape::S64,
            Type::U64 => Shape::U64,
            Type::Float32 => Shape::F32,
            Type::Float64 => Shape::F64,
            Type::Char => Shape::Char,
            Type::String => Shape::String,
            Type::List(list) => Shape::List(Box::new(Shape::at(&list.ty(), budget, depth)?)),
            Type::Record(record) => Shape::Record(
                record
                    .fields()
                    .map(|field| {
                        let name = named(field.name, budget)?;
                        Ok((name, Shape::at(&field.ty, budget, depth)?))
                    })
                    .collect::<Result<_, Unservable>>()?,
            ),
            Type::Tuple(tuple) => Shape::Tuple(
                tuple
                    .types()
                    .map(|ty| Shape::at(&ty, budget, depth))
                    .collect::<Result<_, _>>()?,
            ),
            Type::Variant(variant) => Shape::Variant(
                variant
                    .cases()
                    .map(|case| {
                        let payload = match &case.ty {
                            Some(ty) => Some(Shape::at(ty, budget, depth)?),
                            None => None,
                        };
                        Ok((named(case.name, budget)?, payload))
                    })
                    .collect::<Result<_, Unservable>>()?,
            ),
            Type::Enum(names) => Shape::Enum(
                names
                    .names()
                    .map(|name| named(name, budget))
                    .collect::<Result<_, _>>()?,
            ),
            Type::Option(option) => {
                Shape::Option(Box::new(Shape::at(&option.ty(), budget, depth)?))
            }
            Type::Result(result) => {
                let side = |ty: Option<Type>, budget: &mut usize| -> Result<_, Unservable> {
                    ty.map(|ty| Shape::at(&ty, budget, depth).map(Box::new))
                        .transpose()
                };
                let ok = side(result.ok(), budget)?;
                let err = side(result.err(), budget)?;
                Shape::Result(ok, err)
            }
            Type::Flags(flags) => Shape::Flags(
                flags
                    .names()
                    .map(|name| named(name, budget))
                    .collect::<Result<_, _>>()?,
            ),
            Type::Own(_) | Type::Borrow(_) => {
                return Err(
                    "it takes or returns a resource handle (own or borrow), which JSON cannot \
                     carry"
                        .to_owned(),
                );
            }
            Type::Future(_) | Type::Stream(_) | Type::ErrorContext => {
                return Err(
                    "it takes or returns a future, a stream or an error-context (async types), \
                     which toolcell does not serve"
                        .to_owned(),
                );
            }
            _ => return Err("it uses a type toolcell does not serve".to_owned()),
        })
    }

    /// Whether a value of this shape may be JSON `null` (an option): an option of it must then
    /// write its `some` as `{"some": ...}`.
    pub(crate) fn nullable(&self) -> bool {
        matches!(self, Shape::Option(_))
    }

    /// The least and greatest value of an integer shape; `None` for any other.
    fn range(&self) -> Option<(i128, i128)> {
        Some(match self {
            Shape::S8 => (i8::MIN.into(), i8::MAX.into()),
            Shape::U8 => (0, u8::MAX.into()),
            Shape::S16 => (i16::MIN.into(), i16::MAX.into()),
            Shape::U16 => (0, u16::MAX.into()),
            Shape::S32 => (i32::MIN.into(), i32::MAX.into()),
            Shape::U32 => (0, u32::MAX.into()),
            Shape::S64 => (i64::MIN.into(), i64::MAX.into()),
            Shape::U64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }

    /// The JSON Schema of this shape's values.
    pub(crate) fn schema(&self) -> Value {
        if let Some((min, max)) = self.range() {
            return json!({ "type": "integer", "minimum": min, "maximum": max });
        }
        match self {
            Shape::Bool => json!({ "type": "boolean" }),
            Shape::S8
            | Shape::U8
            | Shape::S16
            | Shape::U16
            | Shape::S32
            | Shape::U32
            | Shape::S64
            | Shape::U64 => json!({ "type": "integer" }),
            Shape::F32 | Shape::F64 => json!({
                "anyOf": [
                    { "type": "number" },
                    { "enum": ["NaN", "Infinity", "-Infinity"] }
                ]
            }),
            Shape::Char => json!({ "type": "string", "minLength": 1, "maxLength": 1 }),
            Shape::String => json!({ "type": "string" }),
            Shape::List(item) => json!({ "type": "array", "items": item.schema() }),
            Shape::Record(fields) => {
                let properties: serde_json::Map<String, Value> = fields
                    .iter()
                    .map(|(name, shape)| (name.clone(), shape.schema()))
                    .collect();
                let required: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
                json!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false
                })
            }
            Shape::Tuple(items) => json!({
                "type": "array",
                "prefixItems": items.iter().map(Shape::schema).collect::<Vec<_>>(),
                "items": false,
                "minItems": items.len(),
                "maxItems": items.len()
            }),
            Shape::Variant(cases) => json!({
                "oneOf": cases
                    .iter()
                    .map(|(name, payload)| one_key(name, payload.as_ref()))
                    .collect::<Vec<_>>()
            }),
            Shape::Enum(names) => json!({ "type": "string", "enum": names }),
            Shape::Option(inner) => {
                let some = if inner.nullable() {
                    json!({
                        "type": "object",
                        "properties": { "some": inner.schema() },
                        "required": ["some"],
                        "additionalProperties": false
                    })
                } else {
                    inner.schema()
                };
                json!({ "anyOf": [{ "type": "null" }, some] })
            }
            Shape::Result(ok, err) => json!({
                "oneOf": [one_key("ok", ok.as_deref()), one_key("err", err.as_deref())]
            }),
            Shape::Flags(names) => json!({
                "type": "array",
                "items": { "type": "string", "enum": names },
                "uniqueItems": true
            }),
        }
    }

    /// A few words on what a value is, for generated descriptions ("an integer from 0 to 255").
    pub(crate) fn phrase(&self) -> String {
        match self {
            Shape::Bool => "true or false".to_owned(),
            Shape::S8 | Shape::U8 | Shape::S16 | Shape::U16 | Shape::S32 | Shape::U32 => {
                let (min, max) = self.range().unwrap_or_default();
                format!("an integer from {min} to {max}")
            }
            Shape::S64 => "a 64-bit integer".to_owned(),
            Shape::U64 => "an unsigned 64-bit integer".to_owned(),
            Shape::F32 | Shape::F64 => "a number".to_owned(),
            Shape::Char => "one character".to_owned(),
            Shape::String => "a string".to_owned(),
            Shape::List(item) => format!("a list, each {}", item.phrase()),
            Shape::Record(fields) => format!(
                "an object with {}",
                fields
                    .iter()
                    .map(|(name, _)| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Shape::Tuple(items) => format!("a list of {} values", items.len()),
            Shape::Variant(_) => "one of its cases, as {\"case\": value}".to_owned(),
            Shape::Enum(names) => format!("one of {}", quoted(names)),
            Shape::Option(inner) => format!("{}, or null", inner.phrase()),
            Shape::Result(_, _) => "{\"ok\": value} or {\"err\": value}".to_owned(),
            Shape::Flags(names) => format!("a list of any of {}", quoted(names)),
        }
    }
}

/// `"a", "b"` (at most the first eight names, then how many more).
fn quoted(names: &[String]) -> String {
    let mut shown: Vec<String> = names.iter().take(8).map(|n| format!("\"{n}\"")).collect();
    if names.len() > 8 {
        shown.push(format!("{} more", names.len() - 8));
    }
    shown.join(", ")
}

/// The schema of an object with exactly the one property `key`, whose value is `payload`'s (or
/// `null` when there is none).
fn one_key(key: &str, payload: Option<&Shape>) -> Value {
    let value = payload.map_or_else(|| json!({ "type": "null" }), Shape::schema);
    json!({
        "type": "object",
        "properties": { key: value },
        "required": [key],
        "additionalProperties": false
    })
}
