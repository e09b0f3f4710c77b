//! Running one phase's scripts (start or stop) in the order their dependencies ask for.
//!
//! A script without dependencies starts at once, as every script did before ordering existed.
//! A script with dependencies (from `coder_script_order`, computed by the provisioner) says so
//! in its log, waits until each prerequisite has ended, then runs — unless it requires
//! `success` of a prerequisite that failed, timed out or was skipped itself, in which case it
//! is skipped and says why. `completion` runs whatever the outcome.
//!
//! The provisioner refuses cycles and prerequisites of another agent or phase; should a
//! manifest still have them, the scripts concerned are skipped (a cycle) or treat the unknown
//! prerequisite as skipped, rather than waiting forever.

use std::collections::HashMap;

use codersdk::agentsdk::{ManifestScript, ScriptStage};
use codersdk::proto::ScriptRequirement;
use futures::future::join_all;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Outcome, ScriptRunner, display_name};

/// One prerequisite of a script: another script of the phase, or an address none has.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Prerequisite {
    Script(usize),
    Unknown(String),
}

/// Indices of each script's prerequisites, with what it requires of them.
fn prerequisites(scripts: &[&ManifestScript]) -> Vec<Vec<(Prerequisite, ScriptRequirement)>> {
    let mut by_address: HashMap<&str, usize> = HashMap::new();
    for (i, script) in scripts.iter().enumerate() {
        if !script.resource_address.is_empty() {
            by_address
                .entry(script.resource_address.as_str())
                .or_insert(i);
        }
    }
    scripts
        .iter()
        .map(|script| {
            script
                .dependencies
                .iter()
                .map(|d| {
                    let address = d.prerequisite_resource_address.as_str();
                    let prerequisite = match by_address.get(address) {
                        Some(&i) => Prerequisite::Script(i),
                        None => Prerequisite::Unknown(address.to_owned()),
                    };
                    (prerequisite, d.requirement)
                })
                .collect()
        })
        .collect()
}

/// Scripts that can never start: on a cycle, or waiting (transitively) for one.
fn blocked_by_cycles(prerequisites: &[Vec<(Prerequisite, ScriptRequirement)>]) -> Vec<bool> {
    let n = prerequisites.len();
    let mut waiting_for: Vec<usize> = prerequisites
        .iter()
        .map(|p| {
            p.iter()
                .filter(|(p, _)| matches!(p, Prerequisite::Script(_)))
                .count()
        })
        .collect();
    let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, prereqs) in prerequisites.iter().enumerate() {
        for (prerequisite, _) in prereqs {
            if let Prerequisite::Script(p) = prerequisite {
                dependants[*p].push(i);
            }
        }
    }
    // Kahn's algorithm: whatever is never freed is stuck behind a cycle.
    let mut ready: Vec<usize> = (0..n).filter(|&i| waiting_for[i] == 0).collect();
    let mut freed = vec![false; n];
    while let Some(i) = ready.pop() {
        freed[i] = true;
        for &d in &dependants[i] {
            waiting_for[d] -= 1;
            if waiting_for[d] == 0 {
                ready.push(d);
            }
        }
    }
    freed.into_iter().map(|f| !f).collect()
}

fn describe(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed => "failed",
        Outcome::TimedOut => "timed out",
        Outcome::PipesHeldOpen => "left its output open",
        Outcome::Interrupted => "was interrupted",
        Outcome::Skipped => "was skipped",
    }
}

impl ScriptRunner {
    /// Runs `scripts` (one phase) as their dependencies allow, in parallel otherwise, and
    /// returns their outcomes in the same order.
    pub(crate) async fn run_ordered(
        &self,
        scripts: &[&ManifestScript],
        stage: ScriptStage,
        cancel: &CancellationToken,
    ) -> Vec<Outcome> {
        let prerequisites = prerequisites(scripts);
        let stuck = blocked_by_cycles(&prerequisites);
        let (senders, receivers): (Vec<_>, Vec<_>) =
            scripts.iter().map(|_| watch::channel(None)).unzip();
        let runs = scripts.iter().enumerate().map(|(i, script)| {
            let sender = &senders[i];
            let prereqs = &prerequisites[i];
            let receivers = &receivers;
            let stuck = stuck[i];
            async move {
                let outcome = if stuck {
                    let message = "skipped: its dependencies form a cycle";
                    tracing::error!(script = %display_name(script), "{message}");
                    self.note(script, "error", message).await;
                    Outcome::Skipped
                } else {
                    self.wait_then_run(scripts, script, prereqs, receivers, stage, cancel)
                        .await
                };
                let _ = sender.send(Some(outcome));
                outcome
            }
        });
        join_all(runs).await
    }

    async fn wait_then_run(
        &self,
        scripts: &[&ManifestScript],
        script: &ManifestScript,
        prereqs: &[(Prerequisite, ScriptRequirement)],
        receivers: &[watch::Receiver<Option<Outcome>>],
        stage: ScriptStage,
        cancel: &CancellationToken,
    ) -> Outcome {
        if prereqs.is_empty() {
            return self.run(script, stage, cancel).await;
        }
        let name = |p: &Prerequisite| match p {
            Prerequisite::Script(i) => {
                let s = scripts[*i];
                format!("{:?} ({})", display_name(s), s.resource_address)
            }
            Prerequisite::Unknown(address) => address.clone(),
        };
        let names: Vec<String> = prereqs.iter().map(|(p, _)| name(p)).collect();
        let message = format!("waiting for {} to finish", names.join(", "));
        tracing::info!(script = %display_name(script), "{message}");
        self.note(script, "info", &message).await;

        let mut unmet = Vec::new();
        for (prerequisite, requirement) in prereqs {
            let outcome = match prerequisite {
                Prerequisite::Script(i) => {
                    let mut receiver = receivers[*i].clone();
                    tokio::select! {
                        () = cancel.cancelled() => return Outcome::Interrupted,
                        ended = receiver.wait_for(Option::is_some) => match ended.map(|o| *o) {
                            Ok(Some(outcome)) => outcome,
                            _ => Outcome::Interrupted,
                        },
                    }
                }
                Prerequisite::Unknown(_) => Outcome::Skipped,
            };
            if *requirement == ScriptRequirement::Success && outcome != Outcome::Succeeded {
                unmet.push(format!("{} {}", name(prerequisite), describe(outcome)));
            }
        }
        if !unmet.is_empty() {
            let message = format!(
                "skipped: it requires its prerequisites to succeed, and {}",
                unmet.join(", ")
            );
            tracing::warn!(script = %display_name(script), "{message}");
            self.note(script, "warn", &message).await;
            return Outcome::Skipped;
        }
        self.run(script, stage, cancel).await
    }
}

#[cfg(test)]
mod tests {
    use codersdk::proto::ScriptDependency;

    use super::*;

    fn script(address: &str, after: &[(&str, ScriptRequirement)]) -> ManifestScript {
        ManifestScript {
            resource_address: address.into(),
            dependencies: after
                .iter()
                .map(|(a, r)| ScriptDependency {
                    prerequisite_resource_address: (*a).into(),
                    requirement: *r,
                })
                .collect(),
            ..ManifestScript::default()
        }
    }

    #[test]
    fn prerequisites_are_found_by_address() {
        use ScriptRequirement::*;
        let a = script("coder_script.a", &[]);
        let b = script(
            "coder_script.b",
            &[("coder_script.a", Success), ("coder_script.x", Completion)],
        );
        let found = prerequisites(&[&a, &b]);
        assert!(found[0].is_empty());
        assert_eq!(
            found[1],
            [
                (Prerequisite::Script(0), Success),
                (Prerequisite::Unknown("coder_script.x".into()), Completion)
            ]
        );
    }

    #[test]
    fn cycles_and_what_waits_for_them_are_stuck() {
        use ScriptRequirement::*;
        let a = script("a", &[("b", Success)]);
        let b = script("b", &[("a", Success)]);
        let c = script("c", &[("b", Completion)]);
        let d = script("d", &[]);
        let e = script("e", &[("d", Success)]);
        assert_eq!(
            blocked_by_cycles(&prerequisites(&[&a, &b, &c, &d, &e])),
            [true, true, true, false, false]
        );
    }
}
