//! A prebuilt workspace's builds through the real terraform and our provider: the create build
//! tells the template it is a prebuild, and the claim build keeps the running agent's token
//! (read from the previous state), so what holds the token is not replaced.

use codersdk::provisionerd::{PrebuiltWorkspaceBuildStage, Transition};
use serde_json::Value;

use super::harness::{BuildSpec, CODER_PROVIDER, Fixture, build_job, built, terraform_on_path};

fn template() -> String {
    format!(
        r#"{CODER_PROVIDER}
data "coder_workspace" "me" {{}}

resource "coder_agent" "main" {{
  os   = "linux"
  arch = "amd64"
}}

resource "terraform_data" "machine" {{
  triggers_replace = coder_agent.main.token
}}

output "stage" {{
  value = "${{data.coder_workspace.me.is_prebuild}}/${{data.coder_workspace.me.is_prebuild_claim}}"
}}
"#
    )
}

/// The agent's token, the machine's id and the `stage` output of a state.
fn facts(state: &[u8]) -> anyhow::Result<(String, String, String)> {
    let doc: Value = serde_json::from_slice(state)?;
    let attribute = |kind: &str, name: &str| -> anyhow::Result<String> {
        doc["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["type"] == kind && r["mode"] == "managed")
            .and_then(|r| r["instances"][0]["attributes"][name].as_str())
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("no {kind}.{name} in the state"))
    };
    let stage = doc["outputs"]["stage"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Ok((
        attribute("coder_agent", "token")?,
        attribute("terraform_data", "id")?,
        stage,
    ))
}

async fn build(
    f: &Fixture,
    stage: PrebuiltWorkspaceBuildStage,
    state: Vec<u8>,
) -> anyhow::Result<Vec<u8>> {
    let mut spec = BuildSpec::new(Transition::Start);
    spec.stage = stage;
    spec.state = state;
    Ok(built(f.run(&build_job(spec)).await, &f.logs)?.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_keeps_the_prebuilds_agent_token() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let template = template();
    let f = Fixture::new(&[("main.tf", template.as_str())], &[])?;

    let created = build(&f, PrebuiltWorkspaceBuildStage::Create, Vec::new()).await?;
    let (token, machine, stage) = facts(&created)?;
    assert_eq!(stage, "true/false");

    let claimed = build(&f, PrebuiltWorkspaceBuildStage::Claim, created).await?;
    let (claimed_token, claimed_machine, stage) = facts(&claimed)?;
    assert_eq!(stage, "false/true");
    assert_eq!(
        claimed_token, token,
        "the claim kept the running agent's token"
    );
    assert_eq!(claimed_machine, machine, "the machine was not replaced");
    assert!(!f.logs.text().contains(&token), "the token is not logged");

    // Without the claim's stage the provider makes a new token: what the claim prevents.
    let rebuilt = build(&f, PrebuiltWorkspaceBuildStage::None, claimed).await?;
    let (new_token, new_machine, stage) = facts(&rebuilt)?;
    assert_eq!(stage, "false/false");
    assert_ne!(new_token, token);
    assert_ne!(new_machine, machine);
    Ok(())
}
