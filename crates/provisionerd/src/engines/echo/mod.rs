//! The echo engine: a deterministic provisioner for tests and benchmarks. The template archive
//! says what each stage logs, returns, or how it fails or stalls ([`format`](mod@format)); the
//! engine also logs what it received (variable and parameter values, the previous state), so
//! tests can see what reached it.

mod archive;
pub mod format;

use chrono::Utc;
use codersdk::proto::TemplateFeatures;
use codersdk::provisionerd::{
    JobFailure, JobKind, JobResult, LogLevel, RichParameterValue, Timing, Transition, VariableValue,
};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use self::archive::{archive, archive_with_files};
pub use self::format::{
    BuildStage, EchoError, EchoLog, EchoState, EchoTemplate, Flood, ImportStage, PreviousBuild,
};
use crate::engine::{Engine, JobContext, Template, TemplateForm};
use crate::extract::read_files;
use crate::logs::LogSink;

/// The provisioner type the echo engine is registered under.
pub const PROVISIONER: &str = "echo";
/// Flood lines between yields, so the runner gets to send them while a flood runs.
const FLOOD_CHUNK: u32 = 1000;
/// The file an import's readme comes from, unless the template says one.
const README: &str = "README.md";
/// How much of a previous state the engine shows in its logs.
const STATE_PREVIEW_CHARS: usize = 256;

#[derive(Debug, Clone, Copy, Default)]
pub struct EchoEngine;

impl Engine for EchoEngine {
    fn template_form(&self) -> TemplateForm {
        TemplateForm::Archive
    }

    fn run<'a>(&'a self, ctx: JobContext<'a>) -> BoxFuture<'a, Result<JobResult, JobFailure>> {
        Box::pin(run(ctx))
    }
}

/// The stage of the lines about reading the template, as the daemon's own setup lines.
const SETUP: &str = "Setting up";

async fn run(ctx: JobContext<'_>) -> Result<JobResult, JobFailure> {
    let Template::Archive(archive) = ctx.template else {
        return Err(JobFailure::new(
            "the echo engine reads its template from the archive",
        ));
    };
    let [echo_json, readme] = match read_files(archive, [format::FILE_NAME, README]) {
        Ok(files) => files,
        Err(e) => {
            let message = format!("invalid template archive: {e}");
            ctx.logs.daemon(LogLevel::Error, SETUP, message.clone());
            return Err(JobFailure::new(message));
        }
    };
    let template = parse(echo_json.as_deref())?;
    match &ctx.job.kind {
        JobKind::TemplateImport {
            user_variable_values,
            ..
        } => {
            let readme = readme.and_then(|r| String::from_utf8(r).ok());
            import(&ctx, &template, user_variable_values, readme).await
        }
        JobKind::WorkspaceBuild {
            workspace_build_id,
            workspace_name,
            state,
            rich_parameter_values,
            variable_values,
            metadata,
            ..
        } => {
            let transition = metadata.workspace_transition;
            let received = Received {
                workspace_name,
                task: (!metadata.task_id.is_empty())
                    .then_some((metadata.task_id.as_str(), metadata.task_prompt.as_str())),
                previous_state: state,
                parameters: rich_parameter_values,
                variables: variable_values,
            };
            let stage = template
                .build_stage(transition)
                .cloned()
                .unwrap_or_default();
            let state = match &stage.state {
                Some(custom) => custom.clone().into_bytes(),
                None => EchoState::next(transition, *workspace_build_id, state).to_bytes(),
            };
            build(&ctx, transition, &stage, &received, state).await
        }
    }
}

/// The template `echo.json` describes; without the file, the default one.
fn parse(echo_json: Option<&[u8]>) -> Result<EchoTemplate, JobFailure> {
    let Some(bytes) = echo_json else {
        return Ok(EchoTemplate::default());
    };
    serde_json::from_slice(bytes).map_err(|e| {
        JobFailure::new(format!(
            "{} is not a valid echo template: {e}",
            format::FILE_NAME
        ))
    })
}

/// The behaviour both kinds of stage share.
struct Script<'a> {
    name: &'static str,
    logs: &'a [EchoLog],
    flood: Option<&'a Flood>,
    delay_ms: u64,
    hang: bool,
}

/// The script was interrupted by cancellation.
struct Canceled;

impl Script<'_> {
    async fn perform(&self, sink: &LogSink, cancel: &CancellationToken) -> Result<(), Canceled> {
        for line in self.logs {
            sink.log(
                line.level,
                line.stage.as_deref().unwrap_or(self.name),
                line.output.clone(),
            );
        }
        if let Some(flood) = self.flood {
            let stage = flood.stage.as_deref().unwrap_or(self.name);
            for i in 0..flood.lines {
                let mut line = format!("flood line {i}: ");
                let width = flood.line_bytes as usize;
                if line.len() < width {
                    line.extend(std::iter::repeat_n('x', width - line.len()));
                }
                sink.log(flood.level, stage, line);
                if (i + 1) % FLOOD_CHUNK == 0 {
                    tokio::task::yield_now().await;
                    if cancel.is_cancelled() {
                        return Err(Canceled);
                    }
                }
            }
        }
        if self.delay_ms > 0 {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(self.delay_ms)) => {}
                () = cancel.cancelled() => return Err(Canceled),
            }
        }
        if self.hang {
            sink.log(LogLevel::Info, self.name, "Hanging until canceled");
            cancel.cancelled().await;
            return Err(Canceled);
        }
        Ok(())
    }
}

fn canceled(name: &str, sink: &LogSink) -> JobFailure {
    sink.log(LogLevel::Warn, name, "Canceled");
    JobFailure::new(format!("echo: canceled during {}", name.to_lowercase()))
}

fn log_variables(sink: &LogSink, stage: &str, variables: &[VariableValue]) {
    for v in variables {
        let value = if v.sensitive { "(sensitive)" } else { &v.value };
        sink.log(
            LogLevel::Info,
            stage,
            format!("variable {}={value}", v.name),
        );
    }
}

fn timing(stage: &str, started: chrono::DateTime<Utc>) -> Timing {
    Timing {
        stage: stage.to_lowercase(),
        started_at: started,
        ended_at: Utc::now(),
        source: PROVISIONER.into(),
        action: stage.to_lowercase(),
        resource: String::new(),
    }
}

async fn import(
    ctx: &JobContext<'_>,
    template: &EchoTemplate,
    variables: &[VariableValue],
    archive_readme: Option<String>,
) -> Result<JobResult, JobFailure> {
    const NAME: &str = "Import";
    let started = Utc::now();
    let stage = template.import.clone().unwrap_or_default();
    log_variables(&ctx.logs, NAME, variables);
    let script = Script {
        name: NAME,
        logs: &stage.logs,
        flood: stage.flood.as_ref(),
        delay_ms: stage.delay_ms,
        hang: stage.hang,
    };
    if script.perform(&ctx.logs, &ctx.cancel).await.is_err() {
        return Err(canceled(NAME, &ctx.logs));
    }
    if let Some(error) = &stage.error {
        return Err(failure(error));
    }
    let readme = stage.readme.or(archive_readme).unwrap_or_default();
    let resources = |explicit: Option<Vec<_>>, transition| {
        explicit.unwrap_or_else(|| {
            template
                .build_stage(transition)
                .map(|s| s.resources.clone())
                .unwrap_or_default()
        })
    };
    Ok(JobResult::TemplateImport {
        start_resources: resources(stage.start_resources, Transition::Start),
        stop_resources: resources(stage.stop_resources, Transition::Stop),
        rich_parameters: stage.rich_parameters,
        external_auth_providers: stage.external_auth_providers,
        variables: stage.variables,
        readme,
        timings: vec![timing(NAME, started)],
        features: TemplateFeatures {
            presets: stage.presets,
            // As terraform's import does: the template declares a `coder_ai_task` when a build
            // of it would report one.
            has_ai_tasks: template
                .build_stage(Transition::Start)
                .and_then(|s| s.features.as_ref())
                .is_some_and(|f| f.has_ai_tasks || !f.ai_tasks.is_empty()),
            ..TemplateFeatures::default()
        },
    })
}

/// What a build received from coderd, echoed into its logs.
struct Received<'a> {
    workspace_name: &'a str,
    /// The Coder Task the workspace runs: its id and prompt.
    task: Option<(&'a str, &'a str)>,
    previous_state: &'a [u8],
    parameters: &'a [RichParameterValue],
    variables: &'a [VariableValue],
}

async fn build(
    ctx: &JobContext<'_>,
    transition: Transition,
    stage: &BuildStage,
    received: &Received<'_>,
    state: Vec<u8>,
) -> Result<JobResult, JobFailure> {
    let name = match transition {
        Transition::Start => "Start",
        Transition::Stop => "Stop",
        Transition::Delete => "Delete",
    };
    let started = Utc::now();
    let sink = &ctx.logs;
    sink.log(
        LogLevel::Info,
        name,
        format!(
            "transition {} of workspace {:?}",
            transition.as_str(),
            received.workspace_name
        ),
    );
    let preview: String = String::from_utf8_lossy(received.previous_state)
        .chars()
        .take(STATE_PREVIEW_CHARS)
        .collect();
    sink.log(
        LogLevel::Info,
        name,
        format!(
            "previous state ({} bytes): {preview}",
            received.previous_state.len()
        ),
    );
    for p in received.parameters {
        sink.log(
            LogLevel::Info,
            name,
            format!("parameter {}={}", p.name, p.value),
        );
    }
    log_variables(sink, name, received.variables);
    if let Some((id, prompt)) = received.task {
        sink.log(LogLevel::Info, name, format!("task {id} prompt {prompt:?}"));
    }

    let script = Script {
        name,
        logs: &stage.logs,
        flood: stage.flood.as_ref(),
        delay_ms: stage.delay_ms,
        hang: stage.hang,
    };
    // An echo build stands for an apply from its first line: stopped, it returns its state.
    ctx.progress.applying();
    if script.perform(sink, &ctx.cancel).await.is_err() {
        // Like an interrupted apply, the build may have changed things: return its state.
        return Err(JobFailure {
            state: Some(state),
            ..canceled(name, sink)
        });
    }
    if let Some(error) = &stage.error {
        return Err(failure(error));
    }
    Ok(JobResult::WorkspaceBuild {
        state,
        resources: stage.resources.clone(),
        timings: vec![timing(name, started)],
        features: stage.features.clone().unwrap_or_default(),
    })
}

fn failure(error: &EchoError) -> JobFailure {
    JobFailure {
        error: error.message.clone(),
        error_code: error.code.clone(),
        state: error.state.clone().map(String::into_bytes),
        ..JobFailure::default()
    }
}

#[cfg(test)]
mod tests;
