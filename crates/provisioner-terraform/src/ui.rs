//! Terraform's output as job logs. `plan` and `apply` run with `-json`, which prints one JSON
//! object per line (its "machine-readable UI": `@level`, `@message`, `type`, and for errors a
//! `diagnostic`); other commands print text. Each becomes log lines with a level, and error
//! diagnostics are kept to explain a failure.

use codersdk::provisionerd::LogLevel;
use serde::Deserialize;

/// Longest log line the executor sends; terraform's lines are short, a provisioner's output may
/// not be.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// One line of terraform's output, as log lines.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Rendered {
    pub level: LogLevel,
    pub lines: Vec<String>,
    /// For an error diagnostic: `summary: detail`, for the job's error message.
    pub error: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(rename = "@level")]
    level: String,
    #[serde(rename = "@message")]
    message: String,
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    diagnostic: Option<Diagnostic>,
}

#[derive(Deserialize)]
struct Diagnostic {
    #[serde(default)]
    severity: String,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    detail: String,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    range: Option<Range>,
}

#[derive(Deserialize)]
struct Range {
    filename: String,
    start: Position,
}

#[derive(Deserialize)]
struct Position {
    line: u64,
}

/// A line of `-json` output; anything that is not one of terraform's JSON messages is shown as
/// text. `apply` of a saved plan first repeats the plan's changes; with `applying` set those
/// repeats are demoted to debug, since the plan's logs already show them.
pub(crate) fn json_line(line: &str, applying: bool) -> Rendered {
    match serde_json::from_str::<Message>(line) {
        Ok(message) => {
            let replayed = applying && message.kind == "planned_change";
            let mut rendered = render(message);
            if replayed {
                rendered.level = LogLevel::Debug;
            }
            rendered
        }
        Err(_) => text_line(line, LogLevel::Info),
    }
}

/// A line of text output at `level`.
pub(crate) fn text_line(line: &str, level: LogLevel) -> Rendered {
    Rendered {
        level,
        lines: vec![clip(line.trim_end()).to_owned()],
        error: None,
    }
}

fn render(message: Message) -> Rendered {
    let level = match message.level.as_str() {
        "trace" => LogLevel::Trace,
        "debug" => LogLevel::Debug,
        "warn" => LogLevel::Warn,
        "error" => LogLevel::Error,
        _ => LogLevel::Info,
    };
    // The version banner repeats what the executor already logged about its terraform.
    let level = if message.kind == "version" {
        LogLevel::Debug
    } else {
        level
    };
    let mut lines: Vec<String> = message
        .message
        .trim_matches('\n')
        .lines()
        .map(|l| clip(l.trim_end()).to_owned())
        .collect();
    let mut error = None;
    if let Some(diagnostic) = message.diagnostic {
        let location = match (&diagnostic.range, &diagnostic.address) {
            (Some(range), Some(address)) => Some(format!(
                "  with {address}, on {} line {}",
                range.filename, range.start.line
            )),
            (Some(range), None) => {
                Some(format!("  on {} line {}", range.filename, range.start.line))
            }
            (None, Some(address)) => Some(format!("  with {address}")),
            (None, None) => None,
        };
        lines.extend(location);
        let detail = diagnostic.detail.trim();
        if !detail.is_empty() {
            lines.extend(detail.lines().map(|l| clip(l.trim_end()).to_owned()));
        }
        if diagnostic.severity == "error" {
            error = Some(if detail.is_empty() {
                diagnostic.summary
            } else {
                format!("{}: {detail}", diagnostic.summary)
            });
        }
    }
    Rendered {
        level,
        lines,
        error,
    }
}

fn clip(line: &str) -> &str {
    if line.len() <= MAX_LINE_BYTES {
        return line;
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// `terraform init` says on every run that it created a lock file and that it computed the
/// checksums of `coder/coder` itself: that is how the daemon's mirror and throwaway work
/// directories work, nothing the template's author can act on, so those paragraphs are shown at
/// debug level. Blank lines only separate paragraphs and are dropped.
#[derive(Debug, Default)]
pub(crate) struct InitFilter {
    quiet: bool,
}

impl InitFilter {
    /// The level of an `init` output line, or `None` to drop it.
    pub(crate) fn level(&mut self, line: &str) -> Option<LogLevel> {
        if line.starts_with("Warning: Incomplete lock file information for providers")
            || line.starts_with("Terraform has created a lock file")
        {
            self.quiet = true;
        } else if line.starts_with("Terraform has been successfully initialized") {
            self.quiet = false;
        }
        if line.trim().is_empty() {
            None
        } else if self.quiet {
            Some(LogLevel::Debug)
        } else {
            Some(LogLevel::Info)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_keep_their_level() {
        let line = r#"{"@level":"info","@message":"coder_agent.main: Plan to create","@module":"terraform.ui","type":"planned_change"}"#;
        assert_eq!(
            json_line(line, false),
            Rendered {
                level: LogLevel::Info,
                lines: vec!["coder_agent.main: Plan to create".into()],
                error: None
            }
        );
        let version = r#"{"@level":"info","@message":"Terraform 1.11.4","type":"version"}"#;
        assert_eq!(json_line(version, false).level, LogLevel::Debug);
        assert_eq!(
            json_line(line, true).level,
            LogLevel::Debug,
            "replayed by apply"
        );
        let warn = r#"{"@level":"warn","@message":"Warning: deprecated","type":"log"}"#;
        assert_eq!(json_line(warn, false).level, LogLevel::Warn);
        let interrupt =
            r#"{"@level":"info","@message":"\nInterrupt received.\nPlease wait.\n","type":"log"}"#;
        assert_eq!(
            json_line(interrupt, false).lines,
            ["Interrupt received.", "Please wait."]
        );
    }

    #[test]
    fn error_diagnostics_explain_the_failure() {
        let line = r#"{"@level":"error","@message":"Error: local-exec provisioner error","type":"diagnostic","diagnostic":{"severity":"error","summary":"local-exec provisioner error","detail":"Error running command 'exit 3': exit status 3. Output: ","address":"terraform_data.x","range":{"filename":"main.tf","start":{"line":6,"column":28,"byte":144},"end":{"line":6,"column":29,"byte":145}}}}"#;
        let rendered = json_line(line, true);
        assert_eq!(rendered.level, LogLevel::Error);
        assert_eq!(
            rendered.lines,
            [
                "Error: local-exec provisioner error",
                "  with terraform_data.x, on main.tf line 6",
                "Error running command 'exit 3': exit status 3. Output:",
            ]
        );
        assert_eq!(
            rendered.error.as_deref(),
            Some(
                "local-exec provisioner error: Error running command 'exit 3': exit status 3. Output:"
            )
        );
        let bare = r#"{"@level":"error","@message":"Error: execution halted","type":"diagnostic","diagnostic":{"severity":"error","summary":"execution halted","detail":""}}"#;
        assert_eq!(
            json_line(bare, false).error.as_deref(),
            Some("execution halted")
        );
        let warning = r#"{"@level":"warn","@message":"Warning: x","type":"diagnostic","diagnostic":{"severity":"warning","summary":"x","detail":"y"}}"#;
        assert_eq!(json_line(warning, false).error, None);
    }

    #[test]
    fn other_lines_are_text_and_long_lines_are_clipped() {
        assert_eq!(json_line("not json", false).lines, ["not json"]);
        assert_eq!(
            json_line(r#"{"json": "but not terraform's"}"#, false).level,
            LogLevel::Info
        );
        let long = "é".repeat(MAX_LINE_BYTES);
        let rendered = text_line(&long, LogLevel::Error);
        assert!(rendered.lines[0].len() <= MAX_LINE_BYTES);
        assert_eq!(rendered.level, LogLevel::Error);
    }

    #[test]
    fn the_mirror_checksum_warning_is_quiet() {
        let mut filter = InitFilter::default();
        let levels: Vec<Option<LogLevel>> = [
            "- Installed coder/coder v2.17.0 (unauthenticated)",
            "Terraform has created a lock file .terraform.lock.hcl to record the provider",
            "selections it made above.",
            "",
            "Warning: Incomplete lock file information for providers",
            "  - coder/coder",
            "Terraform has been successfully initialized!",
        ]
        .iter()
        .map(|l| filter.level(l))
        .collect();
        use LogLevel::{Debug, Info};
        assert_eq!(
            levels,
            [
                Some(Info),
                Some(Debug),
                Some(Debug),
                None,
                Some(Debug),
                Some(Debug),
                Some(Info)
            ]
        );
    }
}
