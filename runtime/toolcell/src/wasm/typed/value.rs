//! Values across the line between JSON and a component: a call's arguments, checked against
//! their schema already, made component values ([`to_val`]), and what the function returned
//! made JSON again ([`to_json`]), both walking the [`Shape`] made at load, never the JSON.
//!
//! A value that does not fit (a number out of its type's range, a string that is not one
//! character, a missing field) is refused with the JSON pointer of where it is, cut to a
//! bounded length: the model reads it, and fixes that value.

use super::shape::Shape;
use serde_json::{Map, Number, Value};
use wasmtime::component::Val;

/// The longest message of a value that does not fit (the pointer is cut first).
pub const MAX_VALUE_ERROR_CHARS: usize = 300;

/// `value`, which should be a `shape`, as a component value; or why not, naming where
/// (`at`, a JSON pointer).
pub(crate) fn to_val(shape: &Shape, value: &Value, at: &mut String) -> Result<Val, String> {
    Ok(match shape {
        Shape::Bool => match value {
            Value::Bool(b) => Val::Bool(*b),
            _ => return Err(refuse(at, "expected true or false")),
        },
        Shape::S8 => integer(value, at, Val::S8, (i8::MIN, i8::MAX))?,
        Shape::U8 => integer(value, at, Val::U8, (u8::MIN, u8::MAX))?,
        Shape::S16 => integer(value, at, Val::S16, (i16::MIN, i16::MAX))?,
        Shape::U16 => integer(value, at, Val::U16, (u16::MIN, u16::MAX))?,
        Shape::S32 => integer(value, at, Val::S32, (i32::MIN, i32::MAX))?,
        Shape::U32 => integer(value, at, Val::U32, (u32::MIN, u32::MAX))?,
        Shape::S64 => integer(value, at, Val::S64, (i64::MIN, i64::MAX))?,
        Shape::U64 => integer(value, at, Val::U64, (u64::MIN, u64::MAX))?,
        Shape::F64 => Val::Float64(float(value).ok_or_else(|| refuse(at, "expected a number"))?),
        Shape::F32 => float32(value, at)?,
        Shape::Char => char_of(value, at)?,
        Shape::String => match value {
            Value::String(text) => Val::String(text.clone()),
            _ => return Err(refuse(at, "expected a string")),
        },
        Shape::List(item) => list_of(item, value, at)?,
        Shape::Tuple(items) => tuple_of(items, value, at)?,
        Shape::Record(fields) => record_of(fields, value, at)?,
        Shape::Variant(cases) => variant_of(cases, value, at)?,
        Shape::Enum(names) => match value {
            Value::String(text) if names.iter().any(|name| name == text) => Val::Enum(text.clone()),
            _ => return Err(refuse(at, "expected one of the enum's names")),
        },
        Shape::Option(inner) => option_of(inner, value, at)?,
        Shape::Result(ok, err) => result_of((ok.as_deref(), err.as_deref()), value, at)?,
        Shape::Flags(names) => flags_of(names, value, at)?,
    })
}

/// Why a value does not fit, where it is (`at`): the message the model reads, cut to
/// [`MAX_VALUE_ERROR_CHARS`].
fn refuse(at: &str, what: &str) -> String {
    let at = if at.is_empty() { "/" } else { at };
    let mut message = format!("{at}: {what}");
    if message.chars().count() > MAX_VALUE_ERROR_CHARS {
        message = message
            .chars()
            .take(MAX_VALUE_ERROR_CHARS)
            .collect::<String>()
            + "…";
    }
    message
}

/// An integer of the type whose range is `min..=max`, made a value by `make`.
fn integer<T: TryFrom<i128> + std::fmt::Display>(
    value: &Value,
    at: &str,
    make: fn(T) -> Val,
    (min, max): (T, T),
) -> Result<Val, String> {
    let number = match value {
        Value::Number(number) => number,
        _ => return Err(refuse(at, "expected an integer")),
    };
    let fits = number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
        .and_then(|n| T::try_from(n).ok());
    match fits {
        Some(n) => Ok(make(n)),
        None => Err(refuse(
            at,
            &format!("{number} is not an integer from {min} to {max}"),
        )),
    }
}

/// A 32-bit float: a number (or a name JSON has none for) within its range.
fn float32(value: &Value, at: &str) -> Result<Val, String> {
    let x = float(value).ok_or_else(|| refuse(at, "expected a number"))?;
    #[allow(clippy::cast_possible_truncation)]
    let narrow = x as f32;
    if x.is_finite() && !narrow.is_finite() {
        return Err(refuse(
            at,
            &format!("{x:e} is beyond a 32-bit float's range"),
        ));
    }
    Ok(Val::Float32(narrow))
}

/// A character: a string of exactly one.
fn char_of(value: &Value, at: &str) -> Result<Val, String> {
    match value {
        Value::String(text) => {
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Ok(Val::Char(c)),
                _ => Err(refuse(at, "expected exactly one character")),
            }
        }
        _ => Err(refuse(at, "expected a string of one character")),
    }
}

/// A list: an array, each item an `item`.
fn list_of(item: &Shape, value: &Value, at: &mut String) -> Result<Val, String> {
    let Value::Array(items) = value else {
        return Err(refuse(at, "expected an array"));
    };
    let mut list = Vec::with_capacity(items.len());
    for (index, value) in items.iter().enumerate() {
        list.push(nested_at(at, index, |at| to_val(item, value, at))?);
    }
    Ok(Val::List(list))
}

/// A tuple: an array of exactly as many values as it has `items`, each of its own shape.
fn tuple_of(items: &[Shape], value: &Value, at: &mut String) -> Result<Val, String> {
    match value {
        Value::Array(values) if values.len() == items.len() => {
            let mut tuple = Vec::with_capacity(items.len());
            for (index, (shape, value)) in items.iter().zip(values).enumerate() {
                tuple.push(nested_at(at, index, |at| to_val(shape, value, at))?);
            }
            Ok(Val::Tuple(tuple))
        }
        _ => Err(refuse(
            at,
            &format!("expected an array of exactly {} values", items.len()),
        )),
    }
}

/// A record: an object with every one of its `fields` and no other key.
fn record_of(fields: &[(String, Shape)], value: &Value, at: &mut String) -> Result<Val, String> {
    let Value::Object(object) = value else {
        return Err(refuse(at, "expected an object"));
    };
    // Every field present and no more keys than fields: no key is extra (field names are
    // distinct), so the search for one is made only when the counts differ.
    if object.len() > fields.len()
        && let Some(extra) = object
            .keys()
            .find(|key| !fields.iter().any(|(f, _)| f == *key))
    {
        let extra = pointer_part(extra);
        return Err(refuse(at, &format!("no field named {extra}")));
    }
    // In the record's own order: wasmtime takes its fields in declaration order.
    let mut record = Vec::with_capacity(fields.len());
    for (name, shape) in fields {
        let Some(value) = object.get(name) else {
            return Err(refuse(at, &format!("the field {name} is missing")));
        };
        record.push((
            name.clone(),
            nested(at, name, |at| to_val(shape, value, at))?,
        ));
    }
    Ok(Val::Record(record))
}

/// A variant: an object of one key, one of its `cases`, and that case's payload.
fn variant_of(
    cases: &[(String, Option<Shape>)],
    value: &Value,
    at: &mut String,
) -> Result<Val, String> {
    let (case, payload) = one_key(value).ok_or_else(|| {
        refuse(
            at,
            "expected an object of one key, the case: {\"case\": value}",
        )
    })?;
    let Some((name, shape)) = cases.iter().find(|(name, _)| name == case) else {
        let case = pointer_part(case);
        return Err(refuse(at, &format!("no case named {case}")));
    };
    Ok(Val::Variant(
        name.clone(),
        payload_of(shape.as_ref(), payload, at, name)?,
    ))
}

/// An option: `null`, or its value (written `{"some": value}` when its `inner` shape can be
/// null itself).
fn option_of(inner: &Shape, value: &Value, at: &mut String) -> Result<Val, String> {
    Ok(match value {
        Value::Null => Val::Option(None),
        some if inner.nullable() => {
            let Value::Object(object) = some else {
                return Err(refuse(at, "expected null or {\"some\": value}"));
            };
            match (object.get("some"), object.len()) {
                (Some(value), 1) => Val::Option(Some(Box::new(nested(at, "some", |at| {
                    to_val(inner, value, at)
                })?))),
                _ => return Err(refuse(at, "expected null or {\"some\": value}")),
            }
        }
        some => Val::Option(Some(Box::new(to_val(inner, some, at)?))),
    })
}

/// A result: `{"ok": value}` or `{"err": value}`, each side's payload of its own shape.
fn result_of(
    (ok, err): (Option<&Shape>, Option<&Shape>),
    value: &Value,
    at: &mut String,
) -> Result<Val, String> {
    let (side, payload) =
        one_key(value).ok_or_else(|| refuse(at, "expected {\"ok\": value} or {\"err\": value}"))?;
    match side {
        "ok" => Ok(Val::Result(Ok(payload_of(ok, payload, at, "ok")?))),
        "err" => Ok(Val::Result(Err(payload_of(err, payload, at, "err")?))),
        _ => Err(refuse(at, "expected {\"ok\": value} or {\"err\": value}")),
    }
}

/// Flags: an array of the flags' `names`, each at most once.
fn flags_of(names: &[String], value: &Value, at: &str) -> Result<Val, String> {
    let Value::Array(set) = value else {
        return Err(refuse(at, "expected an array of flag names"));
    };
    let mut flags: Vec<String> = Vec::with_capacity(set.len());
    for value in set {
        match value {
            Value::String(name) if names.contains(name) && !flags.contains(name) => {
                flags.push(name.clone());
            }
            _ => return Err(refuse(at, "expected the flags' names, each once")),
        }
    }
    Ok(Val::Flags(flags))
}

/// A payload's value (`null` for a case that has none).
fn payload_of(
    shape: Option<&Shape>,
    payload: &Value,
    at: &mut String,
    key: &str,
) -> Result<Option<Box<Val>>, String> {
    match (shape, payload) {
        (None, Value::Null) => Ok(None),
        (None, _) => Err(format!(
            "{at}/{key}: this case carries no value (give null)"
        )),
        (Some(shape), payload) => Ok(Some(Box::new(nested(at, key, |at| {
            to_val(shape, payload, at)
        })?))),
    }
}

/// Run `convert` with `part` pushed on the pointer `at` (escaped as a JSON pointer escapes it,
/// with no allocation unless `at` grows), and popped after.
pub(crate) fn nested<T>(
    at: &mut String,
    part: &str,
    convert: impl FnOnce(&mut String) -> Result<T, String>,
) -> Result<T, String> {
    let before = at.len();
    at.push('/');
    for c in part.chars() {
        match c {
            '~' => at.push_str("~0"),
            '/' => at.push_str("~1"),
            c => at.push(c),
        }
    }
    let converted = convert(at);
    at.truncate(before);
    converted
}

/// Run `convert` with the index `index` pushed on the pointer `at`, and popped after.
fn nested_at<T>(
    at: &mut String,
    index: usize,
    convert: impl FnOnce(&mut String) -> Result<T, String>,
) -> Result<T, String> {
    use std::fmt::Write as _;
    let before = at.len();
    // Writing to a String cannot fail.
    let _ = write!(at, "/{index}");
    let converted = convert(at);
    at.truncate(before);
    converted
}

/// A key as a message quotes it: cut, escaped.
fn pointer_part(key: &str) -> String {
    crate::call::names::echoed(key)
}

/// The one key and its value of an object that has exactly one.
fn one_key(value: &Value) -> Option<(&str, &Value)> {
    match value {
        Value::Object(object) if object.len() == 1 => object
            .iter()
            .next()
            .map(|(key, value)| (key.as_str(), value)),
        _ => None,
    }
}

/// A number, or one of the names JSON has none for.
fn float(value: &Value) -> Option<f64> {
    match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => match text.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// A component value of `shape` as JSON (the same encoding [`to_val`] reads), taking the value:
/// its strings and record field names move into the JSON rather than being copied. A value
/// that is not of the shape (which wasmtime's type check rules out) is `null`.
pub(crate) fn to_json(shape: &Shape, value: Val) -> Value {
    let float = |x: f64| {
        if x.is_nan() {
            Value::String("NaN".to_owned())
        } else if x.is_infinite() {
            Value::String(if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned())
        } else {
            Number::from_f64(x).map_or(Value::Null, Value::Number)
        }
    };
    match (shape, value) {
        (_, Val::Bool(b)) => Value::Bool(b),
        (_, Val::S8(n)) => Value::from(n),
        (_, Val::U8(n)) => Value::from(n),
        (_, Val::S16(n)) => Value::from(n),
        (_, Val::U16(n)) => Value::from(n),
        (_, Val::S32(n)) => Value::from(n),
        (_, Val::U32(n)) => Value::from(n),
        (_, Val::S64(n)) => Value::from(n),
        (_, Val::U64(n)) => Value::from(n),
        (_, Val::Float32(x)) => float(f64::from(x)),
        (_, Val::Float64(x)) => float(x),
        (_, Val::Char(c)) => Value::String(c.to_string()),
        (_, Val::String(text)) => Value::String(text),
        (Shape::List(item), Val::List(items)) => Value::Array(
            items
                .into_iter()
                .map(|value| to_json(item, value))
                .collect(),
        ),
        (Shape::Tuple(shapes), Val::Tuple(values)) => Value::Array(
            shapes
                .iter()
                .zip(values)
                .map(|(shape, value)| to_json(shape, value))
                .collect(),
        ),
        // The names are the ones wasmtime checked against the type's, in its order.
        (Shape::Record(fields), Val::Record(values)) => Value::Object(
            fields
                .iter()
                .zip(values)
                .map(|((_, shape), (name, value))| (name, to_json(shape, value)))
                .collect(),
        ),
        (Shape::Variant(cases), Val::Variant(case, payload)) => {
            let shape = cases
                .iter()
                .find(|(name, _)| *name == case)
                .and_then(|(_, shape)| shape.as_ref());
            single(case, shape, payload.map(|payload| *payload))
        }
        (_, Val::Enum(name)) => Value::String(name),
        (Shape::Option(_), Val::Option(None)) => Value::Null,
        (Shape::Option(inner), Val::Option(Some(value))) => {
            let value = to_json(inner, *value);
            if inner.nullable() {
                let mut object = Map::new();
                object.insert("some".to_owned(), value);
                Value::Object(object)
            } else {
                value
            }
        }
        (Shape::Result(ok, _), Val::Result(Ok(payload))) => single(
            "ok".to_owned(),
            ok.as_deref(),
            payload.map(|payload| *payload),
        ),
        (Shape::Result(_, err), Val::Result(Err(payload))) => single(
            "err".to_owned(),
            err.as_deref(),
            payload.map(|payload| *payload),
        ),
        (_, Val::Flags(names)) => Value::Array(names.into_iter().map(Value::String).collect()),
        _ => Value::Null,
    }
}

/// `{key: payload}`, `null` for a missing payload.
fn single(key: String, shape: Option<&Shape>, payload: Option<Val>) -> Value {
    let value = match (shape, payload) {
        (Some(shape), Some(payload)) => to_json(shape, payload),
        _ => Value::Null,
    };
    let mut object = Map::new();
    object.insert(key, value);
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(shape: &Shape, value: Value) {
        let val = to_val(shape, &value, &mut String::new())
            .unwrap_or_else(|why| panic!("{value}: {why}"));
        assert_eq!(to_json(shape, val), value, "{shape:?}");
    }

    fn refused(shape: &Shape, value: Value) -> String {
        to_val(shape, &value, &mut String::new()).expect_err("refused")
    }

    #[test]
    fn every_shape_round_trips_in_its_one_encoding() {
        let record = Shape::Record(vec![
            ("name".to_owned(), Shape::String),
            ("age".to_owned(), Shape::U8),
        ]);
        let nested = Shape::Option(Box::new(Shape::Option(Box::new(Shape::S32))));
        for (shape, value) in [
            (Shape::Bool, json!(true)),
            (Shape::U8, json!(255)),
            (Shape::S8, json!(-128)),
            (Shape::U64, json!(u64::MAX)),
            (Shape::S64, json!(i64::MIN)),
            (Shape::F64, json!(1.5)),
            (Shape::F64, json!("NaN")),
            (Shape::F32, json!("-Infinity")),
            (Shape::Char, json!("é")),
            (Shape::String, json!("text")),
            (Shape::List(Box::new(Shape::U8)), json!([0, 1, 255])),
            (record.clone(), json!({ "name": "ada", "age": 36 })),
            (
                Shape::Tuple(vec![Shape::String, Shape::Bool]),
                json!(["a", false]),
            ),
            (
                Shape::Variant(vec![
                    ("none".to_owned(), None),
                    ("some".to_owned(), Some(Shape::String)),
                ]),
                json!({ "some": "x" }),
            ),
            (
                Shape::Variant(vec![("none".to_owned(), None)]),
                json!({ "none": null }),
            ),
            (
                Shape::Enum(vec!["red".to_owned(), "blue".to_owned()]),
                json!("blue"),
            ),
            (Shape::Option(Box::new(Shape::String)), json!(null)),
            (Shape::Option(Box::new(Shape::String)), json!("x")),
            (nested.clone(), json!(null)),
            (nested.clone(), json!({ "some": null })),
            (nested, json!({ "some": 7 })),
            (
                Shape::Result(Some(Box::new(Shape::String)), None),
                json!({ "err": null }),
            ),
            (
                Shape::Result(Some(Box::new(Shape::String)), Some(Box::new(Shape::U32))),
                json!({ "ok": "fine" }),
            ),
            (
                Shape::Flags(vec!["read".to_owned(), "write".to_owned()]),
                json!(["write"]),
            ),
        ] {
            round_trip(&shape, value);
        }
    }

    #[test]
    fn a_value_that_does_not_fit_is_refused_where_it_is() {
        let record = Shape::Record(vec![("sizes".to_owned(), Shape::List(Box::new(Shape::U8)))]);
        assert_eq!(
            refused(&record, json!({ "sizes": [1, 256] })),
            "/sizes/1: 256 is not an integer from 0 to 255"
        );
        assert_eq!(
            refused(&Shape::Char, json!("ab")),
            "/: expected exactly one character"
        );
        assert!(refused(&Shape::U64, json!(-1)).contains("not an integer from 0"));
        assert!(refused(&Shape::S8, json!(1.5)).contains("not an integer"));
        assert!(refused(&record, json!({ "sizes": [], "x": 1 })).contains("no field named"));
        assert!(refused(&record, json!({})).contains("the field sizes is missing"));
        assert!(refused(&record, json!("a string")).contains("expected an object"));
        assert!(refused(&Shape::F32, json!(1e300)).contains("32-bit"));
        let flags = Shape::Flags(vec!["a".to_owned()]);
        assert!(refused(&flags, json!(["a", "a"])).contains("each once"));
        // A key of 10 KB is echoed cut short.
        let long = "k".repeat(10_000);
        assert!(refused(&record, json!({ long: 1 })).chars().count() <= MAX_VALUE_ERROR_CHARS + 1);
    }
}
