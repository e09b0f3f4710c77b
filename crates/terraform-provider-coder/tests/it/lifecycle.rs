//! What happens to coder resources across builds: no-op replans, refresh, replacement and
//! destroy.

use anyhow::Result;

use crate::harness::{Tf, resources, str_of, values};

fn config(os: &str) -> String {
    format!(
        r#"
resource "coder_agent" "main" {{
  os   = "{os}"
  arch = "amd64"
}}

resource "coder_app" "web" {{
  agent_id = coder_agent.main.id
  slug     = "web"
  url      = "http://localhost:3000"
}}
"#
    )
}

#[test]
fn unchanged_config_plans_nothing_and_changes_force_replacement() -> Result<()> {
    let tf = Tf::new(&config("linux"))?;
    let state = tf.init_plan_apply()?;
    let first = values(&state, "coder_agent.main")?;
    let first_id = str_of(&first, "id")?.to_owned();

    // Nothing changed: terraform must find no differences (exit code 0, not 2).
    let (output, _) = tf.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"])?;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );

    // A refresh mints a new token but keeps the agent.
    tf.ok(&[
        "apply",
        "-no-color",
        "-input=false",
        "-auto-approve",
        "-refresh-only",
    ])?;
    let refreshed = values(&tf.show_state()?, "coder_agent.main")?;
    assert_eq!(refreshed["id"], first["id"]);
    assert_ne!(refreshed["token"], first["token"]);

    // Changing any argument replaces the agent and, through agent_id, its app.
    tf.write_config(&config("windows"))?;
    tf.plan(&[])?;
    let plan = tf.show_plan()?;
    for change in plan["resource_changes"].as_array().into_iter().flatten() {
        assert_eq!(
            change["change"]["actions"],
            serde_json::json!(["delete", "create"]),
            "{}",
            change["address"]
        );
    }
    let agent_change = plan["resource_changes"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["address"] == "coder_agent.main")
                .cloned()
        })
        .unwrap_or_default();
    assert_eq!(
        agent_change["action_reason"],
        "replace_because_cannot_update"
    );
    tf.apply()?;
    let replaced = values(&tf.show_state()?, "coder_agent.main")?;
    assert_eq!(replaced["os"], "windows");
    assert_ne!(str_of(&replaced, "id")?, first_id);

    tf.plan(&["-destroy"])?;
    tf.apply()?;
    assert!(resources(&tf.show_state()?, "values").is_empty());
    Ok(())
}
