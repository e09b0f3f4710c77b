//! The environment terraform runs in. The daemon's own environment passes through, because
//! credentials configured on a provisioner host (cloud keys, `TF_VAR_*`) are meant for the
//! providers there; the daemon's own `CODER_*` settings and secrets (its session token, PSK or
//! key, deployment URL) do not. On top come the daemon's terraform settings and the `CODER_*`
//! variables the `coder/coder` provider reads to describe the workspace.

use std::ffi::OsString;
use std::path::Path;

use codersdk::externalauth::{AgentGitSshKey, ExternalAuthProviderToken};
use codersdk::provisionerd::{
    BuildSecret, Metadata, PrebuiltWorkspaceBuildStage, RichParameterValue, Transition,
};
use sha2::{Digest, Sha256};

use crate::running_agents::RunningAgentTokens;

/// Variables the executor sets itself, so inherited values are dropped.
const OWN_TERRAFORM_VARIABLES: [&str; 4] = [
    "TF_CLI_CONFIG_FILE",
    "TF_PLUGIN_CACHE_DIR",
    "CHECKPOINT_DISABLE",
    "TF_IN_AUTOMATION",
];

/// The daemon's side of the environment, the same for every job.
#[derive(Clone)]
pub(crate) struct DaemonEnv {
    inherited: Vec<(OsString, OsString)>,
    cli_config: OsString,
    plugin_cache: OsString,
}

impl std::fmt::Debug for DaemonEnv {
    // The inherited values are the daemon's credentials: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.inherited.iter().map(|(name, _)| name).collect();
        f.debug_struct("DaemonEnv")
            .field("inherited", &names)
            .field("cli_config", &self.cli_config)
            .field("plugin_cache", &self.plugin_cache)
            .finish()
    }
}

impl DaemonEnv {
    pub(crate) fn new(
        base: &[(OsString, OsString)],
        cli_config: &Path,
        plugin_cache: &Path,
    ) -> Self {
        let inherited = base
            .iter()
            .filter(|(name, _)| {
                let name = name.to_string_lossy();
                !name.starts_with("CODER_") && !OWN_TERRAFORM_VARIABLES.contains(&name.as_ref())
            })
            .cloned()
            .collect();
        Self {
            inherited,
            cli_config: cli_config.as_os_str().to_owned(),
            plugin_cache: plugin_cache.as_os_str().to_owned(),
        }
    }

    /// The `PATH` terraform gets (to find terraform itself when it is given by name).
    pub(crate) fn path(&self) -> Option<&std::ffi::OsStr> {
        self.inherited
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.as_os_str())
    }

    /// The environment of a command outside any job (`terraform version`).
    pub(crate) fn for_version(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.inherited.clone();
        env.push(("TF_CLI_CONFIG_FILE".into(), self.cli_config.clone()));
        env.push(("TF_PLUGIN_CACHE_DIR".into(), self.plugin_cache.clone()));
        // Terraform otherwise asks HashiCorp's servers for news on every command.
        env.push(("CHECKPOINT_DISABLE".into(), "1".into()));
        // Drops the "run terraform apply next" hints meant for people at a terminal.
        env.push(("TF_IN_AUTOMATION".into(), "1".into()));
        env
    }

    /// The whole environment of a terraform command for a job.
    pub(crate) fn for_job(&self, job: &JobEnv<'_>) -> Vec<(OsString, OsString)> {
        let mut env = self.for_version();
        env.extend(
            job.coder_variables()
                .into_iter()
                .map(|(name, value)| (OsString::from(name), OsString::from(value))),
        );
        env
    }
}

/// The owner's credentials a build hands the provider: the secrets the template declares,
/// the external auth tokens it names, the git SSH key.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OwnerCredentials<'a> {
    pub secrets: &'a [BuildSecret],
    pub external_auth: &'a [ExternalAuthProviderToken],
    pub ssh_key: Option<&'a AgentGitSshKey>,
}

/// What a job tells the `coder/coder` provider.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobEnv<'a> {
    pub metadata: &'a Metadata,
    /// The transition being planned: an import plans `start` and `stop` with one metadata.
    pub transition: Transition,
    pub parameters: &'a [RichParameterValue],
    /// What the build carries of the owner's (builds only).
    pub credentials: OwnerCredentials<'a>,
    /// The running agents' tokens a claim passes on (empty for any other job).
    pub running_agents: &'a RunningAgentTokens,
}

impl JobEnv<'_> {
    fn coder_variables(&self) -> Vec<(String, String)> {
        let m = self.metadata;
        let mut vars: Vec<(String, String)> = [
            ("CODER_AGENT_URL", m.coder_url.as_str()),
            ("CODER_WORKSPACE_TRANSITION", self.transition.as_str()),
            ("CODER_WORKSPACE_NAME", &m.workspace_name),
            ("CODER_WORKSPACE_ID", &m.workspace_id),
            ("CODER_WORKSPACE_BUILD_ID", &m.workspace_build_id),
            ("CODER_WORKSPACE_OWNER", &m.workspace_owner),
            ("CODER_WORKSPACE_OWNER_ID", &m.workspace_owner_id),
            ("CODER_WORKSPACE_OWNER_EMAIL", &m.workspace_owner_email),
            ("CODER_WORKSPACE_OWNER_NAME", &m.workspace_owner_name),
            (
                "CODER_WORKSPACE_OWNER_SESSION_TOKEN",
                &m.workspace_owner_session_token,
            ),
            ("CODER_WORKSPACE_TEMPLATE_ID", &m.template_id),
            ("CODER_WORKSPACE_TEMPLATE_NAME", &m.template_name),
            ("CODER_WORKSPACE_TEMPLATE_VERSION", &m.template_version),
            // Always set, empty outside tasks, so a daemon's own environment cannot make a
            // workspace look like a task.
            ("CODER_TASK_ID", &m.task_id),
            ("CODER_TASK_PROMPT", &m.task_prompt),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
        // A list of strings always serialises.
        let groups =
            serde_json::to_string(&m.workspace_owner_groups).unwrap_or_else(|_| "[]".into());
        vars.push(("CODER_WORKSPACE_OWNER_GROUPS".into(), groups));
        vars.extend(
            self.parameters
                .iter()
                .map(|p| (parameter_variable(&p.name), p.value.clone())),
        );
        vars.extend(crate::agent_scripts::environment());
        match m.prebuilt_workspace_build_stage {
            PrebuiltWorkspaceBuildStage::None => {}
            PrebuiltWorkspaceBuildStage::Create => {
                vars.push(("CODER_WORKSPACE_IS_PREBUILD".into(), "true".into()));
            }
            PrebuiltWorkspaceBuildStage::Claim => {
                vars.push(("CODER_WORKSPACE_IS_PREBUILD_CLAIM".into(), "true".into()));
                vars.extend(self.running_agents.variables());
            }
        }
        // Last, so nothing inherited or set above can stand in for a credential.
        let credentials = &self.credentials;
        for token in credentials.external_auth {
            vars.push((
                format!("CODER_EXTERNAL_AUTH_ACCESS_TOKEN_{}", token.id),
                token.access_token.clone(),
            ));
            vars.push((
                external_auth_token_variable(&token.id),
                token.access_token.clone(),
            ));
        }
        if let Some(key) = credentials.ssh_key {
            vars.push((
                "CODER_WORKSPACE_OWNER_SSH_PUBLIC_KEY".into(),
                key.public_key.clone(),
            ));
            vars.push((
                "CODER_WORKSPACE_OWNER_SSH_PRIVATE_KEY".into(),
                key.private_key.clone(),
            ));
        }
        for secret in credentials.secrets {
            if !secret.env_name.is_empty() {
                vars.push((secret_env_variable(&secret.env_name), secret.value.clone()));
            }
            if !secret.file_path.is_empty() {
                vars.push((
                    secret_file_variable(&secret.file_path),
                    secret.value.clone(),
                ));
            }
        }
        vars
    }
}

/// Where the provider reads a provider's token whatever characters its id has. Coder's name,
/// `CODER_EXTERNAL_AUTH_ACCESS_TOKEN_<id>`, is set too, but ids commonly hold a `-`, and the
/// provider is started through a `/bin/sh` launcher, which drops variables whose names are not
/// shell names.
pub fn external_auth_token_variable(id: &str) -> String {
    format!(
        "CODER_EXTERNAL_AUTH_ACCESS_TOKEN_HEX_{}",
        hex::encode(id.as_bytes())
    )
}

/// Where the provider's `coder_secret` reads a secret matched by environment variable name.
pub fn secret_env_variable(name: &str) -> String {
    format!("CODER_SECRET_ENV_{name}")
}

/// Where the provider's `coder_secret` reads a secret matched by file path (paths hold
/// characters variable names cannot, hence the hex).
pub fn secret_file_variable(path: &str) -> String {
    format!("CODER_SECRET_FILE_{}", hex::encode(path.as_bytes()))
}

/// `CODER_PARAMETER_<sha256 hex of the name>`: where the provider reads a parameter's value.
pub fn parameter_variable(name: &str) -> String {
    format!(
        "CODER_PARAMETER_{}",
        hex::encode(Sha256::digest(name.as_bytes()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a str> {
        env.iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.to_str())
    }

    #[test]
    fn the_daemons_settings_stay_behind_and_the_jobs_come_in() {
        let base: Vec<(OsString, OsString)> = [
            ("PATH", "/usr/bin"),
            ("AWS_ACCESS_KEY_ID", "for-providers"),
            ("CODER_SESSION_TOKEN", "daemon-secret"),
            ("CODER_PROVISIONER_DAEMON_PSK", "psk"),
            ("CODER_URL", "http://coderd"),
            ("CODER_WORKSPACE_NAME", "inherited"),
            ("CODER_SECRET_ENV_PLANTED", "from-the-host"),
            ("TF_CLI_CONFIG_FILE", "/home/nope/.terraformrc"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let daemon = DaemonEnv::new(
            &base,
            Path::new("/cache/cli.tfrc"),
            Path::new("/cache/plugins"),
        );
        assert_eq!(daemon.path().and_then(|p| p.to_str()), Some("/usr/bin"));
        let shown = format!("{daemon:?}");
        assert!(shown.contains("AWS_ACCESS_KEY_ID") && !shown.contains("for-providers"));
        let metadata = Metadata {
            coder_url: "http://coder.example".into(),
            workspace_name: "dev".into(),
            workspace_owner_session_token: "owner-token".into(),
            workspace_owner_groups: vec!["devs".into()],
            ..Metadata::default()
        };
        let parameters = [RichParameterValue {
            name: "region".into(),
            value: "eu".into(),
        }];
        let secrets = [
            BuildSecret {
                env_name: "GITHUB_TOKEN".into(),
                file_path: String::new(),
                value: "ghp-value".into(),
            },
            BuildSecret {
                env_name: "BOTH".into(),
                file_path: "~/.both".into(),
                value: "both-value".into(),
            },
        ];
        let env = daemon.for_job(&JobEnv {
            metadata: &metadata,
            transition: Transition::Stop,
            parameters: &parameters,
            credentials: OwnerCredentials {
                secrets: &secrets,
                ..OwnerCredentials::default()
            },
            running_agents: &RunningAgentTokens::default(),
        });
        assert_eq!(
            lookup(&env, "CODER_SECRET_ENV_GITHUB_TOKEN"),
            Some("ghp-value")
        );
        assert_eq!(lookup(&env, "CODER_SECRET_ENV_BOTH"), Some("both-value"));
        assert_eq!(
            secret_file_variable("~/.both"),
            format!("CODER_SECRET_FILE_{}", hex::encode("~/.both"))
        );
        assert_eq!(
            lookup(&env, &secret_file_variable("~/.both")),
            Some("both-value")
        );
        // A daemon's own variable of that shape is not a secret of the owner.
        assert_eq!(lookup(&env, "CODER_SECRET_ENV_PLANTED"), None);
        assert!(!format!("{:?}", secrets[0]).contains("ghp-value"));
        assert_eq!(lookup(&env, "AWS_ACCESS_KEY_ID"), Some("for-providers"));
        for secret in [
            "CODER_SESSION_TOKEN",
            "CODER_PROVISIONER_DAEMON_PSK",
            "CODER_URL",
        ] {
            assert_eq!(lookup(&env, secret), None, "{secret}");
        }
        assert_eq!(
            env.iter()
                .filter(|(n, _)| n == "CODER_WORKSPACE_NAME")
                .count(),
            1
        );
        assert_eq!(lookup(&env, "CODER_WORKSPACE_NAME"), Some("dev"));
        assert_eq!(lookup(&env, "TF_CLI_CONFIG_FILE"), Some("/cache/cli.tfrc"));
        assert_eq!(lookup(&env, "TF_PLUGIN_CACHE_DIR"), Some("/cache/plugins"));
        assert_eq!(lookup(&env, "CHECKPOINT_DISABLE"), Some("1"));
        assert_eq!(
            lookup(&env, "CODER_AGENT_URL"),
            Some("http://coder.example")
        );
        assert_eq!(lookup(&env, "CODER_WORKSPACE_TRANSITION"), Some("stop"));
        assert_eq!(
            lookup(&env, "CODER_WORKSPACE_OWNER_SESSION_TOKEN"),
            Some("owner-token")
        );
        assert_eq!(
            lookup(&env, "CODER_WORKSPACE_OWNER_GROUPS"),
            Some(r#"["devs"]"#)
        );
        // The provider's name for it: sha256("region") in hex.
        assert_eq!(
            parameter_variable("region"),
            "CODER_PARAMETER_c697d2981bf416569a16cfbcdec1542b5398f3cc77d2b905819aa99c46ecf6f6"
        );
        assert_eq!(lookup(&env, &parameter_variable("region")), Some("eu"));
        assert!(lookup(&env, "CODER_AGENT_SCRIPT_linux_amd64").is_some());
        assert!(lookup(&env, "CODER_AGENT_SCRIPT_windows_amd64").is_some());
        assert_eq!(lookup(&env, "CODER_WORKSPACE_IS_PREBUILD"), None);
        assert_eq!(lookup(&env, "CODER_WORKSPACE_IS_PREBUILD_CLAIM"), None);
        assert_eq!(lookup(&env, "CODER_TASK_ID"), Some(""));
        assert_eq!(lookup(&env, "CODER_TASK_PROMPT"), Some(""));
    }

    #[test]
    fn a_task_build_tells_the_provider_its_task_and_prompt() {
        let daemon = DaemonEnv::new(
            &[("CODER_TASK_ID".into(), "inherited".into())],
            Path::new("/c"),
            Path::new("/p"),
        );
        let metadata = Metadata {
            task_id: "0d2a4b8e-2f0e-4c1a-9b53-6d4a1c2e9f10".into(),
            task_prompt: "fix the flaky test".into(),
            ..Metadata::default()
        };
        let env = daemon.for_job(&JobEnv {
            metadata: &metadata,
            transition: Transition::Start,
            parameters: &[],
            credentials: OwnerCredentials::default(),
            running_agents: &RunningAgentTokens::default(),
        });
        assert_eq!(
            lookup(&env, "CODER_TASK_ID"),
            Some("0d2a4b8e-2f0e-4c1a-9b53-6d4a1c2e9f10")
        );
        assert_eq!(
            lookup(&env, "CODER_TASK_PROMPT"),
            Some("fix the flaky test")
        );
    }

    fn prebuild_env(
        stage: PrebuiltWorkspaceBuildStage,
        running: &RunningAgentTokens,
    ) -> Vec<(OsString, OsString)> {
        let daemon = DaemonEnv::new(&[], Path::new("/c"), Path::new("/p"));
        let metadata = Metadata {
            prebuilt_workspace_build_stage: stage,
            ..Metadata::default()
        };
        daemon.for_job(&JobEnv {
            metadata: &metadata,
            transition: Transition::Start,
            parameters: &[],
            credentials: OwnerCredentials::default(),
            running_agents: running,
        })
    }

    #[test]
    fn a_prebuild_says_so_and_a_claim_keeps_the_running_token() {
        let state = serde_json::json!({"resources": [{
            "mode": "managed", "type": "coder_agent", "name": "main",
            "instances": [{"attributes": {"id": "a", "token": "running-token"}}],
        }]});
        let running =
            RunningAgentTokens::from_state(&serde_json::to_vec(&state).unwrap_or_default());
        // What the provider reads: sha256("") in hex.
        let token_var = "CODER_RUNNING_WORKSPACE_AGENT_TOKEN_\
                         e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

        let create = prebuild_env(PrebuiltWorkspaceBuildStage::Create, &running);
        assert_eq!(lookup(&create, "CODER_WORKSPACE_IS_PREBUILD"), Some("true"));
        assert_eq!(lookup(&create, "CODER_WORKSPACE_IS_PREBUILD_CLAIM"), None);
        assert_eq!(lookup(&create, token_var), None);

        let claim = prebuild_env(PrebuiltWorkspaceBuildStage::Claim, &running);
        assert_eq!(lookup(&claim, "CODER_WORKSPACE_IS_PREBUILD"), None);
        assert_eq!(
            lookup(&claim, "CODER_WORKSPACE_IS_PREBUILD_CLAIM"),
            Some("true")
        );
        assert_eq!(lookup(&claim, token_var), Some("running-token"));

        let ordinary = prebuild_env(PrebuiltWorkspaceBuildStage::None, &running);
        assert_eq!(lookup(&ordinary, token_var), None);
        assert_eq!(lookup(&ordinary, "CODER_WORKSPACE_IS_PREBUILD_CLAIM"), None);
    }
}
