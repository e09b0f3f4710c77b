//! Typed reads of a resource's attribute values.
//!
//! Terraform writes an unset optional attribute as `null` and leaves attributes unknown at plan
//! time out; both read as the type's zero value, like the Go converter's decoding. A value of the
//! wrong JSON type is an error naming the resource and attribute: it means the provider's schema
//! is not the one this converter knows, and guessing would hide that.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::ConvertError;

/// The attributes of one resource (or of one nested block), with the address for errors.
#[derive(Clone, Copy)]
pub(crate) struct Attrs<'a> {
    address: &'a str,
    values: &'a Map<String, Value>,
}

impl<'a> Attrs<'a> {
    pub(crate) fn new(address: &'a str, values: &'a Map<String, Value>) -> Self {
        Self { address, values }
    }

    fn present(&self, key: &str) -> Option<&'a Value> {
        self.values.get(key).filter(|v| !v.is_null())
    }

    fn wrong(&self, key: &str, expected: &'static str) -> ConvertError {
        ConvertError::Attribute {
            address: self.address.to_owned(),
            attribute: key.to_owned(),
            expected,
        }
    }

    /// Whether the attribute is in the document at all, even as `null`.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<String>, ConvertError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.wrong(key, "a string")),
        }
    }

    pub(crate) fn string(&self, key: &str) -> Result<String, ConvertError> {
        Ok(self.opt_string(key)?.unwrap_or_default())
    }

    /// A string that must be one of `choices` (absent reads as `""`).
    pub(crate) fn choice<T: Copy>(
        &self,
        key: &'static str,
        choices: &[(&str, T)],
    ) -> Result<T, ConvertError> {
        let value = self.string(key)?;
        choices
            .iter()
            .find(|(name, _)| *name == value)
            .map(|&(_, choice)| choice)
            .ok_or_else(|| ConvertError::UnsupportedValue {
                address: self.address.to_owned(),
                attribute: key,
                value,
            })
    }

    pub(crate) fn bool(&self, key: &str) -> Result<bool, ConvertError> {
        match self.present(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.wrong(key, "a boolean")),
        }
    }

    /// An integer; a fractional number is truncated toward zero, as Terraform's number type
    /// allows fractions where the schema says int.
    pub(crate) fn int<T: TryFrom<i64>>(&self, key: &str) -> Result<T, ConvertError> {
        let wide = match self.present(key) {
            None => 0,
            Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => i,
                (None, Some(f)) if f.is_finite() && f.abs() < 9.2e18 => f.trunc() as i64,
                _ => return Err(self.wrong(key, "an integer in range")),
            },
            Some(_) => return Err(self.wrong(key, "a number")),
        };
        T::try_from(wide).map_err(|_| self.wrong(key, "an integer in range"))
    }

    /// A nested block list (`metadata`, `option`, `healthcheck`...): a list of objects.
    pub(crate) fn blocks(&self, key: &str) -> Result<Vec<Attrs<'a>>, ConvertError> {
        match self.present(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .filter(|item| !item.is_null())
                .map(|item| match item {
                    Value::Object(values) => Ok(Attrs::new(self.address, values)),
                    _ => Err(self.wrong(key, "a list of objects")),
                })
                .collect(),
            Some(_) => Err(self.wrong(key, "a list of objects")),
        }
    }

    /// Each block of a nested block list, read by `read`.
    pub(crate) fn map_blocks<T>(
        &self,
        key: &str,
        read: impl Fn(Attrs<'a>) -> Result<T, ConvertError>,
    ) -> Result<Vec<T>, ConvertError> {
        self.blocks(key)?.into_iter().map(read).collect()
    }

    /// A `list(string)`; `null` entries read as empty strings.
    pub(crate) fn strings(&self, key: &str) -> Result<Vec<String>, ConvertError> {
        match self.present(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s.clone()),
                    Value::Null => Ok(String::new()),
                    _ => Err(self.wrong(key, "a list of strings")),
                })
                .collect(),
            Some(_) => Err(self.wrong(key, "a list of strings")),
        }
    }

    /// A `map(string)`; `null` entries read as empty strings.
    pub(crate) fn string_map(&self, key: &str) -> Result<BTreeMap<String, String>, ConvertError> {
        match self.present(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(entries)) => entries
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    Value::Null => Ok((k.clone(), String::new())),
                    _ => Err(self.wrong(key, "a map of strings")),
                })
                .collect(),
            Some(_) => Err(self.wrong(key, "a map of strings")),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with<T>(values: Value, read: impl FnOnce(Attrs<'_>) -> T) -> T {
        let Value::Object(map) = values else {
            panic!("test values are objects")
        };
        read(Attrs::new("x.y", &map))
    }

    #[test]
    fn missing_and_null_read_as_zero() -> Result<(), ConvertError> {
        with(json!({"n": null}), |a| {
            assert_eq!(a.string("n")?, "");
            assert_eq!(a.opt_string("missing")?, None);
            assert!(!a.bool("n")?);
            assert_eq!(a.int::<i32>("missing")?, 0);
            assert!(a.blocks("n")?.is_empty());
            assert!(a.string_map("n")?.is_empty());
            assert!(a.has("n") && !a.has("missing"));
            Ok(())
        })
    }

    #[test]
    fn numbers() -> Result<(), ConvertError> {
        with(
            json!({"i": 120, "f": 2.9, "neg": -3, "big": 3_000_000_000u64, "huge": 1e300}),
            |a| {
                assert_eq!(a.int::<i32>("i")?, 120);
                assert_eq!(a.int::<i32>("f")?, 2);
                assert_eq!(a.int::<i64>("neg")?, -3);
                assert!(a.int::<i32>("big").is_err());
                assert_eq!(a.int::<i64>("big")?, 3_000_000_000);
                assert!(a.int::<i64>("huge").is_err());
                Ok(())
            },
        )
    }

    #[test]
    fn wrong_types_name_the_attribute() {
        with(json!({"s": 1, "b": "yes", "l": {"a": 1}, "m": [1]}), |a| {
            let err = a.string("s").err().map(|e| e.to_string());
            assert_eq!(
                err.as_deref(),
                Some("decode x.y: attribute \"s\" must be a string")
            );
            assert!(a.bool("b").is_err());
            assert!(a.blocks("l").is_err());
            assert!(a.blocks("m").is_err());
            assert!(a.string_map("m").is_err());
            assert!(a.strings("l").is_err());
            assert!(a.strings("s").is_err());
            assert!(a.int::<i32>("b").is_err());
        });
    }
}
