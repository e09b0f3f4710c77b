use std::time::Duration;

use codersdk::agentsdk::Request;
use codersdk::proto::{ScriptDependency, ScriptRequirement};
use uuid::Uuid;

use super::*;
use crate::reporter::tests::{FakePeer, cancel_after};

struct Fixture {
    dir: tempfile::TempDir,
    reporter: Reporter,
    runner: ScriptRunner,
}

fn fixture(graces: Graces) -> anyhow::Result<Fixture> {
    let dir = tempfile::tempdir()?;
    let reporter = Reporter::new(Duration::from_millis(10), Duration::from_secs(1));
    let shell = ShellCommand {
        program: "/bin/sh".into(),
        env: [("PATH", "/usr/bin:/bin"), ("HOME", "/nonexistent")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        dir: dir.path().to_path_buf(),
    };
    let runner = ScriptRunner {
        shell,
        reporter: reporter.clone(),
        log_dir: dir.path().join("logs"),
        data_dir: dir.path().join("data/coder-script-data"),
        home: None,
        graces,
    };
    Ok(Fixture {
        dir,
        reporter,
        runner,
    })
}

fn quick() -> Graces {
    Graces {
        kill: Duration::from_millis(300),
        pipes: Duration::from_millis(300),
    }
}

fn script(body: &str, timeout_seconds: i64) -> ManifestScript {
    ManifestScript {
        log_source_id: Uuid::new_v4(),
        display_name: "test".into(),
        script: body.into(),
        timeout_seconds,
        ..ManifestScript::default()
    }
}

/// Every log line the runner queued, as (level, output).
async fn sent(reporter: &Reporter) -> anyhow::Result<Vec<(String, String)>> {
    Ok(FakePeer::default()
        .flushed(reporter)
        .await?
        .into_iter()
        .filter_map(|c| match c {
            Request::BatchCreateLogs(batch) => Some(batch.logs),
            _ => None,
        })
        .flatten()
        .map(|l| (l.level, l.output))
        .collect())
}

fn has(lines: &[(String, String)], level: &str, needle: &str) -> bool {
    lines.iter().any(|(l, o)| l == level && o.contains(needle))
}

#[tokio::test]
async fn output_goes_to_coderd_by_stream_and_to_the_log_file() -> anyhow::Result<()> {
    let f = fixture(quick())?;
    let s = script(
        "echo out; echo err >&2; printf 'no newline'; test -d \"$CODER_SCRIPT_DATA_DIR\" && echo data-dir-ok",
        0,
    );
    let outcome = f
        .runner
        .run(&s, ScriptStage::Start, &CancellationToken::new())
        .await;
    assert_eq!(outcome, Outcome::Succeeded);
    let lines = sent(&f.reporter).await?;
    assert!(has(&lines, "info", "out"), "{lines:?}");
    assert!(has(&lines, "error", "err"), "{lines:?}");
    assert!(has(&lines, "info", "no newlinedata-dir-ok"), "{lines:?}");
    let file = f
        .dir
        .path()
        .join(format!("logs/coder-script-{}.log", s.log_source_id));
    let written = std::fs::read_to_string(&file)?;
    assert!(
        written.contains("out\n") && written.contains("err\n"),
        "{written}"
    );
    Ok(())
}

#[tokio::test]
async fn a_non_zero_exit_is_a_failure_and_says_why() -> anyhow::Result<()> {
    let f = fixture(quick())?;
    let outcome = f
        .runner
        .run(
            &script("echo before; exit 3", 0),
            ScriptStage::Start,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome, Outcome::Failed);
    let lines = sent(&f.reporter).await?;
    assert!(has(&lines, "error", "exit status 3"), "{lines:?}");
    Ok(())
}

#[tokio::test]
async fn each_run_is_reported_for_the_timeline_with_its_exit_status() -> anyhow::Result<()> {
    let f = fixture(quick())?;
    let failing = ManifestScript {
        id: Uuid::new_v4(),
        ..script("exit 3", 0)
    };
    let passing = ManifestScript {
        id: Uuid::new_v4(),
        ..script("true", 0)
    };
    f.runner
        .run(&failing, ScriptStage::Start, &CancellationToken::new())
        .await;
    f.runner
        .run(&passing, ScriptStage::Cron, &CancellationToken::new())
        .await;
    let timings: Vec<_> = FakePeer::default()
        .flushed(&f.reporter)
        .await?
        .into_iter()
        .filter_map(|c| match c {
            Request::ScriptsCompleted { timings } => Some(timings),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(timings.len(), 2, "{timings:?}");
    let first = &timings[0];
    assert_eq!(first.script_id, failing.id);
    assert_eq!(
        (first.exit_code, first.stage, first.status),
        (3, ScriptStage::Start, ScriptStatus::ExitFailure)
    );
    assert!(first.ended_at >= first.started_at);
    let second = &timings[1];
    assert_eq!(second.script_id, passing.id);
    assert_eq!(
        (second.exit_code, second.stage, second.status),
        (0, ScriptStage::Cron, ScriptStatus::Ok)
    );
    Ok(())
}

#[tokio::test]
async fn a_missing_shell_is_a_failure() -> anyhow::Result<()> {
    let mut f = fixture(quick())?;
    f.runner.shell.program = "/nonexistent/shell".into();
    let outcome = f
        .runner
        .run(
            &script("true", 0),
            ScriptStage::Start,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert!(has(&sent(&f.reporter).await?, "error", "cannot start"));
    Ok(())
}

#[tokio::test]
async fn a_timeout_hangs_up_on_the_script() -> anyhow::Result<()> {
    let f = fixture(quick())?;
    let started = Instant::now();
    let outcome = f
        .runner
        .run(
            &script("echo started; sleep 30", 1),
            ScriptStage::Start,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome, Outcome::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let lines = sent(&f.reporter).await?;
    assert!(has(&lines, "info", "started"), "{lines:?}");
    assert!(has(&lines, "error", "timed out after 1s"), "{lines:?}");
    Ok(())
}

#[tokio::test]
async fn a_script_ignoring_the_hang_up_is_killed_after_the_grace() -> anyhow::Result<()> {
    let f = fixture(Graces {
        kill: Duration::from_millis(500),
        pipes: Duration::from_secs(5),
    })?;
    let marker = f.dir.path().join("survived");
    let body = format!("trap '' HUP; sleep 3; touch {}", marker.display());
    let started = Instant::now();
    let outcome = f
        .runner
        .run(
            &script(&body, 1),
            ScriptStage::Start,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome, Outcome::TimedOut);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1400), "{took:?}");
    assert!(
        took < Duration::from_millis(2900),
        "killed, not waited for: {took:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!marker.exists(), "the whole group was killed");
    Ok(())
}

#[tokio::test]
async fn output_held_open_after_exit_is_an_error() -> anyhow::Result<()> {
    let f = fixture(quick())?;
    let started = Instant::now();
    let outcome = f
        .runner
        .run(
            &script("sleep 20 & echo done", 0),
            ScriptStage::Start,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome, Outcome::PipesHeldOpen);
    assert!(started.elapsed() < Duration::from_secs(5));
    let lines = sent(&f.reporter).await?;
    assert!(has(&lines, "info", "done"), "{lines:?}");
    assert!(has(&lines, "error", "still held open"), "{lines:?}");

    let redirected = f
        .runner
        .run(
            &script("sleep 20 >/dev/null 2>&1 & echo done", 0),
            ScriptStage::Start,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(redirected, Outcome::Succeeded);
    Ok(())
}

#[tokio::test]
async fn shutdown_interrupts_a_running_script() -> anyhow::Result<()> {
    let f = fixture(quick())?;
    let cancel = cancel_after(Duration::from_millis(200));
    let outcome = f
        .runner
        .run(&script("sleep 30", 0), ScriptStage::Start, &cancel)
        .await;
    assert_eq!(outcome, Outcome::Interrupted);
    Ok(())
}

#[tokio::test]
async fn scripts_run_in_parallel() -> anyhow::Result<()> {
    let f = fixture(quick())?;
    let (a, b) = (script("sleep 1; echo a", 0), script("sleep 1; exit 1", 0));
    let started = Instant::now();
    let outcomes = f
        .runner
        .run_ordered(&[&a, &b], ScriptStage::Start, &CancellationToken::new())
        .await;
    assert_eq!(outcomes, [Outcome::Succeeded, Outcome::Failed]);
    assert!(started.elapsed() < Duration::from_millis(1900));
    Ok(())
}

#[test]
fn log_paths_follow_coder() {
    let log_dir = Path::new("/var/log/coder");
    let home = Path::new("/home/coder");
    let env: BTreeMap<_, _> = [("NAME".to_string(), "x".to_string())].into();
    let mut s = script("", 0);
    assert_eq!(
        log_path(&s, log_dir, Some(home), &env),
        log_dir.join(format!("coder-script-{}.log", s.log_source_id))
    );
    s.log_path = "startup-$NAME.log".into();
    assert_eq!(
        log_path(&s, log_dir, Some(home), &env),
        log_dir.join("startup-x.log")
    );
    s.log_path = "~/logs/s.log".into();
    assert_eq!(
        log_path(&s, log_dir, Some(home), &env),
        home.join("logs/s.log")
    );
    s.log_path = "/tmp/s.log".into();
    assert_eq!(
        log_path(&s, log_dir, Some(home), &env),
        Path::new("/tmp/s.log")
    );
}

fn ordered(address: &str, body: &str, after: &[(&str, ScriptRequirement)]) -> ManifestScript {
    ManifestScript {
        display_name: address.into(),
        resource_address: address.into(),
        dependencies: after
            .iter()
            .map(|(a, requirement)| ScriptDependency {
                prerequisite_resource_address: (*a).into(),
                requirement: *requirement,
            })
            .collect(),
        ..script(body, 0)
    }
}

#[tokio::test]
async fn dependants_wait_for_their_prerequisites() -> anyhow::Result<()> {
    use ScriptRequirement::Success;
    let f = fixture(quick())?;
    let stamp = f.dir.path().join("order");
    let step = |name: &str| {
        format!(
            "echo start-{name} >>{0}; sleep 0.3; echo end-{name} >>{0}",
            stamp.display()
        )
    };
    // Listed out of order: the dependencies, not the list, decide.
    let third = ordered(
        "coder_script.third",
        &step("third"),
        &[("coder_script.second", Success)],
    );
    let first = ordered("coder_script.first", &step("first"), &[]);
    let second = ordered(
        "coder_script.second",
        &step("second"),
        &[("coder_script.first", Success)],
    );
    let outcomes = f
        .runner
        .run_ordered(
            &[&third, &first, &second],
            ScriptStage::Start,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcomes, [Outcome::Succeeded; 3]);
    let order = std::fs::read_to_string(&stamp)?;
    assert_eq!(
        order.lines().collect::<Vec<_>>(),
        [
            "start-first",
            "end-first",
            "start-second",
            "end-second",
            "start-third",
            "end-third"
        ]
    );
    let lines = sent(&f.reporter).await?;
    assert!(
        has(
            &lines,
            "info",
            "waiting for \"coder_script.second\" (coder_script.second) to finish"
        ),
        "{lines:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_failed_prerequisite_skips_success_dependants_only() -> anyhow::Result<()> {
    use ScriptRequirement::{Completion, Success};
    let f = fixture(quick())?;
    let broken = ordered("coder_script.broken", "exit 3", &[]);
    let needs = ordered(
        "coder_script.needs",
        "echo ran-needs",
        &[("coder_script.broken", Success)],
    );
    let after = ordered(
        "coder_script.after",
        "echo ran-after",
        &[("coder_script.broken", Completion)],
    );
    let transitive = ordered(
        "coder_script.transitive",
        "echo ran-transitive",
        &[("coder_script.needs", Success)],
    );
    let outcomes = f
        .runner
        .run_ordered(
            &[&broken, &needs, &after, &transitive],
            ScriptStage::Start,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(
        outcomes,
        [
            Outcome::Failed,
            Outcome::Skipped,
            Outcome::Succeeded,
            Outcome::Skipped
        ]
    );
    let lines = sent(&f.reporter).await?;
    assert!(has(&lines, "info", "ran-after"), "{lines:?}");
    assert!(!has(&lines, "info", "ran-needs"), "{lines:?}");
    assert!(
        has(
            &lines,
            "warn",
            "skipped: it requires its prerequisites to succeed, and \"coder_script.broken\" \
             (coder_script.broken) failed"
        ),
        "{lines:?}"
    );
    assert!(
        has(&lines, "warn", "(coder_script.needs) was skipped"),
        "{lines:?}"
    );
    Ok(())
}

#[tokio::test]
async fn cycles_and_unknown_prerequisites_never_hang() -> anyhow::Result<()> {
    use ScriptRequirement::{Completion, Success};
    let f = fixture(quick())?;
    let a = ordered("a", "true", &[("b", Success)]);
    let b = ordered("b", "true", &[("a", Success)]);
    let lost = ordered("c", "true", &[("elsewhere", Success)]);
    let tolerant = ordered("d", "true", &[("elsewhere", Completion)]);
    let outcomes = f
        .runner
        .run_ordered(
            &[&a, &b, &lost, &tolerant],
            ScriptStage::Start,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(
        outcomes,
        [
            Outcome::Skipped,
            Outcome::Skipped,
            Outcome::Skipped,
            Outcome::Succeeded
        ]
    );
    Ok(())
}

#[tokio::test]
async fn shutdown_interrupts_a_waiting_script() -> anyhow::Result<()> {
    let f = fixture(quick())?;
    let slow = ordered("slow", "sleep 30", &[]);
    let waiting = ordered(
        "waiting",
        "echo never",
        &[("slow", ScriptRequirement::Completion)],
    );
    let cancel = cancel_after(Duration::from_millis(200));
    let outcomes = f
        .runner
        .run_ordered(&[&slow, &waiting], ScriptStage::Start, &cancel)
        .await;
    assert_eq!(outcomes, [Outcome::Interrupted, Outcome::Interrupted]);
    Ok(())
}
