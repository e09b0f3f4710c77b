use std::time::Duration;

use codersdk::proto::{Agent, App, Resource, RichParameter};
use codersdk::provisionerd::{AcquiredJob, JobLog, LogSource, Metadata, TemplateVariable};
use uuid::Uuid;

use super::*;

fn build_job(transition: Transition, previous: &[u8]) -> AcquiredJob {
    AcquiredJob {
        job_id: Uuid::new_v4(),
        created_at: Utc::now(),
        provisioner: PROVISIONER.into(),
        template_source_archive: Default::default(),
        kind: JobKind::WorkspaceBuild {
            workspace_build_id: Uuid::new_v4(),
            workspace_name: "dev".into(),
            state: previous.to_vec(),
            rich_parameter_values: vec![RichParameterValue {
                name: "region".into(),
                value: "eu".into(),
            }],
            variable_values: vec![
                VariableValue {
                    name: "image".into(),
                    value: "ubuntu".into(),
                    sensitive: false,
                },
                VariableValue {
                    name: "secret".into(),
                    value: "hunter2".into(),
                    sensitive: true,
                },
            ],
            metadata: Metadata {
                workspace_transition: transition,
                ..Metadata::default()
            },
            secrets: vec![],
            external_auth_providers: vec![],
            owner_ssh_key: None,
        },
    }
}

fn import_job() -> AcquiredJob {
    AcquiredJob {
        kind: JobKind::TemplateImport {
            metadata: Metadata::default(),
            user_variable_values: vec![VariableValue {
                name: "image".into(),
                value: "debian".into(),
                sensitive: false,
            }],
        },
        ..build_job(Transition::Start, b"")
    }
}

struct Run {
    outcome: Result<JobResult, JobFailure>,
    logs: Vec<JobLog>,
}

impl Run {
    fn outputs(&self) -> Vec<&str> {
        self.logs.iter().map(|l| l.output.as_str()).collect()
    }
}

/// Runs `job` with an archive holding `echo_json` (none when `None`) and `files`.
async fn run_with(
    job: &AcquiredJob,
    echo_json: Option<&[u8]>,
    files: &[(&str, &[u8])],
    cancel: CancellationToken,
) -> Run {
    let mut tar = tar::Builder::new(Vec::new());
    let entries = echo_json.map(|json| (format::FILE_NAME, json));
    for (name, data) in entries.into_iter().chain(files.iter().copied()) {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        tar.append_data(&mut header, name, data).expect("tar entry");
    }
    let archive = tar.into_inner().expect("tar");
    let logs = LogSink::new();
    let ctx = JobContext {
        job,
        template: Template::Archive(&archive),
        logs: logs.clone(),
        cancel,
        progress: crate::engine::Progress::default(),
    };
    let outcome = EchoEngine.run(ctx).await;
    Run {
        outcome,
        logs: logs.take(),
    }
}

async fn run_template(job: &AcquiredJob, template: &EchoTemplate) -> Run {
    let json = serde_json::to_vec(template).expect("json");
    run_with(job, Some(&json), &[], CancellationToken::new()).await
}

/// Imports `template` from an archive that also has a `README.md` saying `# Dev`.
async fn import_with_readme(template: &EchoTemplate) -> Run {
    let json = serde_json::to_vec(template).expect("json");
    let readme = [("README.md", &b"# Dev"[..])];
    run_with(
        &import_job(),
        Some(&json),
        &readme,
        CancellationToken::new(),
    )
    .await
}

fn build_result(run: &Run) -> (&[u8], &[Resource]) {
    match &run.outcome {
        Ok(JobResult::WorkspaceBuild {
            state, resources, ..
        }) => (state, resources),
        other => panic!("expected a build result, got {other:?}"),
    }
}

fn failure(run: &Run) -> &JobFailure {
    match &run.outcome {
        Err(failure) => failure,
        Ok(other) => panic!("expected a failure, got {other:?}"),
    }
}

fn resource(name: &str) -> Resource {
    Resource {
        name: name.into(),
        kind: "null_resource".into(),
        agents: vec![Agent {
            name: "main".into(),
            operating_system: "linux".into(),
            architecture: "amd64".into(),
            apps: vec![App {
                slug: "code".into(),
                url: "http://localhost:8080".into(),
                ..App::default()
            }],
            ..Agent::default()
        }],
        ..Resource::default()
    }
}

#[tokio::test]
async fn without_a_file_builds_succeed_and_record_the_transition() {
    let job = build_job(Transition::Stop, b"");
    let run = run_with(&job, None, &[], CancellationToken::new()).await;
    let (state, resources) = build_result(&run);
    assert!(resources.is_empty());
    let state = EchoState::parse(state).expect("echo state");
    assert_eq!(state.transition, Transition::Stop);
    assert_eq!(state.generation, 1);
    assert_eq!(state.previous_bytes, 0);
}

#[tokio::test]
async fn without_a_file_imports_return_nothing() {
    let run = run_with(&import_job(), None, &[], CancellationToken::new()).await;
    match run.outcome {
        Ok(JobResult::TemplateImport {
            start_resources,
            stop_resources,
            rich_parameters,
            readme,
            timings,
            ..
        }) => {
            assert!(start_resources.is_empty() && stop_resources.is_empty());
            assert!(rich_parameters.is_empty());
            assert_eq!(readme, "");
            assert_eq!(timings.len(), 1);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn bad_json_fails_clearly() {
    let job = build_job(Transition::Start, b"");
    let run = run_with(&job, Some(b"{not json"), &[], CancellationToken::new()).await;
    assert!(
        failure(&run)
            .error
            .starts_with("echo.json is not a valid echo template:"),
        "{}",
        failure(&run).error
    );
    let run = run_with(
        &job,
        Some(br#"{"begin": {}}"#),
        &[],
        CancellationToken::new(),
    )
    .await;
    assert!(
        failure(&run).error.contains("unknown field `begin`"),
        "{}",
        failure(&run).error
    );
}

#[tokio::test]
async fn builds_return_their_stage_and_echo_what_they_received() {
    let template = EchoTemplate {
        start: Some(BuildStage {
            logs: vec![
                EchoLog::info("creating"),
                EchoLog {
                    level: LogLevel::Warn,
                    stage: Some("Apply".into()),
                    output: "careful".into(),
                },
            ],
            resources: vec![resource("dev")],
            ..BuildStage::default()
        }),
        ..EchoTemplate::default()
    };
    let previous = EchoState::next(Transition::Stop, Uuid::nil(), b"").to_bytes();
    let job = build_job(Transition::Start, &previous);
    let run = run_template(&job, &template).await;
    let (state, resources) = build_result(&run);
    assert_eq!(resources, [resource("dev")]);
    let state = EchoState::parse(state).expect("echo state");
    assert_eq!(state.generation, 2);
    assert_eq!(
        state.previous.expect("previous").transition,
        Transition::Stop
    );

    let outputs = run.outputs();
    assert!(outputs.contains(&"parameter region=eu"), "{outputs:?}");
    assert!(outputs.contains(&"variable image=ubuntu"), "{outputs:?}");
    assert!(
        outputs.contains(&"variable secret=(sensitive)"),
        "{outputs:?}"
    );
    assert!(
        !outputs.iter().any(|o| o.contains("hunter2")),
        "{outputs:?}"
    );
    assert!(
        outputs
            .iter()
            .any(|o| o.starts_with(&format!("previous state ({} bytes): {{", previous.len())))
    );
    let creating = run
        .logs
        .iter()
        .find(|l| l.output == "creating")
        .expect("line");
    assert_eq!(
        (creating.level, creating.stage.as_str(), creating.source),
        (LogLevel::Info, "Start", LogSource::Provisioner)
    );
    let careful = run
        .logs
        .iter()
        .find(|l| l.output == "careful")
        .expect("line");
    assert_eq!(
        (careful.level, careful.stage.as_str()),
        (LogLevel::Warn, "Apply")
    );
}

#[tokio::test]
async fn each_transition_reads_its_own_stage() {
    let template = EchoTemplate {
        stop: Some(BuildStage {
            resources: vec![resource("stopped")],
            ..BuildStage::default()
        }),
        delete: Some(BuildStage {
            state: Some("gone".into()),
            ..BuildStage::default()
        }),
        ..EchoTemplate::default()
    };
    let run = run_template(&build_job(Transition::Stop, b""), &template).await;
    assert_eq!(build_result(&run).1, [resource("stopped")]);
    let run = run_template(&build_job(Transition::Delete, b"old"), &template).await;
    assert_eq!(build_result(&run), (&b"gone"[..], &[][..]));
    assert!(run.outputs().contains(&"previous state (3 bytes): old"));
    let run = run_template(&build_job(Transition::Start, b""), &template).await;
    assert!(
        build_result(&run).1.is_empty(),
        "missing stage: no resources"
    );
}

#[tokio::test]
async fn errors_fail_with_code_and_state() {
    let template = EchoTemplate {
        start: Some(BuildStage {
            logs: vec![EchoLog::info("before")],
            error: Some(EchoError {
                message: "apply failed".into(),
                code: "REQUIRED_TEMPLATE_VARIABLES".into(),
                state: Some("half".into()),
            }),
            ..BuildStage::default()
        }),
        import: Some(ImportStage {
            error: Some(EchoError::new("parse failed")),
            ..ImportStage::default()
        }),
        ..EchoTemplate::default()
    };
    let run = run_template(&build_job(Transition::Start, b""), &template).await;
    let failure = failure(&run);
    assert_eq!(failure.error, "apply failed");
    assert_eq!(failure.error_code, "REQUIRED_TEMPLATE_VARIABLES");
    assert_eq!(failure.state.as_deref(), Some(&b"half"[..]));
    assert!(!failure.canceled);
    assert!(
        run.outputs().contains(&"before"),
        "logs come before the error"
    );

    let run = run_template(&import_job(), &template).await;
    assert_eq!(super::tests::failure(&run).error, "parse failed");
    assert_eq!(super::tests::failure(&run).state, None);
}

#[tokio::test]
async fn imports_return_parameters_variables_readme_and_resources() {
    let template = EchoTemplate {
        import: Some(ImportStage {
            logs: vec![EchoLog::info("parsing")],
            variables: vec![TemplateVariable {
                name: "image".into(),
                kind: "string".into(),
                default_value: "ubuntu".into(),
                ..TemplateVariable::default()
            }],
            rich_parameters: vec![RichParameter {
                name: "region".into(),
                kind: "string".into(),
                ..RichParameter::default()
            }],
            stop_resources: Some(vec![resource("explicit-stop")]),
            ..ImportStage::default()
        }),
        start: Some(BuildStage {
            resources: vec![resource("from-start")],
            ..BuildStage::default()
        }),
        ..EchoTemplate::default()
    };
    let run = import_with_readme(&template).await;
    match &run.outcome {
        Ok(JobResult::TemplateImport {
            start_resources,
            stop_resources,
            rich_parameters,
            variables,
            readme,
            ..
        }) => {
            assert_eq!(
                start_resources,
                &[resource("from-start")],
                "defaults to the start stage"
            );
            assert_eq!(stop_resources, &[resource("explicit-stop")]);
            assert_eq!(rich_parameters[0].name, "region");
            assert_eq!(variables[0].default_value, "ubuntu");
            assert_eq!(readme, "# Dev");
        }
        other => panic!("{other:?}"),
    }
    assert!(run.outputs().contains(&"variable image=debian"));
    assert!(run.outputs().contains(&"parsing"));

    let mut with_readme = template;
    if let Some(import) = &mut with_readme.import {
        import.readme = Some("explicit".into());
    }
    let run = import_with_readme(&with_readme).await;
    assert!(
        matches!(&run.outcome, Ok(JobResult::TemplateImport { readme, .. }) if readme == "explicit")
    );
}

#[tokio::test]
async fn floods_write_many_sized_lines() {
    let template = EchoTemplate {
        start: Some(BuildStage {
            flood: Some(Flood {
                lines: 2500,
                line_bytes: 100,
                level: LogLevel::Debug,
                stage: Some("Flood".into()),
            }),
            ..BuildStage::default()
        }),
        ..EchoTemplate::default()
    };
    let run = run_template(&build_job(Transition::Start, b""), &template).await;
    build_result(&run);
    let flood: Vec<_> = run.logs.iter().filter(|l| l.stage == "Flood").collect();
    assert_eq!(flood.len(), 2500);
    assert!(
        flood
            .iter()
            .all(|l| l.output.len() == 100 && l.level == LogLevel::Debug)
    );
    assert!(flood[2499].output.starts_with("flood line 2499: xx"));
}

#[tokio::test(start_paused = true)]
async fn delays_wait_and_can_be_canceled() {
    let template = EchoTemplate {
        start: Some(BuildStage {
            delay_ms: 60_000,
            ..BuildStage::default()
        }),
        ..EchoTemplate::default()
    };
    let started = tokio::time::Instant::now();
    let run = run_template(&build_job(Transition::Start, b""), &template).await;
    build_result(&run);
    assert!(started.elapsed() >= Duration::from_secs(60));

    let cancel = CancellationToken::new();
    let json = serde_json::to_vec(&template).expect("json");
    let job = build_job(Transition::Start, b"");
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        trigger.cancel();
    });
    let run = run_with(&job, Some(&json), &[], cancel).await;
    assert_eq!(failure(&run).error, "echo: canceled during start");
}

#[tokio::test]
async fn hangs_until_canceled_and_returns_the_state() {
    let template = EchoTemplate {
        stop: Some(BuildStage {
            hang: true,
            ..BuildStage::default()
        }),
        import: Some(ImportStage {
            hang: true,
            ..ImportStage::default()
        }),
        ..EchoTemplate::default()
    };
    let json = serde_json::to_vec(&template).expect("json");
    for job in [build_job(Transition::Stop, b""), import_job()] {
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let run = tokio::spawn({
            let json = json.clone();
            async move { run_with(&job, Some(&json), &[], cancel).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!run.is_finished(), "hangs");
        trigger.cancel();
        let run = run.await.expect("joined");
        let failure = failure(&run);
        assert!(
            failure.error.starts_with("echo: canceled during"),
            "{}",
            failure.error
        );
        assert!(run.outputs().contains(&"Hanging until canceled"));
        if failure.error.ends_with("stop") {
            let state =
                EchoState::parse(failure.state.as_deref().unwrap_or_default()).expect("state");
            assert_eq!(state.transition, Transition::Stop);
        } else {
            assert_eq!(failure.state, None);
        }
    }
}
