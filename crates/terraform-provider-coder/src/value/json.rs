//! The JSON encoding Terraform uses for stored states (`RawState.json`), read when upgrading.

use super::Value;
use crate::error::ValueError;

pub(crate) fn from_json(bytes: &[u8]) -> Result<Value, ValueError> {
    let raw: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ValueError::Json(e.to_string()))?;
    Ok(convert(raw))
}

fn convert(raw: serde_json::Value) -> Value {
    match raw {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(items) => Value::List(items.into_iter().map(convert).collect()),
        serde_json::Value::Object(attrs) => {
            Value::Object(attrs.into_iter().map(|(k, v)| (k, convert(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::object;

    #[test]
    fn reads_a_stored_state() {
        let v = from_json(br#"{"id":"x","order":null,"timeout":120,"env":{"A":"b"},"l":[1.5]}"#);
        let expected = object([
            ("id", Value::from("x")),
            ("order", Value::Null),
            ("timeout", Value::from(120)),
            ("env", object([("A", Value::from("b"))])),
            ("l", Value::List(vec![Value::Float(1.5)])),
        ]);
        assert_eq!(v.ok(), Some(expected));
    }

    #[test]
    fn rejects_invalid_json() {
        assert!(from_json(b"{").is_err());
    }
}
