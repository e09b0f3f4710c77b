//! Conformance with Coder's reference converter on Coder's own fixtures.
//!
//! Every case directory of the fixtures (`../shared/fixtures/coder-terraform`, or
//! `CODER_FIXTURES_DIR`) is converted twice, from the plan and from the state, and compared with
//! the golden output of Coder's `ConvertState`. The fixtures are read in place, never copied.
//!
//! The comparison is on `Resources`, `Parameters`, `ExternalAuthProviders`, `Presets`,
//! `AITasks`, `HasAITasks` and `HasExternalAgents` (the last four absent from older goldens,
//! which then mean none), order-insensitively except where order means something
//! (parameters, options, metadata items), after dropping empty values, as protobuf does.
//!
//! How each known gap of the fixtures (see their README) is handled:
//!
//! - **Missing DOT files**: the sibling DOT file of the case is used; Coder's generator writes
//!   the same `terraform graph -type=plan` for both.
//! - **Missing plan golden of `resource-metadata-duplicate`**: when one golden is missing and the
//!   other is an error, the same error is expected. This is an inference (the README calls it
//!   probable), not a golden.
//! - **`DLPPolicies`** (in some goldens only): not produced by this converter, so it must be
//!   empty where present; a fixture that needs it fails here instead of passing silently.
//! - **`api_key_scope` missing from some inputs** while the goldens say `"all"`: those inputs
//!   are older versions than their goldens (the README says so). The converter passes the
//!   attribute through as written, as Coder's does, so an agent whose input lacks it is
//!   compared without it.
//! - **Scripts' `resource_address`**: these goldens predate it. It is left out of the
//!   comparison and checked separately: it is the address of a `coder_script` of the input,
//!   or empty for the scripts made from an agent's `startup_script`/`shutdown_script`.
//! - **`merge_strategy` missing from a state** while the goldens say `"replace"`: no
//!   accommodation in the test. The converter gives that attribute, which older providers do
//!   not write, the provider's default, which is what the goldens show.
//! - **`form_type` missing from the old `rich-parameters` state**: no accommodation either; the
//!   converter derives the form type the provider would have chosen.
//! - **App ids**: the goldens give an app the same id in every case where its slug appears, and
//!   give ids in plan goldens although plans do not know them: Coder's test harness writes them,
//!   they are not converter output. They are left out of the comparison and checked
//!   separately: from a state each app id must be the id of a `coder_app` of the input, from a
//!   plan it must be empty.
//! - **`is_null` of metadata items** differs between plan and state goldens; nothing to do, the
//!   inputs differ the same way.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};
use provisioner_terraform::convert::Converted;
use serde_json::{Map, Value, json};

use crate::support::run;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Plan,
    State,
}

impl Source {
    fn stem(self) -> &'static str {
        match self {
            Source::Plan => "tfplan",
            Source::State => "tfstate",
        }
    }

    fn golden(self) -> &'static str {
        match self {
            Source::Plan => "converted_state.plan.golden",
            Source::State => "converted_state.state.golden",
        }
    }

    fn other(self) -> Self {
        match self {
            Source::Plan => Source::State,
            Source::State => Source::Plan,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Plan => "plan",
            Source::State => "state",
        })
    }
}

/// The fixtures directory, or `None` (after saying so) when it is absent and that is allowed.
fn fixtures_dir() -> anyhow::Result<Option<PathBuf>> {
    let dir = match std::env::var_os("CODER_FIXTURES_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/coder-terraform")
        }
    };
    if dir.is_dir() {
        return Ok(Some(dir));
    }
    let message = format!(
        "Coder terraform fixtures not found at {} (set CODER_FIXTURES_DIR to their directory)",
        dir.display()
    );
    if std::env::var("CODER_FIXTURES_OPTIONAL").as_deref() == Ok("1") {
        eprintln!("{message}; skipping the conformance test because CODER_FIXTURES_OPTIONAL=1");
        return Ok(None);
    }
    bail!("{message}; set CODER_FIXTURES_OPTIONAL=1 to skip this test")
}

#[test]
fn converter_matches_coder_goldens() -> anyhow::Result<()> {
    let Some(dir) = fixtures_dir()? else {
        return Ok(());
    };
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("list {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    cases.retain(|path| path.is_dir());
    cases.sort();
    ensure!(
        !cases.is_empty(),
        "no case directories in {}",
        dir.display()
    );

    let mut failures = Vec::new();
    for case in &cases {
        for source in [Source::Plan, Source::State] {
            let name = case.file_name().unwrap_or_default().to_string_lossy();
            match check(case, source) {
                Ok(()) => println!("ok   {name} ({source})"),
                Err(err) => {
                    println!("FAIL {name} ({source})");
                    failures.push(format!("{name} ({source}): {err:#}"));
                }
            }
        }
    }
    ensure!(
        failures.is_empty(),
        "{} of {} conversions differ from Coder's:\n\n{}",
        failures.len(),
        cases.len() * 2,
        failures.join("\n\n")
    );
    Ok(())
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))
}

fn check(case: &Path, source: Source) -> anyhow::Result<()> {
    let name = case.file_name().unwrap_or_default().to_string_lossy();
    let show_json = read(&case.join(format!("{name}.{}.json", source.stem())))?;

    let own_dot = case.join(format!("{name}.{}.dot", source.stem()));
    let dot_path = if own_dot.exists() {
        own_dot
    } else {
        case.join(format!("{name}.{}.dot", source.other().stem()))
    };
    let graph_dot = read(&dot_path)?;

    let golden_path = case.join(source.golden());
    let golden: Value = if golden_path.exists() {
        serde_json::from_str(&read(&golden_path)?)?
    } else {
        let other: Value = serde_json::from_str(&read(&case.join(source.other().golden()))?)
            .with_context(|| format!("no {} and no readable sibling golden", source.golden()))?;
        ensure!(
            other.is_string(),
            "no {}, and the sibling golden is not an error to expect instead",
            source.golden()
        );
        other
    };

    let result = run(&show_json, &graph_dot);
    if let Value::String(expected) = &golden {
        return match result {
            Ok(_) => bail!("converted, but Coder fails with {expected:?}"),
            Err(err) => {
                ensure!(
                    err.to_string() == *expected,
                    "failed with {:?}, Coder with {expected:?}",
                    err.to_string()
                );
                Ok(())
            }
        };
    }
    let converted = result.context("Coder converts this, we failed")?;

    check_app_ids(&converted, &show_json, source)?;
    check_script_addresses(&converted, &show_json)?;
    check_uncompared_keys(&golden)?;
    let want = normalize(&golden_view(&golden, &show_json)?, "");
    let got = normalize(&our_view(&converted)?, "");
    if let Some(difference) = first_difference(&want, &got, "") {
        bail!(
            "{difference}\n--- Coder (normalized) ---\n{}\n--- ours (normalized) ---\n{}",
            serde_json::to_string_pretty(&want)?,
            serde_json::to_string_pretty(&got)?
        );
    }
    Ok(())
}

/// The top-level keys of a golden that are compared with ours.
const COMPARED: [&str; 7] = [
    "Resources",
    "Parameters",
    "ExternalAuthProviders",
    "Presets",
    "AITasks",
    "HasAITasks",
    "HasExternalAgents",
];

/// Keys of the golden that are not compared must hold nothing we would have to produce.
fn check_uncompared_keys(golden: &Value) -> anyhow::Result<()> {
    let object = golden
        .as_object()
        .context("golden is neither an error nor an object")?;
    for (key, value) in object {
        match key.as_str() {
            key if COMPARED.contains(&key) => {}
            "DLPPolicies" => ensure!(
                value.as_array().is_some_and(Vec::is_empty),
                "golden {key} is not empty, and the converter does not produce {key}"
            ),
            other => bail!("golden has a top-level key this test does not know: {other}"),
        }
    }
    Ok(())
}

/// App ids are not compared with the goldens (see the module docs); check them against the input.
fn check_app_ids(converted: &Converted, show_json: &str, source: Source) -> anyhow::Result<()> {
    let mut input_ids = BTreeSet::new();
    collect_app_ids(&serde_json::from_str(show_json)?, &mut input_ids);
    for app in converted
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .flat_map(|a| &a.apps)
    {
        match source {
            Source::Plan => ensure!(app.id.is_empty(), "app {} has an id at plan time", app.slug),
            Source::State => ensure!(
                input_ids.contains(&app.id),
                "app {} has id {:?}, which is no coder_app's id",
                app.slug,
                app.id
            ),
        }
    }
    Ok(())
}

fn collect_app_ids(value: &Value, ids: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            if object.get("type").and_then(Value::as_str) == Some("coder_app")
                && let Some(id) = value.pointer("/values/id").and_then(Value::as_str)
            {
                ids.insert(id.to_owned());
            }
            object.values().for_each(|v| collect_app_ids(v, ids));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_app_ids(v, ids)),
        _ => {}
    }
}

/// The compared part of a golden, with the Go field names the goldens use.
fn golden_view(golden: &Value, show_json: &str) -> anyhow::Result<Value> {
    let mut view = Map::new();
    for key in COMPARED {
        view.insert(
            key.to_owned(),
            golden.get(key).cloned().unwrap_or(Value::Null),
        );
    }
    let mut view = Value::Object(view);
    rewrite(&mut view, &mut |key, value| {
        if key == "Auth" {
            *value = auth_line(value);
        }
    });
    strip_app_ids(&mut view);
    let without_scope = agents_without_api_key_scope(&serde_json::from_str(show_json)?);
    for resource in view["Resources"].as_array_mut().into_iter().flatten() {
        for agent in resource["agents"].as_array_mut().into_iter().flatten() {
            let name = agent["name"].as_str().unwrap_or_default().to_owned();
            if without_scope.contains(&name)
                && let Some(agent) = agent.as_object_mut()
            {
                agent.remove("api_key_scope");
            }
        }
    }
    Ok(view)
}

/// Names of the `coder_agent`s of the input that have no `api_key_scope` attribute at all.
fn agents_without_api_key_scope(show: &Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    visit_resources(show, &mut |resource| {
        if resource["type"] == "coder_agent"
            && resource["values"].get("api_key_scope").is_none()
            && let Some(name) = resource["name"].as_str()
        {
            names.insert(name.to_owned());
        }
    });
    names
}

/// Calls `visit` on every object of `value` that looks like a resource of a show document.
fn visit_resources(value: &Value, visit: &mut dyn FnMut(&Value)) {
    match value {
        Value::Object(object) => {
            if object.contains_key("type") && object.contains_key("values") {
                visit(value);
            }
            object.values().for_each(|v| visit_resources(v, visit));
        }
        Value::Array(items) => items.iter().for_each(|v| visit_resources(v, visit)),
        _ => {}
    }
}

/// Scripts' addresses are not compared with the goldens (see the module docs); check them
/// against the input.
fn check_script_addresses(converted: &Converted, show_json: &str) -> anyhow::Result<()> {
    let mut addresses = BTreeSet::new();
    visit_resources(&serde_json::from_str(show_json)?, &mut |resource| {
        if resource["type"] == "coder_script"
            && let Some(address) = resource["address"].as_str()
        {
            addresses.insert(address.to_owned());
        }
    });
    for script in converted
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .flat_map(|a| &a.scripts)
    {
        let legacy =
            script.display_name == "Startup Script" || script.display_name == "Shutdown Script";
        ensure!(
            (legacy && script.resource_address.is_empty())
                || addresses.contains(&script.resource_address),
            "script {:?} has address {:?}, which is no coder_script of the input",
            script.display_name,
            script.resource_address
        );
    }
    Ok(())
}

/// Our output in the goldens' shape: Go names at the top, Coder's integer encoding of enums.
fn our_view(converted: &Converted) -> anyhow::Result<Value> {
    let ours = serde_json::to_value(converted)?;
    let mut view = json!({
        "Resources": ours["resources"],
        "Parameters": ours["parameters"],
        "ExternalAuthProviders": ours["external_auth_providers"],
        "Presets": ours["presets"],
        "AITasks": ours["ai_tasks"],
        "HasAITasks": ours["has_ai_tasks"],
        "HasExternalAgents": ours["has_external_agents"],
    });
    let mut failure = None;
    rewrite(&mut view, &mut |key, value| {
        let text = value.as_str().unwrap_or_default().to_owned();
        let mapped = match key {
            "auth" => Some(auth_line(value)),
            // provisionersdk/proto: AppSharingLevel, AppOpenIn, ParameterFormType.
            "sharing_level" => enum_number(&text, &["owner", "authenticated", "public"]),
            "open_in" => enum_number(&text, &["window", "slim-window", "tab"]),
            "form_type" => enum_number(
                &text,
                &[
                    "",
                    "error",
                    "radio",
                    "dropdown",
                    "input",
                    "textarea",
                    "slider",
                    "checkbox",
                    "switch",
                    "tag-select",
                    "multi-select",
                ],
            ),
            _ => return,
        };
        match mapped {
            Some(mapped) => *value = mapped,
            None => failure = Some(format!("no Coder number for {key} {text:?}")),
        }
    });
    if let Some(failure) = failure {
        bail!(failure);
    }
    rename_key(&mut view, "auth", "Auth");
    strip_app_ids(&mut view);
    for resource in view["Resources"].as_array_mut().into_iter().flatten() {
        for agent in resource["agents"].as_array_mut().into_iter().flatten() {
            for script in agent["scripts"].as_array_mut().into_iter().flatten() {
                if let Some(script) = script.as_object_mut() {
                    script.remove("resource_address");
                }
            }
        }
    }
    Ok(view)
}

/// `{"Token": "x"}` (Coder) or `{"token": "x"}` (ours) → `"Token:x"`: one line that keeps the
/// kind of credential when `x` is empty and would otherwise be dropped.
fn auth_line(value: &Value) -> Value {
    let (kind, id) = value
        .as_object()
        .and_then(|o| o.iter().next())
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
        .unwrap_or_default();
    let kind = match kind {
        "token" => "Token",
        "instance_id" => "InstanceId",
        other => other,
    };
    Value::String(format!("{kind}:{id}"))
}

fn enum_number(text: &str, names: &[&str]) -> Option<Value> {
    names.iter().position(|n| *n == text).map(|at| json!(at))
}

/// Calls `edit` on every object member, depth first.
fn rewrite(value: &mut Value, edit: &mut dyn FnMut(&str, &mut Value)) {
    match value {
        Value::Object(object) => {
            for (key, member) in object.iter_mut() {
                rewrite(member, edit);
                edit(key, member);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite(item, edit)),
        _ => {}
    }
}

fn rename_key(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::Object(object) => {
            if let Some(moved) = object.remove(from) {
                object.insert(to.to_owned(), moved);
            }
            object.values_mut().for_each(|v| rename_key(v, from, to));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_key(v, from, to)),
        _ => {}
    }
}

fn strip_app_ids(view: &mut Value) {
    for resource in view["Resources"].as_array_mut().into_iter().flatten() {
        for agent in resource["agents"].as_array_mut().into_iter().flatten() {
            for app in agent["apps"].as_array_mut().into_iter().flatten() {
                if let Some(app) = app.as_object_mut() {
                    app.remove("id");
                }
            }
        }
    }
}

/// Lists whose order is meaningful; every other list is compared as a multiset.
const ORDERED: [&str; 4] = ["Parameters", "options", "metadata", "volumes"];

/// Keys whose zero is a value (`optional int32` in the proto), not an absent field.
const ZERO_IS_VALUE: [&str; 2] = ["validation_min", "validation_max"];

/// Drops empty values like protobuf's JSON does, and sorts unordered lists.
fn normalize(value: &Value, key: &str) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(k, v)| (k.clone(), normalize(v, k)))
                .filter(|(k, v)| {
                    !is_empty(v) || (ZERO_IS_VALUE.contains(&k.as_str()) && v.is_number())
                })
                .collect(),
        ),
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(|item| normalize(item, key)).collect();
            if !ORDERED.contains(&key) {
                items.sort_by_key(Value::to_string);
            }
            Value::Array(items)
        }
        other => other.clone(),
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(object) => object.is_empty(),
    }
}

/// Where two normalized documents first differ, as a JSON path.
fn first_difference(want: &Value, got: &Value, path: &str) -> Option<String> {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            let keys: BTreeSet<&String> = w.keys().chain(g.keys()).collect();
            keys.into_iter().find_map(|key| {
                let at = format!("{path}.{key}");
                match (w.get(key), g.get(key)) {
                    (Some(w), Some(g)) => first_difference(w, g, &at),
                    (Some(w), None) => Some(format!("{at}: Coder has {w}, we have nothing")),
                    (None, Some(g)) => Some(format!("{at}: we have {g}, Coder has nothing")),
                    (None, None) => None,
                }
            })
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => w
            .iter()
            .zip(g)
            .enumerate()
            .find_map(|(i, (w, g))| first_difference(w, g, &format!("{path}[{i}]"))),
        _ if want == got => None,
        _ => Some(format!("{path}: Coder has {want}, we have {got}")),
    }
}
