//! A Terraform working directory wired to our provider through a filesystem mirror.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

pub const HEADER: &str = r#"
terraform {
  required_providers {
    coder = {
      source  = "coder/coder"
      version = "~> 2.0"
    }
  }
}
"#;

pub struct Tf {
    _root: tempfile::TempDir,
    dir: PathBuf,
    cli_config: PathBuf,
    env: BTreeMap<String, String>,
}

impl Tf {
    /// A working directory holding `main.tf` = [`HEADER`] + `config`.
    pub fn new(config: &str) -> Result<Self> {
        let root = tempfile::tempdir()?;
        let mirror = root.path().join("mirror");
        terraform_provider_coder::install_into_mirror(
            &mirror,
            Path::new(env!("CARGO_BIN_EXE_terraform-provider-coder")),
        )?;
        let cli_config = root.path().join("terraform.rc");
        let cache = root.path().join("plugin-cache");
        std::fs::create_dir_all(&cache)?;
        std::fs::write(
            &cli_config,
            terraform_provider_coder::cli_config(&mirror, Some(&cache)),
        )?;
        let dir = root.path().join("work");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("main.tf"), format!("{HEADER}\n{config}"))?;
        Ok(Self {
            _root: root,
            dir,
            cli_config,
            env: BTreeMap::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn env(&mut self, name: &str, value: &str) -> &mut Self {
        self.env.insert(name.to_owned(), value.to_owned());
        self
    }

    pub fn remove_env(&mut self, name: &str) -> &mut Self {
        self.env.remove(name);
        self
    }

    pub fn write_config(&self, config: &str) -> Result<()> {
        Ok(std::fs::write(
            self.dir.join("main.tf"),
            format!("{HEADER}\n{config}"),
        )?)
    }

    /// Runs terraform with only our environment: CODER_* variables of the test process
    /// don't leak in, and the CLI config is ours.
    pub fn run(&self, args: &[&str]) -> Result<(Output, Duration)> {
        let mut cmd = Command::new("terraform");
        cmd.args(args).current_dir(&self.dir);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("CODER_")
                || name.to_string_lossy().starts_with("TF_")
            {
                cmd.env_remove(name);
            }
        }
        cmd.env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .envs(&self.env);
        let started = Instant::now();
        let output = cmd.output().context("running terraform (is it on PATH?)")?;
        Ok((output, started.elapsed()))
    }

    /// Runs terraform and fails with its output unless it succeeded.
    pub fn ok(&self, args: &[&str]) -> Result<Duration> {
        let (output, took) = self.run(args)?;
        if !output.status.success() {
            bail!(
                "terraform {} failed:\n{}\n{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(took)
    }

    pub fn init(&self) -> Result<Duration> {
        self.ok(&["init", "-no-color", "-input=false"])
    }

    pub fn plan(&self, extra: &[&str]) -> Result<Duration> {
        let mut args = vec!["plan", "-no-color", "-input=false", "-out=terraform.tfplan"];
        args.extend_from_slice(extra);
        self.ok(&args)
    }

    pub fn apply(&self) -> Result<Duration> {
        self.ok(&[
            "apply",
            "-no-color",
            "-input=false",
            "-auto-approve",
            "terraform.tfplan",
        ])
    }

    pub fn show_plan(&self) -> Result<Value> {
        self.show(&["show", "-json", "terraform.tfplan"])
    }

    pub fn show_state(&self) -> Result<Value> {
        self.show(&["show", "-json"])
    }

    fn show(&self, args: &[&str]) -> Result<Value> {
        let (output, _) = self.run(args)?;
        if !output.status.success() {
            bail!(
                "terraform show failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(serde_json::from_slice(&output.stdout)?)
    }

    /// init + plan + apply, returning the state; prints how long each step took.
    pub fn init_plan_apply(&self) -> Result<Value> {
        let init = self.init()?;
        let plan = self.plan(&[])?;
        let apply = self.apply()?;
        eprintln!("terraform init {init:?}, plan {plan:?}, apply {apply:?}");
        self.show_state()
    }
}

/// The planned `change` of the resource at `address` in a `terraform show -json` plan.
pub fn planned_change(plan: &Value, address: &str) -> Value {
    plan["resource_changes"]
        .as_array()
        .and_then(|changes| changes.iter().find(|c| c["address"] == address))
        .map(|c| c["change"].clone())
        .unwrap_or_default()
}

/// Every resource of a `terraform show -json` document (state or planned values), by address.
pub fn resources(doc: &Value, section: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    collect(&doc[section]["root_module"], &mut out);
    out
}

fn collect(module: &Value, out: &mut BTreeMap<String, Value>) {
    for resource in module["resources"].as_array().into_iter().flatten() {
        if let Some(address) = resource["address"].as_str() {
            out.insert(address.to_owned(), resource.clone());
        }
    }
    for child in module["child_modules"].as_array().into_iter().flatten() {
        collect(child, out);
    }
}

/// The `values` of the resource at `address` in a state document.
pub fn values(state: &Value, address: &str) -> Result<Value> {
    resources(state, "values")
        .remove(address)
        .map(|r| r["values"].clone())
        .with_context(|| format!("{address} is not in the state"))
}

pub fn str_of<'a>(values: &'a Value, name: &str) -> Result<&'a str> {
    values[name]
        .as_str()
        .with_context(|| format!("{name} is not a string: {}", values[name]))
}
