//! Terraform values as the provider sees them: a schema-less tree that keeps the two things
//! plain JSON cannot express, unknown values and the difference between an absent and a null
//! attribute (absent reads as null).

mod json;
mod msgpack;

use std::collections::BTreeMap;

pub(crate) use json::from_json;
pub(crate) use msgpack::{from_msgpack, to_msgpack};

/// One Terraform value. Objects and maps share [`Value::Object`], lists, sets and tuples share
/// [`Value::List`]: the schema tells them apart and the wire formats encode them alike.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// Known only after apply. Keeps the refinement payload Terraform sent (msgpack extension 12)
    /// so that a value passed through unchanged compares equal on Terraform's side.
    Unknown(Option<Vec<u8>>),
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    List(Vec<Value>),
    Object(BTreeMap<String, Value>),
}

static NULL: Value = Value::Null;

impl Value {
    pub(crate) const fn unknown() -> Self {
        Self::Unknown(None)
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }

    pub(crate) fn is_unknown(&self) -> bool {
        matches!(self, Self::Unknown(_))
    }

    /// True when neither the value nor anything inside it is unknown.
    pub(crate) fn is_wholly_known(&self) -> bool {
        match self {
            Self::Unknown(_) => false,
            Self::List(items) => items.iter().all(Self::is_wholly_known),
            Self::Object(attrs) => attrs.values().all(Self::is_wholly_known),
            _ => true,
        }
    }

    /// The attribute `name` of an object; null for anything else or when absent.
    pub(crate) fn get(&self, name: &str) -> &Value {
        match self {
            Self::Object(attrs) => attrs.get(name).unwrap_or(&NULL),
            _ => &NULL,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Terraform numbers may travel as integers, floats or decimal strings.
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            #[expect(
                clippy::cast_possible_truncation,
                reason = "only whole floats within i64 range are converted"
            )]
            Self::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Some(*f as i64),
            Self::String(s) => s.parse().ok(),
            _ => None,
        }
    }

    pub(crate) fn as_list(&self) -> Option<&[Value]> {
        match self {
            Self::List(items) => Some(items),
            _ => None,
        }
    }

    pub(crate) fn as_object(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Self::Object(attrs) => Some(attrs),
            _ => None,
        }
    }

    /// Sets attribute `name` when `self` is an object; a no-op otherwise.
    pub(crate) fn set(&mut self, name: &str, value: Value) {
        if let Self::Object(attrs) = self {
            attrs.insert(name.to_owned(), value);
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Self::Int(i)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// Builds an object value from `(name, value)` pairs.
pub(crate) fn object<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_attributes_read_as_null() {
        let v = object([("a", Value::from(1))]);
        assert_eq!(v.get("a").as_i64(), Some(1));
        assert!(v.get("b").is_null());
        assert!(Value::Null.get("a").is_null());
    }

    #[test]
    fn wholly_known_looks_inside_collections() {
        let known = Value::List(vec![object([("x", Value::from("y"))])]);
        assert!(known.is_wholly_known());
        let partly = Value::List(vec![object([("x", Value::unknown())])]);
        assert!(!partly.is_wholly_known());
    }

    #[test]
    fn numbers_convert_from_every_wire_form() {
        assert_eq!(Value::Float(4.0).as_i64(), Some(4));
        assert_eq!(Value::Float(4.5).as_i64(), None);
        assert_eq!(Value::from("-3").as_i64(), Some(-3));
    }
}
