//! Reading `terraform show -json`, of a saved plan or of the state, into one flat list of
//! resources.
//!
//! For a state the resources are those of `values`. For a plan they are the data sources of
//! `prior_state` (Terraform reads data sources while planning and reports them only there; that is
//! where `coder_parameter` and `coder_external_auth` live) followed by `planned_values`. Managed
//! resources of the prior state are left out: a plan to stop a workspace must not report the
//! resources it is about to delete. Within a module, child modules come before the module's own
//! resources, which is the order parameters are reported in.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::ConvertError;

/// What `values` mean for the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
    Managed,
    Data,
}

/// One resource instance from the show output.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TfResource {
    /// Full address, with module path and instance keys: `module.m[0].null_resource.dev["a"]`.
    pub address: String,
    /// The address without instance keys, as `terraform graph` labels the node.
    pub label: String,
    pub mode: Mode,
    pub kind: String,
    pub name: String,
    /// Attribute values; attributes unknown at plan time are absent.
    pub values: Map<String, Value>,
}

#[derive(Deserialize)]
struct RawShow {
    values: Option<RawValues>,
    planned_values: Option<RawValues>,
    prior_state: Option<RawPriorState>,
}

#[derive(Deserialize)]
struct RawPriorState {
    values: Option<RawValues>,
}

#[derive(Deserialize)]
struct RawValues {
    root_module: Option<RawModule>,
}

#[derive(Deserialize)]
struct RawModule {
    resources: Option<Vec<RawResource>>,
    child_modules: Option<Vec<RawModule>>,
}

#[derive(Deserialize)]
struct RawResource {
    address: String,
    mode: Mode,
    #[serde(rename = "type")]
    kind: String,
    name: String,
    values: Option<Map<String, Value>>,
}

/// The resources of a plan or a state, in conversion order, each address once.
pub(crate) fn resources(show_json: &str) -> Result<Vec<TfResource>, ConvertError> {
    let show: RawShow = serde_json::from_str(show_json)?;
    let mut out = Vec::new();
    if show.planned_values.is_some() || show.prior_state.is_some() {
        let prior = show.prior_state.and_then(|p| p.values);
        if let Some(module) = prior.and_then(|v| v.root_module) {
            flatten(module, &mut out, Some(Mode::Data));
        }
        if let Some(module) = show.planned_values.and_then(|v| v.root_module) {
            flatten(module, &mut out, None);
        }
    } else if let Some(module) = show.values.and_then(|v| v.root_module) {
        flatten(module, &mut out, None);
    }
    // A data source Terraform could not read while planning may show up in both halves of a
    // plan; the prior state holds its values, so the first occurrence wins.
    let mut seen = std::collections::HashSet::new();
    out.retain(|resource: &TfResource| seen.insert(resource.address.clone()));
    Ok(out)
}

fn flatten(module: RawModule, out: &mut Vec<TfResource>, only: Option<Mode>) {
    for child in module.child_modules.unwrap_or_default() {
        flatten(child, out, only);
    }
    for raw in module.resources.unwrap_or_default() {
        if only.is_some_and(|mode| mode != raw.mode) {
            continue;
        }
        out.push(TfResource {
            label: address_label(&raw.address),
            address: raw.address,
            mode: raw.mode,
            kind: raw.kind,
            name: raw.name,
            values: raw.values.unwrap_or_default(),
        });
    }
}

/// Removes every instance key (`[0]`, `["a.b[c]"]`) from an address.
///
/// Keys of module instances go too (`module.m[0].x.y` → `module.m.x.y`): the graph labels
/// resources inside counted modules without them.
pub(crate) fn address_label(address: &str) -> String {
    let mut label = String::with_capacity(address.len());
    outside_keys(address, |_, ch| label.push(ch));
    label
}

/// Calls `visit` with each character of an address that is not part of an instance key, and its
/// byte offset. Keys are bracketed and may hold quoted strings with brackets and escapes.
fn outside_keys(address: &str, mut visit: impl FnMut(usize, char)) {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (at, ch) in address.char_indices() {
        if in_string {
            match (escaped, ch) {
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => escaped = false,
            }
            continue;
        }
        match ch {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            '"' if depth > 0 => in_string = true,
            _ if depth == 0 => visit(at, ch),
            _ => {}
        }
    }
}

/// Returned as the module path of an address that does not parse, so that a bad address is
/// visible downstream instead of passing for the root module.
pub(crate) const INVALID_ADDRESS: &str = "invalid terraform address";

/// The module part of a resource address (`module.a.module.b[0]`), empty for the root module.
pub(crate) fn module_path(address: &str) -> String {
    let segments = split_segments(address);
    let mut modules = 0;
    while segments.len() >= modules + 2 && segments[modules] == "module" {
        if !is_name(key_stripped(segments[modules + 1])) {
            return INVALID_ADDRESS.to_owned();
        }
        modules += 2;
    }
    let rest = &segments[modules..];
    let resource = match rest {
        ["data", kind, name] | [kind, name] => [kind, name],
        _ => return INVALID_ADDRESS.to_owned(),
    };
    if !is_name(resource[0]) || !is_name(key_stripped(resource[1])) {
        return INVALID_ADDRESS.to_owned();
    }
    segments[..modules].join(".")
}

/// Splits on dots that are outside instance keys.
fn split_segments(address: &str) -> Vec<&str> {
    let mut segments = Vec::new();
    let mut start = 0;
    outside_keys(address, |at, ch| {
        if ch == '.' {
            segments.push(&address[start..at]);
            start = at + 1;
        }
    });
    segments.push(&address[start..]);
    segments
}

/// `name[key]` → `name`; a key must be a whole bracketed suffix.
fn key_stripped(segment: &str) -> &str {
    match segment.find('[') {
        Some(at) if segment.ends_with(']') => &segment[..at],
        _ => segment,
    }
}

/// A Terraform identifier: a letter or `_`, then letters, digits, `_` or `-`.
fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_drop_every_instance_key() {
        for (address, label) in [
            ("null_resource.dev", "null_resource.dev"),
            ("null_resource.dev[0]", "null_resource.dev"),
            ("coder_app.apps[\"app1\"]", "coder_app.apps"),
            (
                "module.m[0].null_resource.dev[1]",
                "module.m.null_resource.dev",
            ),
            (
                "module.m[\"a]\\\"b\"].data.x.y[\"c.d[e]\"]",
                "module.m.data.x.y",
            ),
        ] {
            assert_eq!(address_label(address), label, "{address}");
        }
    }

    #[test]
    fn module_paths() {
        for (address, path) in [
            ("null_resource.dev", ""),
            ("data.coder_parameter.p", ""),
            ("module.m.null_resource.dev[0]", "module.m"),
            ("module.a.module.b.data.x.y", "module.a.module.b"),
            (
                "module.a[\"k.1\"].module.b[2].x.y[\"z\"]",
                "module.a[\"k.1\"].module.b[2]",
            ),
            ("module.m", INVALID_ADDRESS),
            ("a.b.c.d", INVALID_ADDRESS),
            ("", INVALID_ADDRESS),
            ("1x.y", INVALID_ADDRESS),
        ] {
            assert_eq!(module_path(address), path, "{address}");
        }
    }

    fn resource(address: &str, mode: &str) -> Value {
        let name = address.rsplit('.').next().unwrap_or_default();
        serde_json::json!({"address": address, "mode": mode, "type": "t", "name": name,
                           "values": {"a": address}})
    }

    fn addresses(show: &Value) -> Vec<String> {
        resources(&show.to_string())
            .expect("valid show output")
            .into_iter()
            .map(|r| r.address)
            .collect()
    }

    #[test]
    fn state_lists_children_first() {
        let show = serde_json::json!({"values": {"root_module": {
            "resources": [resource("t.root", "managed")],
            "child_modules": [{"resources": [resource("module.m.t.child", "data")],
                               "child_modules": [{"resources": [resource("module.m.module.n.t.grandchild", "managed")]}]}]
        }}});
        assert_eq!(
            addresses(&show),
            [
                "module.m.module.n.t.grandchild",
                "module.m.t.child",
                "t.root"
            ]
        );
    }

    #[test]
    fn plan_takes_data_from_prior_state_then_planned_values() {
        let show = serde_json::json!({
            "prior_state": {"values": {"root_module": {
                "resources": [resource("t.old", "managed"), resource("data.t.p", "data")],
                "child_modules": [{"resources": [resource("module.m.data.t.q", "data")]}]
            }}},
            "planned_values": {"root_module": {
                "resources": [resource("t.new", "managed"), resource("data.t.p", "data")]
            }}
        });
        assert_eq!(addresses(&show), ["module.m.data.t.q", "data.t.p", "t.new"]);
    }

    #[test]
    fn empty_documents_have_no_resources() {
        for show in [
            serde_json::json!({}),
            serde_json::json!({"format_version": "1.0"}),
            serde_json::json!({"values": null}),
            serde_json::json!({"planned_values": {"root_module": {"resources": null}}}),
        ] {
            assert!(addresses(&show).is_empty());
        }
    }

    #[test]
    fn rejects_wrong_shapes() {
        for bad in [
            "",
            "[]",
            "{\"values\": {\"root_module\": {\"resources\": [{}]}}}",
            "{\"values\": {\"root_module\": {\"resources\": [{\"address\": \"a.b\", \"mode\": \"weird\", \"type\": \"a\", \"name\": \"b\"}]}}}",
        ] {
            assert!(resources(bad).is_err(), "accepted {bad:?}");
        }
    }
}
