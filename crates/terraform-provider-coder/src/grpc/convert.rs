//! Translation between protocol messages and this crate's types (values, diagnostics,
//! schemas).

use crate::diag::{AttrPath, Diagnostic, Diagnostics, Severity, Step};
use crate::error::ValueError;
use crate::proto::tfplugin6 as pb;
use crate::schema::{Attribute, Block, Mode, NestedBlock, Nesting, Schema};
use crate::value::{Value, from_json, from_msgpack, to_msgpack};

/// Decodes a `DynamicValue`; an absent one is null.
pub(crate) fn decode(value: Option<&pb::DynamicValue>) -> Result<Value, ValueError> {
    match value {
        Some(v) if !v.msgpack.is_empty() => from_msgpack(&v.msgpack),
        Some(v) if !v.json.is_empty() => from_json(&v.json),
        _ => Ok(Value::Null),
    }
}

/// Decodes a `DynamicValue`, reporting a broken one as an error diagnostic.
pub(crate) fn decode_or_report(
    value: Option<&pb::DynamicValue>,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<Value> {
    match decode(value) {
        Ok(v) => Some(v),
        Err(err) => {
            diags.error(
                format!("Terraform sent an undecodable {what}"),
                err.to_string(),
            );
            None
        }
    }
}

pub(crate) fn encode(value: &Value) -> pb::DynamicValue {
    pb::DynamicValue {
        msgpack: to_msgpack(value),
        json: Vec::new(),
    }
}

pub(crate) fn attribute_path(path: &AttrPath) -> pb::AttributePath {
    use pb::attribute_path::step::Selector;
    let steps = path
        .0
        .iter()
        .map(|step| pb::attribute_path::Step {
            selector: Some(match step {
                Step::Attr(name) => Selector::AttributeName(name.clone()),
                Step::Index(i) => Selector::ElementKeyInt(*i),
                Step::Key(key) => Selector::ElementKeyString(key.clone()),
            }),
        })
        .collect();
    pb::AttributePath { steps }
}

fn diagnostic(d: &Diagnostic) -> pb::Diagnostic {
    let severity = match d.severity {
        Severity::Error => pb::diagnostic::Severity::Error,
        Severity::Warning => pb::diagnostic::Severity::Warning,
    };
    pb::Diagnostic {
        severity: severity.into(),
        summary: d.summary.clone(),
        detail: d.detail.clone(),
        attribute: d
            .path
            .as_ref()
            .filter(|p| !p.0.is_empty())
            .map(attribute_path),
    }
}

pub(crate) fn diagnostics(diags: &Diagnostics) -> Vec<pb::Diagnostic> {
    diags.0.iter().map(diagnostic).collect()
}

pub(crate) fn schema(schema: &Schema) -> pb::Schema {
    pb::Schema {
        version: schema.version,
        block: Some(block(&schema.block, schema.version)),
    }
}

fn block(block: &Block, version: i64) -> pb::schema::Block {
    pb::schema::Block {
        version,
        attributes: block.attributes.iter().map(attribute).collect(),
        block_types: block.blocks.iter().map(nested_block).collect(),
        description: block.description.to_owned(),
        description_kind: pb::StringKind::Markdown.into(),
        deprecated: false,
    }
}

fn attribute(attr: &Attribute) -> pb::schema::Attribute {
    pb::schema::Attribute {
        name: attr.name.to_owned(),
        r#type: attr.ty.to_json().to_string().into_bytes(),
        description: attr.description.to_owned(),
        required: attr.mode == Mode::Required,
        optional: matches!(attr.mode, Mode::Optional | Mode::OptionalComputed),
        computed: matches!(attr.mode, Mode::Computed | Mode::OptionalComputed),
        sensitive: attr.sensitive,
        description_kind: pb::StringKind::Markdown.into(),
        deprecated: false,
    }
}

fn nested_block(nested: &NestedBlock) -> pb::schema::NestedBlock {
    let nesting = match nested.nesting {
        Nesting::List => pb::schema::nested_block::NestingMode::List,
        Nesting::Set => pb::schema::nested_block::NestingMode::Set,
    };
    pb::schema::NestedBlock {
        type_name: nested.name.to_owned(),
        block: Some(block(&nested.block, 0)),
        nesting: nesting.into(),
        min_items: nested.min_items,
        max_items: nested.max_items,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Provider;
    use crate::value::object;

    #[test]
    fn values_round_trip_through_dynamic_values() {
        let v = object([("a", Value::unknown()), ("b", Value::from("x"))]);
        assert_eq!(decode(Some(&encode(&v))).ok(), Some(v));
        assert_eq!(decode(None).ok(), Some(Value::Null));
        let json = pb::DynamicValue {
            msgpack: Vec::new(),
            json: br#"{"a":1}"#.to_vec(),
        };
        assert_eq!(
            decode(Some(&json)).ok(),
            Some(object([("a", Value::from(1))]))
        );
    }

    #[test]
    fn diagnostics_carry_attribute_paths() {
        let mut diags = Diagnostics::default();
        diags.error_at(
            AttrPath::attr("validation").index(0).child("min"),
            "bad",
            "worse",
        );
        let out = diagnostics(&diags);
        assert_eq!(out[0].summary, "bad");
        assert_eq!(out[0].severity, i32::from(pb::diagnostic::Severity::Error));
        assert_eq!(out[0].attribute.as_ref().map(|a| a.steps.len()), Some(3));
    }

    #[test]
    fn agent_schema_declares_defaults_as_optional_computed() {
        let provider = Provider::new();
        let agent = provider
            .resource_schemas()
            .find(|(n, _)| *n == "coder_agent")
            .map(|(_, s)| schema(s));
        let block = agent.and_then(|s| s.block).unwrap_or_default();
        let auth = block
            .attributes
            .iter()
            .find(|a| a.name == "auth")
            .cloned()
            .unwrap_or_default();
        assert!(auth.optional && auth.computed && !auth.required);
        assert_eq!(auth.r#type, br#""string""#);
        let token = block
            .attributes
            .iter()
            .find(|a| a.name == "token")
            .cloned()
            .unwrap_or_default();
        assert!(token.computed && token.sensitive && !token.optional);
        let display_apps = block
            .block_types
            .iter()
            .find(|b| b.type_name == "display_apps")
            .cloned()
            .unwrap_or_default();
        assert_eq!(display_apps.max_items, 1);
        assert_eq!(
            display_apps.nesting,
            i32::from(pb::schema::nested_block::NestingMode::Set)
        );
    }
}
