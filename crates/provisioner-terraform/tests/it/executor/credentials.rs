//! The owner's credentials a build carries — external auth tokens (by a provider id with a
//! hyphen, as Coder users name them) and the git SSH key — reach the template through the real
//! terraform and are blanked from the state coderd keeps.

use codersdk::externalauth::{AgentGitSshKey, ExternalAuthProviderToken};
use codersdk::provisionerd::{JobResult, Transition};

use super::harness::{BuildSpec, CODER_PROVIDER, Fixture, build_job, terraform_on_path};

const MAIN: &str = r#"
data "coder_workspace" "me" {}
data "coder_workspace_owner" "me" {}

data "coder_external_auth" "git" {
  id = "primary-git"
}

resource "terraform_data" "probe" {
  input = "probe"
}

resource "coder_metadata" "probe" {
  resource_id = terraform_data.probe.id
  item {
    key   = "token_sha256"
    value = nonsensitive(sha256(data.coder_external_auth.git.access_token))
  }
  item {
    key   = "public_key"
    value = data.coder_workspace_owner.me.ssh_public_key
  }
  item {
    key   = "private_key_length"
    value = nonsensitive(length(data.coder_workspace_owner.me.ssh_private_key))
  }
}
"#;

const TOKEN: &str = "gho-build-token-2b7e";
const PRIVATE: &str =
    "-----BEGIN OPENSSH PRIVATE KEY-----\nprivate-key-body\n-----END OPENSSH PRIVATE KEY-----\n";

#[tokio::test(flavor = "multi_thread")]
async fn tokens_and_the_ssh_key_reach_the_template_and_not_the_state() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let main = format!("{CODER_PROVIDER}{MAIN}");
    let f = Fixture::new(&[("main.tf", &main)], &[])?;
    let mut spec = BuildSpec::new(Transition::Start);
    spec.external_auth = vec![ExternalAuthProviderToken {
        id: "primary-git".into(),
        access_token: TOKEN.into(),
    }];
    spec.ssh_key = Some(AgentGitSshKey {
        public_key: "ssh-ed25519 AAAAC3Nza-test\n".into(),
        private_key: PRIVATE.into(),
    });
    let result = f
        .run(&build_job(spec))
        .await
        .map_err(|e| anyhow::anyhow!("{}\n{}", e.error, f.logs.text()))?;
    let JobResult::WorkspaceBuild {
        resources, state, ..
    } = result
    else {
        anyhow::bail!("not a build result");
    };
    let probe = resources
        .iter()
        .find(|r| r.name == "probe")
        .ok_or_else(|| anyhow::anyhow!("no probe in {resources:?}"))?;
    let item = |key: &str| {
        probe
            .metadata
            .iter()
            .find(|m| m.key == key)
            .map(|m| m.value.clone())
            .unwrap_or_default()
    };
    assert_eq!(item("token_sha256"), sha256_hex(TOKEN));
    assert_eq!(item("public_key").trim(), "ssh-ed25519 AAAAC3Nza-test");
    assert_eq!(item("private_key_length"), PRIVATE.len().to_string());
    let state = String::from_utf8(state)?;
    for secret in [TOKEN, "private-key-body"] {
        assert!(!state.contains(secret), "{secret} in {state}");
        assert!(!f.logs.text().contains(secret), "{secret} in the logs");
    }
    Ok(())
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(s.as_bytes()))
}
