//! The state we write has the shape Coder's Go provider writes: for every `coder_*` type in
//! Coder's conformance fixtures (states produced by the real Go provider), the attribute keys
//! of our state, and of each nested block, are the keys the fixtures show.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use crate::harness::{Tf, resources};

/// Attributes newer than every fixture's provider version, by `type` or `type.block`.
const NEWER_THAN_FIXTURES: [(&str, &str); 1] = [
    // coder_env gained merge_strategy after the fixtures were generated (their plans have it).
    ("coder_env", "merge_strategy"),
];

const CONFIG: &str = r#"
resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
  metadata {
    key      = "load"
    script   = "uptime"
    interval = 5
  }
  display_apps {
    vscode = false
  }
  resources_monitoring {
    memory {
      enabled   = true
      threshold = 80
    }
    volume {
      path      = "/home"
      enabled   = true
      threshold = 90
    }
  }
}

resource "coder_agent_instance" "main" {
  agent_id    = coder_agent.main.id
  instance_id = "i-1"
}

resource "coder_app" "main" {
  agent_id = coder_agent.main.id
  slug     = "app"
  url      = "http://localhost:80"
  healthcheck {
    url       = "http://localhost:80/health"
    interval  = 5
    threshold = 3
  }
}

resource "coder_script" "main" {
  agent_id     = coder_agent.main.id
  display_name = "script"
  script       = "true"
  run_on_stop  = true
}

resource "coder_env" "main" {
  agent_id = coder_agent.main.id
  name     = "A"
  value    = "b"
}

resource "coder_metadata" "main" {
  resource_id = coder_agent.main.id
  item {
    key   = "k"
    value = "v"
  }
}

data "coder_parameter" "options" {
  name = "options"
  option {
    name  = "One"
    value = "1"
  }
}

data "coder_parameter" "validated" {
  name    = "validated"
  type    = "number"
  default = 3
  validation {
    min = 1
  }
}

data "coder_external_auth" "github" {
  id = "github"
}
"#;

fn fixtures_dir() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("CODER_TERRAFORM_FIXTURES").map(PathBuf::from),
        Some(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/fixtures/coder-terraform"),
        ),
        Some(PathBuf::from("/work/shared/fixtures/coder-terraform")),
    ];
    candidates.into_iter().flatten().find(|p| p.is_dir())
}

type Shapes = BTreeMap<String, BTreeSet<String>>;

/// Keys per `mode.type` and per `mode.type.block` (from the first element of block lists).
fn record_shapes(resource: &Value, shapes: &mut Shapes) {
    let (Some(mode), Some(ty)) = (resource["mode"].as_str(), resource["type"].as_str()) else {
        return;
    };
    if !ty.starts_with("coder_") {
        return;
    }
    let Some(values) = resource["values"].as_object() else {
        return;
    };
    let key = format!("{mode}.{ty}");
    shapes
        .entry(key.clone())
        .or_default()
        .extend(values.keys().cloned());
    for (name, value) in values {
        if let Some(Value::Object(first)) = value.as_array().and_then(|a| a.first()) {
            shapes
                .entry(format!("{key}.{name}"))
                .or_default()
                .extend(first.keys().cloned());
        }
    }
}

fn fixture_shapes(dir: &PathBuf) -> Result<Shapes> {
    let mut shapes = Shapes::new();
    for case in std::fs::read_dir(dir)? {
        let case = case?.path();
        for file in std::fs::read_dir(&case).into_iter().flatten() {
            let path = file?.path();
            if !path.to_string_lossy().ends_with(".tfstate.json") {
                continue;
            }
            let state: Value = serde_json::from_slice(&std::fs::read(&path)?)
                .with_context(|| format!("reading {}", path.display()))?;
            for resource in resources(&state, "values").values() {
                record_shapes(resource, &mut shapes);
            }
        }
    }
    Ok(shapes)
}

#[test]
fn state_keys_match_the_go_providers_fixtures() -> Result<()> {
    let Some(dir) = fixtures_dir() else {
        if std::env::var("CODER_FIXTURES_OPTIONAL").as_deref() == Ok("1") {
            eprintln!(
                "SKIPPED: shared/fixtures/coder-terraform not found (CODER_FIXTURES_OPTIONAL=1)"
            );
            return Ok(());
        }
        bail!(
            "shared/fixtures/coder-terraform not found beside the repository; set CODER_FIXTURES_OPTIONAL=1 to skip"
        );
    };
    let expected = fixture_shapes(&dir)?;
    assert!(
        expected.contains_key("managed.coder_agent"),
        "no coder_agent in {}",
        dir.display()
    );

    let tf = Tf::new(CONFIG)?;
    let state = tf.init_plan_apply()?;
    let mut ours = Shapes::new();
    for resource in resources(&state, "values").values() {
        record_shapes(resource, &mut ours);
    }

    let mut mismatches = Vec::new();
    for (kind, fixture_keys) in &expected {
        let Some(our_keys) = ours.get(kind) else {
            mismatches.push(format!("{kind}: missing from our state"));
            continue;
        };
        let newer: BTreeSet<String> = NEWER_THAN_FIXTURES
            .iter()
            .filter(|(ty, _)| kind.ends_with(&format!(".{ty}")))
            .map(|(_, attr)| (*attr).to_owned())
            .collect();
        let missing: Vec<_> = fixture_keys.difference(our_keys).collect();
        let extra: Vec<_> = our_keys
            .difference(fixture_keys)
            .filter(|k| !newer.contains(*k))
            .collect();
        if !missing.is_empty() || !extra.is_empty() {
            mismatches.push(format!("{kind}: missing {missing:?}, extra {extra:?}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "state shape differs from the fixtures:\n{}",
        mismatches.join("\n")
    );

    // The value shapes the converter relies on.
    let all = resources(&state, "values");
    let agent = &all["coder_agent.main"]["values"];
    assert!(
        agent["dir"].is_null() && agent["order"].is_null(),
        "unset optionals are null"
    );
    assert_eq!(
        agent["startup_script_behavior"], "non-blocking",
        "defaults are stored"
    );
    assert_eq!(
        agent["display_apps"].as_array().map(Vec::len),
        Some(1),
        "single blocks are one-element lists"
    );
    let app = &all["coder_app.main"]["values"];
    assert!(app["subdomain"].is_null() && app["command"].is_null());
    assert_eq!(app["healthcheck"].as_array().map(Vec::len), Some(1));
    Ok(())
}
