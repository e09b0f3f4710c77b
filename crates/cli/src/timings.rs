//! A build's timeline as `coder show` and `coder create --wait` print it: how long each
//! provisioner stage, each agent's first connection and each script run took.

use chrono::{DateTime, Utc};
use codersdk::workspaces::WorkspaceBuildTimings;

/// One line per provisioner stage (from its first start to its last end, in the order the
/// stages ran), per agent connection and per script run.
pub fn lines(timings: &WorkspaceBuildTimings) -> Vec<String> {
    let mut stages: Vec<(String, DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    for t in &timings.provisioner_timings {
        match stages.iter_mut().find(|(stage, _, _)| *stage == t.stage) {
            Some((_, start, end)) => {
                *start = (*start).min(t.started_at);
                *end = (*end).max(t.ended_at);
            }
            None => stages.push((t.stage.clone(), t.started_at, t.ended_at)),
        }
    }
    stages.sort_by_key(|(_, start, _)| *start);
    let mut lines: Vec<String> = stages
        .iter()
        .map(|(stage, start, end)| row(&format!("terraform {stage}"), *start, *end))
        .collect();
    for c in &timings.agent_connection_timings {
        lines.push(row(
            &format!("agent {} connects", c.workspace_agent_name),
            c.started_at,
            c.ended_at,
        ));
    }
    for s in &timings.agent_script_timings {
        lines.push(row(
            &format!(
                "agent {} script {:?} ({}, {}, exit {})",
                s.workspace_agent_name, s.display_name, s.stage, s.status, s.exit_code
            ),
            s.started_at,
            s.ended_at,
        ));
    }
    lines
}

fn row(what: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    let seconds = (end - start).num_milliseconds().max(0) as f64 / 1000.0;
    format!("{what:<48} {seconds:>8.2} s")
}

#[cfg(test)]
mod tests {
    use codersdk::workspaces::{AgentScriptTiming, ProvisionerTiming};
    use uuid::Uuid;

    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_800_000_000_000 + ms).unwrap_or_default()
    }

    #[test]
    fn stages_span_their_resources_and_keep_their_order() {
        let stage = |stage: &str, start, end| ProvisionerTiming {
            job_id: Uuid::nil(),
            started_at: at(start),
            ended_at: at(end),
            stage: stage.into(),
            source: "terraform".into(),
            action: String::new(),
            resource: String::new(),
        };
        let timings = WorkspaceBuildTimings {
            provisioner_timings: vec![
                stage("apply", 5_000, 6_000),
                stage("init", 0, 900),
                stage("apply", 4_000, 7_500),
            ],
            agent_script_timings: vec![AgentScriptTiming {
                started_at: at(9_000),
                ended_at: at(9_250),
                exit_code: 0,
                stage: "start".into(),
                status: "ok".into(),
                display_name: "Startup".into(),
                workspace_agent_id: Uuid::nil(),
                workspace_agent_name: "main".into(),
            }],
            agent_connection_timings: vec![],
        };
        let lines = lines(&timings);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("terraform init") && lines[0].ends_with("0.90 s"));
        assert!(lines[1].starts_with("terraform apply") && lines[1].ends_with("3.50 s"));
        assert!(lines[2].contains("script \"Startup\" (start, ok, exit 0)"));
        assert!(lines[2].ends_with("0.25 s"));
    }
}
