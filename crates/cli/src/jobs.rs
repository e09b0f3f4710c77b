//! Watching a provisioner job from the terminal: its logs streamed live with a spinner per
//! stage, a warning when no daemon can take it, and its outcome as the command's result.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use codersdk::Client;
use codersdk::provisioners::{ProvisionerJob, ProvisionerJobLog, ProvisionerJobStatus};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};

/// Where a job's logs and status are read.
pub enum Watched {
    TemplateVersion(uuid::Uuid),
    WorkspaceBuild(uuid::Uuid),
}

impl Watched {
    fn logs_path(&self) -> String {
        match self {
            Self::TemplateVersion(id) => format!("/api/v2/templateversions/{id}/logs"),
            Self::WorkspaceBuild(id) => format!("/api/v2/workspacebuilds/{id}/logs"),
        }
    }

    async fn job(&self, client: &Client) -> anyhow::Result<ProvisionerJob> {
        Ok(match self {
            Self::TemplateVersion(id) => client.template_version(*id).await?.job,
            Self::WorkspaceBuild(id) => client.workspace_build(*id).await?.job,
        })
    }
}

/// Renders stages and lines: spinners on a terminal, plain lines otherwise.
struct Display {
    fancy: bool,
    stage: Option<(String, Instant, Option<ProgressBar>)>,
}

impl Display {
    fn new() -> Self {
        Self {
            fancy: std::io::stdout().is_terminal(),
            stage: None,
        }
    }

    fn spinner(&self, message: String) -> Option<ProgressBar> {
        if !self.fancy {
            return None;
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(100));
        Some(bar)
    }

    fn start_stage(&mut self, name: &str) {
        self.finish_stage(true);
        if !self.fancy {
            println!("==> {name}");
        }
        let bar = self.spinner(name.to_string());
        self.stage = Some((name.to_string(), Instant::now(), bar));
    }

    fn finish_stage(&mut self, ok: bool) {
        if let Some((name, started, bar)) = self.stage.take() {
            let mark = if ok { "✔" } else { "✘" };
            let line = format!("{mark} {name} [{}ms]", started.elapsed().as_millis());
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            println!("{line}");
        }
    }

    fn line(&self, text: &str) {
        match self.stage.as_ref().and_then(|(_, _, bar)| bar.as_ref()) {
            Some(bar) => bar.println(format!("  {text}")),
            None => println!("  {text}"),
        }
    }

    fn warn(&self, text: &str) {
        match self.stage.as_ref().and_then(|(_, _, bar)| bar.as_ref()) {
            Some(bar) => bar.println(format!("warning: {text}")),
            None => eprintln!("warning: {text}"),
        }
    }
}

/// Follows the job to its end; fails with the job's error when it did not succeed.
pub async fn watch(client: &Client, watched: Watched) -> anyhow::Result<ProvisionerJob> {
    let mut display = Display::new();
    display.start_stage("Queued");
    let logs = client
        .follow_logs(&watched.logs_path(), 0)
        .await
        .context("following the job's logs")?;
    tokio::pin!(logs);
    let mut warned = false;
    let mut check = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            next = logs.next() => match next {
                Some(Ok(log)) => show(&mut display, &log),
                Some(Err(e)) => {
                    display.finish_stage(false);
                    return Err(e).context("reading the job's logs");
                }
                None => break,
            },
            _ = check.tick(), if !warned => {
                let job = watched.job(client).await?;
                if job.status == ProvisionerJobStatus::Pending && !job.waiting_reason.is_empty() {
                    display.warn(&job.waiting_reason);
                    warned = true;
                }
            }
        }
    }
    let job = watched.job(client).await?;
    display.finish_stage(job.status == ProvisionerJobStatus::Succeeded);
    match job.status {
        ProvisionerJobStatus::Succeeded => Ok(job),
        ProvisionerJobStatus::Canceled => bail!("the job was canceled"),
        _ if !job.error.is_empty() => bail!("{}", job.error),
        status => bail!("the job ended {}", status.as_str()),
    }
}

fn show(display: &mut Display, log: &ProvisionerJobLog) {
    let current = display.stage.as_ref().map(|(name, _, _)| name.as_str());
    if !log.stage.is_empty() && current != Some(log.stage.as_str()) {
        display.start_stage(&log.stage);
    }
    if !log.output.is_empty() {
        let text = if log.log_level == "error" {
            format!("error: {}", log.output)
        } else {
            log.output.clone()
        };
        display.line(&text);
    }
}
