//! One reconciliation pass: for each preset of an active version that wants prebuilds, keep
//! exactly that many live prebuilds — create the missing ones (unless the preset is backing
//! off after failures), delete failed, expired and surplus ones — and delete the prebuilds of
//! presets no active version has any more.

use std::collections::{HashMap, HashSet};

use codersdk::proto::Scheduling;
use codersdk::provisionerd::Transition;
use codersdk::workspaces::CreateWorkspaceRequest;
use uuid::Uuid;

use coderd_authz::Subject;
use coderd_core::domain::builds::{self, BuildReason, BuildRequest};
use coderd_core::domain::{Error, Result};
use coderd_core::state::AppState;
use coderd_store::{PREBUILDS_USER_ID, PrebuildRow, WantedPreset};

/// What a pass did (tests read it; the metrics carry the same).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Another replica held the lock: nothing was done.
    pub skipped: bool,
    pub created: usize,
    pub deleted: usize,
}

/// The prebuilds user acting in `org`: an ordinary member, so its workspaces follow the same
/// rules as anyone's (it uses a template through the organization's Everyone group, like any
/// member: a template whose access list drops Everyone must name the `prebuilds` user).
fn subject(org: Uuid) -> Subject {
    Subject {
        user_id: PREBUILDS_USER_ID,
        site_roles: Vec::new(),
        orgs: HashMap::from([(org, Vec::new())]),
        groups: Vec::new(),
    }
}

fn prebuild_name() -> String {
    let id = Uuid::new_v4().simple().to_string();
    format!("prebuild-{}", &id[..12])
}

fn live(p: &PrebuildRow) -> bool {
    p.transition == "start" && !p.failed
}

pub async fn pass(state: &AppState, backoff: std::time::Duration) -> Result<PassReport> {
    let Some(_lock) = state.store.try_reconcile_lock().await? else {
        return Ok(PassReport {
            skipped: true,
            ..PassReport::default()
        });
    };
    let wanted = state.store.wanted_presets().await?;
    let prebuilds = state.store.prebuilds().await?;
    if wanted.is_empty() && prebuilds.is_empty() {
        return Ok(PassReport::default());
    }
    let failures: HashMap<Uuid, (i64, Option<chrono::DateTime<chrono::Utc>>)> = state
        .store
        .preset_failures()
        .await?
        .into_iter()
        .map(|f| (f.preset_id, (f.failures, f.last_failure)))
        .collect();
    let now = state.options.clock.now();
    let mut report = PassReport::default();
    let wanted_ids: HashSet<Uuid> = wanted.iter().map(|w| w.preset_id).collect();

    // Prebuilds of presets no active version has: delete once their build has ended.
    for p in &prebuilds {
        let orphaned = !p.preset_id.is_some_and(|id| wanted_ids.contains(&id));
        if orphaned && p.done && p.transition != "delete" {
            report.deleted += delete(state, p, "its preset is no longer wanted").await;
        }
    }
    for preset in &wanted {
        let labels = [
            ("template_name", preset.template_name.clone()),
            ("preset_name", preset.preset_name.clone()),
        ];
        let mine: Vec<&PrebuildRow> = prebuilds
            .iter()
            .filter(|p| p.preset_id == Some(preset.preset_id))
            .collect();
        let mut keep = Vec::new();
        for p in mine {
            let expired = preset.expiration_ttl.is_some_and(|ttl| {
                ttl > 0 && p.ready && p.created_at + chrono::Duration::seconds(ttl.into()) <= now
            });
            if p.transition == "start" && p.failed {
                metrics::counter!("coderd_prebuilt_workspaces_failed_total", &labels).increment(1);
                report.deleted += delete(state, p, "its build failed").await;
            } else if expired {
                report.deleted += delete(state, p, "it expired").await;
            } else if live(p) {
                keep.push(p);
            }
        }
        let desired = usize::try_from(desired_now(preset, now)).unwrap_or(0);
        // Surplus (the count went down): delete finished ones, unready first.
        if keep.len() > desired {
            let mut surplus: Vec<&&PrebuildRow> = keep.iter().filter(|p| p.done).collect();
            surplus.sort_by_key(|p| p.ready);
            let extra = keep.len() - desired;
            for p in surplus.into_iter().take(extra) {
                report.deleted += delete(state, p, "the preset wants fewer").await;
            }
        }
        metrics::gauge!("coderd_prebuilt_workspaces_desired", &labels).set(desired as f64);
        metrics::gauge!("coderd_prebuilt_workspaces_running", &labels).set(keep.len() as f64);
        metrics::gauge!("coderd_prebuilt_workspaces_eligible", &labels)
            .set(keep.iter().filter(|p| p.ready).count() as f64);
        let missing = desired.saturating_sub(keep.len());
        if missing == 0 {
            continue;
        }
        if let Some((count, Some(last))) = failures.get(&preset.preset_id)
            && let Ok(wait) = chrono::Duration::from_std(super::backoff(backoff, *count))
            && now < *last + wait
        {
            tracing::debug!(preset = %preset.preset_id, failures = count, "prebuilds: backing off");
            continue;
        }
        state
            .store
            .ensure_prebuilds_user(preset.organization_id)
            .await?;
        for _ in 0..missing {
            match create(state, preset).await {
                Ok(()) => {
                    report.created += 1;
                    metrics::counter!("coderd_prebuilt_workspaces_created_total", &labels)
                        .increment(1);
                }
                Err(e) => {
                    tracing::warn!(preset = %preset.preset_id, error = %e, "prebuilds: creating");
                    break;
                }
            }
        }
    }
    Ok(report)
}

/// The pool size the preset asks for at `now`: its schedules decide, or its own count.
fn desired_now(preset: &WantedPreset, now: chrono::DateTime<chrono::Utc>) -> i32 {
    let scheduling = preset
        .scheduling
        .as_ref()
        .and_then(|v| serde_json::from_value::<Scheduling>(v.clone()).ok());
    super::scheduling::desired_instances(preset.desired_instances, scheduling.as_ref(), now)
        .unwrap_or_else(|e| {
            tracing::warn!(preset = %preset.preset_id, error = %e,
                "prebuilds: unreadable scheduling, using the preset's instances");
            preset.desired_instances
        })
}

async fn create(state: &AppState, preset: &WantedPreset) -> Result<()> {
    let req = CreateWorkspaceRequest {
        template_version_id: Some(preset.template_version_id),
        name: prebuild_name(),
        template_version_preset_id: Some(preset.preset_id),
        ..CreateWorkspaceRequest::default()
    };
    let ws = builds::create_workspace(
        state,
        &subject(preset.organization_id),
        PREBUILDS_USER_ID,
        Some(preset.organization_id),
        &req,
    )
    .await?;
    tracing::info!(workspace = %ws.id, preset = %preset.preset_id, "prebuilds: created");
    Ok(())
}

/// Deletes a prebuild; 1 if its delete build was created.
async fn delete(state: &AppState, p: &PrebuildRow, why: &str) -> usize {
    let result: Result<()> = async {
        let ws = state.store.workspace_by_id(p.workspace_id, false).await?;
        let req = BuildRequest {
            expect_latest: Some(p.build_id),
            ..BuildRequest::new(Transition::Delete, BuildReason::Initiator)
        };
        builds::create_build(state, &subject(ws.organization_id), &ws, req).await?;
        Ok(())
    }
    .await;
    match result {
        Ok(()) => {
            tracing::info!(workspace = %p.workspace_id, why, "prebuilds: deleting");
            1
        }
        // Claimed or changed since it was read.
        Err(Error::Conflict { .. } | Error::NotFound) => 0,
        Err(e) => {
            tracing::warn!(workspace = %p.workspace_id, error = %e, "prebuilds: deleting");
            0
        }
    }
}
