//! The msgpack encoding Terraform uses for configs, plans and states (`DynamicValue.msgpack`).

use std::collections::BTreeMap;

use rmpv::Value as Mp;

use super::Value;
use crate::error::ValueError;

/// Extension code of an unknown value without refinements.
const UNKNOWN_EXT: i8 = 0;
/// Extension code of an unknown value carrying refinements (nullness, prefix, bounds).
const REFINED_UNKNOWN_EXT: i8 = 12;

pub(crate) fn from_msgpack(bytes: &[u8]) -> Result<Value, ValueError> {
    let mut reader = bytes;
    let raw =
        rmpv::decode::read_value(&mut reader).map_err(|e| ValueError::Msgpack(e.to_string()))?;
    convert(raw)
}

pub(crate) fn to_msgpack(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail; an error here would mean rmpv itself is broken.
    if let Err(err) = rmpv::encode::write_value(&mut out, &unconvert(value)) {
        tracing::error!(%err, "encoding msgpack into memory failed");
    }
    out
}

fn convert(raw: Mp) -> Result<Value, ValueError> {
    Ok(match raw {
        Mp::Nil => Value::Null,
        Mp::Boolean(b) => Value::Bool(b),
        Mp::Integer(i) => match i.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(i.as_f64().unwrap_or(f64::MAX)),
        },
        Mp::F32(f) => Value::Float(f64::from(f)),
        Mp::F64(f) => Value::Float(f),
        Mp::String(s) => Value::String(s.into_str().ok_or(ValueError::NotUtf8)?),
        Mp::Binary(_) => return Err(ValueError::Unexpected("binary")),
        Mp::Array(items) => Value::List(items.into_iter().map(convert).collect::<Result<_, _>>()?),
        Mp::Map(pairs) => {
            let mut attrs = BTreeMap::new();
            for (k, v) in pairs {
                let Mp::String(k) = k else {
                    return Err(ValueError::Unexpected("non-string map key"));
                };
                attrs.insert(k.into_str().ok_or(ValueError::NotUtf8)?, convert(v)?);
            }
            Value::Object(attrs)
        }
        // Every extension code means "unknown"; only code 12 carries a payload worth keeping.
        Mp::Ext(code, payload) => Value::Unknown((code == REFINED_UNKNOWN_EXT).then_some(payload)),
    })
}

fn unconvert(value: &Value) -> Mp {
    match value {
        Value::Unknown(None) => Mp::Ext(UNKNOWN_EXT, vec![0]),
        Value::Unknown(Some(refinements)) => Mp::Ext(REFINED_UNKNOWN_EXT, refinements.clone()),
        Value::Null => Mp::Nil,
        Value::Bool(b) => Mp::Boolean(*b),
        Value::Int(i) => Mp::from(*i),
        Value::Float(f) => Mp::F64(*f),
        Value::String(s) => Mp::from(s.as_str()),
        Value::List(items) => Mp::Array(items.iter().map(unconvert).collect()),
        Value::Object(attrs) => Mp::Map(
            attrs
                .iter()
                .map(|(k, v)| (Mp::from(k.as_str()), unconvert(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::object;

    #[test]
    fn round_trips_every_kind_of_value() {
        let v = object([
            ("s", Value::from("x")),
            ("n", Value::Null),
            ("u", Value::unknown()),
            ("b", Value::from(true)),
            ("i", Value::from(-7)),
            ("f", Value::Float(1.5)),
            ("l", Value::List(vec![Value::from("a"), Value::unknown()])),
            ("m", object([("k", Value::from("v"))])),
        ]);
        assert_eq!(from_msgpack(&to_msgpack(&v)).ok(), Some(v));
    }

    #[test]
    fn unknown_is_extension_zero() {
        assert_eq!(to_msgpack(&Value::unknown()), vec![0xd4, 0x00, 0x00]);
        assert_eq!(
            from_msgpack(&[0xd4, 0x00, 0x00]).ok(),
            Some(Value::unknown())
        );
    }

    #[test]
    fn refined_unknowns_keep_their_refinements() {
        // fixext1, code 12, payload: a one-entry map {1: false} would not fit in one byte, so
        // use ext8 with a 3-byte payload: map(1) {1 => false} = 0x81 0x01 0xc2.
        let bytes = [0xc7, 0x03, 0x0c, 0x81, 0x01, 0xc2];
        let v = from_msgpack(&bytes).ok();
        assert_eq!(v, Some(Value::Unknown(Some(vec![0x81, 0x01, 0xc2]))));
        assert_eq!(v.map(|v| to_msgpack(&v)), Some(bytes.to_vec()));
    }

    #[test]
    fn any_other_extension_is_unknown_too() {
        assert_eq!(
            from_msgpack(&[0xd4, 0x05, 0x01]).ok(),
            Some(Value::unknown())
        );
    }

    #[test]
    fn rejects_garbage() {
        // A truncated array, a binary value, and a map with a non-string key.
        assert!(from_msgpack(&[0x92, 0x01]).is_err());
        assert!(from_msgpack(&[0xc4, 0x01, 0x00]).is_err());
        assert!(from_msgpack(&[0x81, 0x01, 0x01]).is_err());
    }

    #[test]
    fn large_unsigned_integers_become_floats() {
        let bytes = [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(from_msgpack(&bytes), Ok(Value::Float(_))));
    }
}
