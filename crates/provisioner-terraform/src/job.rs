//! One job, as a sequence of terraform commands in its work directory:
//!
//! - **import**: read the variables and the readme, `init`, then for `start` and for `stop`:
//!   `plan` (the first with `graph` alongside), `show -json` of the plan, converted into the
//!   resources the template would create, its parameters and external auth providers;
//! - **build**: write the previous state, `init`, `plan` (`-destroy` to delete), `show -json` of
//!   the plan (converted, so a template mistake stops the build before anything changes;
//!   `graph` runs alongside `plan`), `apply`, `show -json` of the state, converted into the
//!   workspace's resources.
//!
//! Every job first drops `coder/coder` from the template's lock file and checks terraform's
//! version. A build's state is returned when it succeeds and also when it fails or is cancelled
//! after `apply` started, since terraform may have created resources by then.

use std::ffi::OsString;
use std::path::Path;

use codersdk::proto::TemplateFeatures;
use codersdk::provisionerd::{
    AcquiredJob, JobFailure, JobKind, JobResult, LogLevel, Metadata, PrebuiltWorkspaceBuildStage,
    RichParameterValue, TemplateVariable, Timing, Transition, VariableValue,
};
use tokio_util::sync::CancellationToken;

use crate::command::{Command, Output, Runner};
use crate::convert::{self, ConvertInput, Converted};
use crate::environment::{JobEnv, OwnerCredentials};
use crate::error::Error;
use crate::executor::{JobLogs, Terraform};
use crate::lockfile::{self, Outcome};
use crate::running_agents::RunningAgentTokens;
use crate::variables;

const PLAN_FILE: &str = "terraform.tfplan";
const STATE_FILE: &str = "terraform.tfstate";

const PARSE: &str = "Parsing template variables";
const INIT: &str = "Initializing terraform";
const DETECT_START: &str = "Detecting persistent resources";
const DETECT_STOP: &str = "Detecting ephemeral resources";
const PLAN: &str = "Planning infrastructure";

fn apply_stage(transition: Transition) -> &'static str {
    match transition {
        Transition::Start => "Starting workspace",
        Transition::Stop => "Stopping workspace",
        Transition::Delete => "Destroying workspace",
    }
}

pub(crate) async fn run(
    tf: &Terraform,
    job: &AcquiredJob,
    workdir: &Path,
    logs: &dyn JobLogs,
    cancel: &CancellationToken,
) -> Result<JobResult, JobFailure> {
    let mut session = Session {
        tf,
        runner: tf.runner(workdir, logs, cancel),
        workdir,
    };
    match &job.kind {
        JobKind::TemplateImport {
            metadata,
            user_variable_values,
        } => match session.import(metadata, user_variable_values).await {
            Ok(result) => Ok(result),
            Err((error, stage)) => Err(fail(
                error,
                logs,
                stage,
                session.runner.timings,
                None,
                cancel,
            )),
        },
        JobKind::WorkspaceBuild {
            state,
            rich_parameter_values,
            variable_values,
            metadata,
            secrets,
            external_auth_providers,
            owner_ssh_key,
            ..
        } => {
            let transition = metadata.workspace_transition;
            if transition == Transition::Delete && state.is_empty() {
                logs.log(
                    LogLevel::Info,
                    apply_stage(transition),
                    "The workspace has no state: there is nothing to destroy",
                );
                return Ok(JobResult::WorkspaceBuild {
                    state: Vec::new(),
                    resources: Vec::new(),
                    timings: Vec::new(),
                    features: TemplateFeatures::default(),
                });
            }
            let build = Build {
                metadata,
                state,
                parameters: rich_parameter_values,
                variables: variable_values,
                credentials: OwnerCredentials {
                    secrets,
                    external_auth: external_auth_providers,
                    ssh_key: owner_ssh_key.as_ref(),
                },
            };
            let mut applied = false;
            match session.build(&build, &mut applied).await {
                Ok(result) => Ok(result),
                Err((error, stage)) => {
                    let state = if applied {
                        session.read_state().await.ok()
                    } else {
                        None
                    };
                    Err(fail(
                        error,
                        logs,
                        stage,
                        session.runner.timings,
                        state,
                        cancel,
                    ))
                }
            }
        }
    }
}

/// The failure coderd gets; the error goes into the job's logs too, unless terraform's own
/// output already explains it.
fn fail(
    error: Error,
    logs: &dyn JobLogs,
    stage: &str,
    timings: Vec<Timing>,
    state: Option<Vec<u8>>,
    cancel: &CancellationToken,
) -> JobFailure {
    let canceled = matches!(error, Error::Canceled) || cancel.is_cancelled();
    if !matches!(error, Error::Failed { .. } | Error::Canceled) {
        logs.log(LogLevel::Error, stage, &error.to_string());
    }
    tracing::debug!(error = %error, canceled, "terraform job failed");
    JobFailure {
        error: error.to_string(),
        error_code: error.code().to_owned(),
        state,
        canceled,
        timings,
    }
}

/// What a build job brings.
struct Build<'a> {
    metadata: &'a Metadata,
    state: &'a [u8],
    parameters: &'a [RichParameterValue],
    variables: &'a [VariableValue],
    credentials: OwnerCredentials<'a>,
}

/// A failure and the log stage it happened in.
type StageResult<T> = Result<T, (Error, &'static str)>;

fn at<T>(stage: &'static str, result: Result<T, Error>) -> StageResult<T> {
    result.map_err(|e| (e, stage))
}

struct Session<'a> {
    tf: &'a Terraform,
    runner: Runner<'a>,
    workdir: &'a Path,
}

/// `-var NAME=VALUE` arguments and their printable form.
struct VarArgs {
    args: Vec<String>,
    shown: Vec<String>,
}

impl Session<'_> {
    async fn import(
        &mut self,
        metadata: &Metadata,
        values: &[VariableValue],
    ) -> StageResult<JobResult> {
        let declared = at(PARSE, self.variables())?;
        let vars = at(PARSE, self.var_args(&declared, values, true))?;
        let readme = tokio::fs::read_to_string(self.workdir.join("README.md"))
            .await
            .unwrap_or_default();
        self.prepare().await?;

        let none = RunningAgentTokens::default();
        let start_env = self.env(
            metadata,
            Transition::Start,
            &[],
            OwnerCredentials::default(),
            &none,
        );
        let (start_plan, graph) = self
            .plan_and_graph(&start_env, &vars, false, DETECT_START)
            .await?;
        let start = at(
            DETECT_START,
            converted("converting the start plan", &start_plan, &graph),
        )?;

        let stop_env = self.env(
            metadata,
            Transition::Stop,
            &[],
            OwnerCredentials::default(),
            &none,
        );
        let stop_plan = self.plan(&stop_env, &vars, false, DETECT_STOP).await?;
        // The plan graph comes from the configuration alone, so the start plan's serves.
        let stop = at(
            DETECT_STOP,
            converted("converting the stop plan", &stop_plan, &graph),
        )?;
        self.warn(DETECT_START, &start.warnings);
        // The stop plan mostly repeats the start plan's warnings.
        let new: Vec<String> = stop
            .warnings
            .into_iter()
            .filter(|w| !start.warnings.contains(w))
            .collect();
        self.warn(DETECT_STOP, &new);

        Ok(JobResult::TemplateImport {
            start_resources: start.resources,
            stop_resources: stop.resources,
            rich_parameters: start.parameters,
            external_auth_providers: start.external_auth_providers,
            variables: declared,
            readme,
            timings: std::mem::take(&mut self.runner.timings),
            features: start.features,
        })
    }

    /// Shows the converter's warnings in the job's logs.
    fn warn(&self, stage: &str, warnings: &[String]) {
        for warning in warnings {
            self.runner.logs.log(LogLevel::Warn, stage, warning);
        }
    }

    async fn build(&mut self, build: &Build<'_>, applied: &mut bool) -> StageResult<JobResult> {
        let transition = build.metadata.workspace_transition;
        let apply_stage = apply_stage(transition);
        let declared = at(INIT, self.variables())?;
        let vars = at(INIT, self.var_args(&declared, build.variables, false))?;
        if !build.state.is_empty() {
            at(
                INIT,
                tokio::fs::write(self.workdir.join(STATE_FILE), build.state)
                    .await
                    .map_err(Error::io("writing the previous state")),
            )?;
        }
        self.prepare().await?;

        let running_agents = match build.metadata.prebuilt_workspace_build_stage {
            PrebuiltWorkspaceBuildStage::Claim => RunningAgentTokens::from_state(build.state),
            _ => RunningAgentTokens::default(),
        };
        let env = self.env(
            build.metadata,
            transition,
            build.parameters,
            build.credentials,
            &running_agents,
        );
        let (plan, graph) = self
            .plan_and_graph(&env, &vars, transition == Transition::Delete, PLAN)
            .await?;
        // Template mistakes (agent names, app slugs, ...) stop the build before anything changes.
        let planned = at(PLAN, converted("converting the plan", &plan, &graph))?;
        self.warn(PLAN, &planned.warnings);

        *applied = true;
        self.runner.logs.applying();
        let apply = Command {
            args: vec![
                "apply".into(),
                "-no-color".into(),
                "-auto-approve".into(),
                "-input=false".into(),
                "-json".into(),
                PLAN_FILE.into(),
            ],
            shown: format!(
                "terraform apply -no-color -auto-approve -input=false -json {PLAN_FILE}"
            ),
            log_stage: apply_stage,
            timing_stage: "apply",
            output: Output::ApplyJson,
        };
        at(apply_stage, self.runner.run(&apply, &env).await)?;
        let state_json = at(
            apply_stage,
            self.show(&env, &[], apply_stage, "apply").await,
        )?;
        let converted = at(
            apply_stage,
            converted("converting the state", &state_json, &graph),
        )?;
        let state = at(apply_stage, self.read_state().await)?;
        let mut features = converted.features;
        // Presets matter to template versions, not to builds.
        features.presets.clear();
        Ok(JobResult::WorkspaceBuild {
            state,
            resources: converted.resources,
            timings: std::mem::take(&mut self.runner.timings),
            features,
        })
    }

    fn variables(&self) -> Result<Vec<TemplateVariable>, Error> {
        Ok(variables::parse_dir(self.workdir)?)
    }

    /// The `-var` arguments for the declared variables that have values. Values for variables
    /// the template does not declare are left out (terraform would refuse them); on import a
    /// required variable without a value is an error.
    fn var_args(
        &self,
        declared: &[TemplateVariable],
        values: &[VariableValue],
        require_all: bool,
    ) -> Result<VarArgs, Error> {
        let logs = self.runner.logs;
        let mut out = VarArgs {
            args: Vec::new(),
            shown: Vec::new(),
        };
        let mut missing = Vec::new();
        for variable in declared {
            match values.iter().rev().find(|v| v.name == variable.name) {
                Some(value) => {
                    out.args.push("-var".into());
                    out.args.push(format!("{}={}", variable.name, value.value));
                    let shown = if value.sensitive || variable.sensitive {
                        "<redacted>"
                    } else {
                        &value.value
                    };
                    out.shown.push(format!("-var {}={shown}", variable.name));
                }
                None if variable.required => missing.push(variable.name.clone()),
                None => {}
            }
        }
        for value in values {
            if !declared.iter().any(|d| d.name == value.name) {
                logs.log(
                    LogLevel::Warn,
                    PARSE,
                    &format!(
                        "Ignoring the value of {:?}: the template declares no such variable",
                        value.name
                    ),
                );
            }
        }
        if require_all && !missing.is_empty() {
            return Err(Error::MissingVariables { names: missing });
        }
        Ok(out)
    }

    /// Pins our provider in the lock file, checks terraform, and runs `init`.
    async fn prepare(&mut self) -> StageResult<()> {
        let logs = self.runner.logs;
        match at(
            INIT,
            lockfile::pin_coder_provider(
                self.workdir,
                terraform_provider_coder::PROVIDER_VERSION,
                self.tf.coder_provider_hash(),
            )
            .map_err(Error::io(format!("editing {}", lockfile::FILE_NAME))),
        )? {
            Outcome::Pinned { replaced: true } => logs.log(
                LogLevel::Debug,
                INIT,
                "Replaced coder/coder in .terraform.lock.hcl: this daemon provides it",
            ),
            Outcome::Pinned { replaced: false } => {}
            Outcome::Unparsable(e) => logs.log(
                LogLevel::Warn,
                INIT,
                &format!("Could not read .terraform.lock.hcl to pin coder/coder: {e}"),
            ),
        }
        let (binary, version) = at(INIT, self.tf.checked_version(&mut self.runner, INIT).await)?;
        logs.log(
            LogLevel::Info,
            INIT,
            &format!("Using terraform {version} ({})", binary.display()),
        );
        let init = Command {
            args: vec!["init".into(), "-no-color".into(), "-input=false".into()],
            shown: "terraform init -no-color -input=false".into(),
            log_stage: INIT,
            timing_stage: "init",
            output: Output::Text,
        };
        let env = self.tf.daemon_env().for_version();
        at(INIT, self.runner.run(&init, &env).await.map(drop))
    }

    fn env(
        &self,
        metadata: &Metadata,
        transition: Transition,
        parameters: &[RichParameterValue],
        credentials: OwnerCredentials<'_>,
        running_agents: &RunningAgentTokens,
    ) -> Vec<(OsString, OsString)> {
        self.tf.daemon_env().for_job(&JobEnv {
            metadata,
            transition,
            parameters,
            credentials,
            running_agents,
        })
    }

    /// `plan` into the plan file, then `show -json` of it.
    async fn plan(
        &mut self,
        env: &[(OsString, OsString)],
        vars: &VarArgs,
        destroy: bool,
        stage: &'static str,
    ) -> StageResult<String> {
        let plan = plan_command(vars, destroy, stage);
        at(stage, self.runner.run(&plan, env).await)?;
        at(stage, self.show(env, &[PLAN_FILE], stage, "plan").await)
    }

    /// [`Self::plan`], with `graph` running alongside `plan`: the graph is read from the
    /// configuration and the state, and a plan writes neither (`graph` takes no state lock), so
    /// both see what they would one after the other, and the graph costs no time of its own.
    async fn plan_and_graph(
        &mut self,
        env: &[(OsString, OsString)],
        vars: &VarArgs,
        destroy: bool,
        stage: &'static str,
    ) -> StageResult<(String, String)> {
        let plan = plan_command(vars, destroy, stage);
        let mut sibling = self.runner.sibling();
        let (planned, graphed) =
            tokio::join!(self.runner.run(&plan, env), graph(&mut sibling, env, stage));
        self.runner.absorb(sibling);
        at(stage, planned)?;
        let graph = at(stage, graphed)?;
        let shown = at(stage, self.show(env, &[PLAN_FILE], stage, "plan").await)?;
        Ok((shown, graph))
    }

    /// `show -json [file]`.
    async fn show(
        &mut self,
        env: &[(OsString, OsString)],
        file: &[&str],
        stage: &str,
        timing_stage: &'static str,
    ) -> Result<String, Error> {
        let mut args = vec!["show".to_owned(), "-json".to_owned()];
        args.extend(file.iter().map(|f| (*f).to_owned()));
        let show = Command {
            shown: format!("terraform {}", args.join(" ")),
            args,
            log_stage: stage,
            timing_stage,
            output: Output::Capture,
        };
        let stdout = self.runner.run(&show, env).await?;
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    }

    /// The state file as terraform left it (empty if it wrote none), secrets blanked.
    async fn read_state(&self) -> Result<Vec<u8>, Error> {
        match tokio::fs::read(self.workdir.join(STATE_FILE)).await {
            Ok(bytes) => Ok(crate::state_secrets::scrub(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::io("reading the state")(e)),
        }
    }
}

/// `plan` into the plan file.
fn plan_command<'s>(vars: &VarArgs, destroy: bool, stage: &'s str) -> Command<'s> {
    let mut args: Vec<String> = [
        "plan",
        "-no-color",
        "-input=false",
        "-json",
        "-refresh=true",
    ]
    .map(String::from)
    .into();
    args.push(format!("-out={PLAN_FILE}"));
    let mut shown =
        format!("terraform plan -no-color -input=false -json -refresh=true -out={PLAN_FILE}");
    if destroy {
        args.push("-destroy".into());
        shown.push_str(" -destroy");
    }
    args.extend(vars.args.iter().cloned());
    for var in &vars.shown {
        shown.push(' ');
        shown.push_str(var);
    }
    Command {
        args,
        shown,
        log_stage: stage,
        timing_stage: "plan",
        output: Output::Json,
    }
}

/// `graph -type=plan`: which resources depend on which, for placing agents and apps.
async fn graph(
    runner: &mut Runner<'_>,
    env: &[(OsString, OsString)],
    stage: &str,
) -> Result<String, Error> {
    let graph = Command {
        args: vec!["graph".into(), "-type=plan".into()],
        shown: "terraform graph -type=plan".into(),
        log_stage: stage,
        timing_stage: "graph",
        output: Output::Capture,
    };
    let stdout = runner.run(&graph, env).await?;
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

fn converted(what: &'static str, show_json: &str, graph_dot: &str) -> Result<Converted, Error> {
    convert::convert(&ConvertInput {
        show_json,
        graph_dot,
    })
    .map_err(|source| Error::Convert { what, source })
}
