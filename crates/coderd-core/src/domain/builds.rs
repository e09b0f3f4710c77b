//! Creating workspaces and builds, and cancelling builds — the one builder every front door uses
//! (the role Coder's `wsbuilder` plays): the JSON API, the dashboard's forms, the lifecycle
//! executor and `coder ssh`'s auto-start.
//!
//! A build is decided in this order, and each step's refusal is final: the subject may act on
//! the workspace (404 when it may not see it), the version to run (asked for, else the previous
//! build's, else the template's active one; it must belong to the template and be imported), the
//! parameter values (validated against that version, see [`super::parameters`]), then one
//! statement writes the build, its job (with the version's tags, owner filled in) and the
//! posting — refused when a build is still active — and the dispatcher is told after it commits.

use codersdk::ValidationError;
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::provisionerd::{PrebuiltWorkspaceBuildStage, Tags, Transition};
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::workspaces::{CreateWorkspaceRequest, WorkspaceBuildParameter};
use uuid::Uuid;

use super::render::job_status;
use super::{Error, Result, jobs, parameters, presets};
use crate::audit::{self, Entry};
use crate::provisioners::dispatch::Reserved;
use crate::provisioners::tags;
use crate::state::AppState;
use crate::validate;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};
use coderd_schedule::Schedule;
use coderd_store::{
    self as store, BuildRow, JobRow, NewAuditLog, NewBuild, NewJob, NewWorkspace,
    TemplateVersionRow, WorkspaceRow, day_bits,
};

/// Why a build runs (Coder's `build_reason`), stored with it and shown as its `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuildReason {
    /// Someone asked, through the API without naming a reason.
    Initiator,
    /// The lifecycle executor: the autostart schedule came due.
    Autostart,
    /// The lifecycle executor: the workspace reached its deadline.
    Autostop,
    /// The lifecycle executor: the workspace went unused past the template's dormancy threshold.
    Dormancy,
    /// The lifecycle executor: a failed build is stopped after the template's failure TTL.
    FailedStop,
    /// The lifecycle executor: a dormant workspace is deleted after the template's TTL.
    Autodelete,
    /// A person, from the dashboard.
    Dashboard,
    /// A person, from the CLI.
    Cli,
    /// `coder ssh` (or a config-ssh connection) starting a stopped workspace.
    SshConnection,
    /// VS Code's Coder extension starting a stopped workspace.
    VscodeConnection,
    /// JetBrains' Coder plugin starting a stopped workspace.
    JetbrainsConnection,
}

impl BuildReason {
    pub const ALL: [Self; 11] = [
        Self::Initiator,
        Self::Autostart,
        Self::Autostop,
        Self::Dormancy,
        Self::FailedStop,
        Self::Autodelete,
        Self::Dashboard,
        Self::Cli,
        Self::SshConnection,
        Self::VscodeConnection,
        Self::JetbrainsConnection,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Initiator => "initiator",
            Self::Autostart => "autostart",
            Self::Autostop => "autostop",
            Self::Dormancy => "dormancy",
            Self::FailedStop => "failedstop",
            Self::Autodelete => "autodelete",
            Self::Dashboard => "dashboard",
            Self::Cli => "cli",
            Self::SshConnection => "ssh_connection",
            Self::VscodeConnection => "vscode_connection",
            Self::JetbrainsConnection => "jetbrains_connection",
        }
    }

    /// Whether a client may name this reason in a build request; the lifecycle reasons are
    /// coderd's own, so a build claiming one always came from its executor.
    pub const fn requestable(self) -> bool {
        matches!(
            self,
            Self::Dashboard
                | Self::Cli
                | Self::SshConnection
                | Self::VscodeConnection
                | Self::JetbrainsConnection
        )
    }
}

impl std::str::FromStr for BuildReason {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown build reason {s:?}"))
    }
}

impl std::fmt::Display for BuildReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which template version a build runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VersionChoice {
    /// The previous build's (the template's active version for a first build).
    #[default]
    Previous,
    /// The template's active version (an autostart of a workspace that updates automatically).
    Active,
    /// This one; it must belong to the workspace's template and be imported.
    Exact(Uuid),
}

/// A build to create on an existing workspace.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    pub transition: Transition,
    pub version: VersionChoice,
    /// Values asked for; the others come from the previous build or the defaults.
    pub parameters: Vec<WorkspaceBuildParameter>,
    /// Delete the workspace without destroying its resources: the delete starts from no state.
    pub orphan: bool,
    /// Start from this Terraform state instead of the previous build's (`coder state push`).
    pub state: Option<Vec<u8>>,
    pub reason: BuildReason,
    /// Create the build only if this is still the workspace's latest build (checked under the
    /// workspace's row lock): the lifecycle executor decides from what it read, and a build
    /// another replica created since then makes its decision stale.
    pub expect_latest: Option<Uuid>,
    /// A preset of the build's version whose parameter values the build takes.
    pub preset: Option<Uuid>,
    /// The build hands a prebuilt workspace to its claimant: the provisioner keeps the running
    /// agents' tokens.
    pub prebuild_claim: bool,
}

impl BuildRequest {
    pub fn new(transition: Transition, reason: BuildReason) -> Self {
        Self {
            transition,
            version: VersionChoice::Previous,
            parameters: Vec::new(),
            orphan: false,
            state: None,
            reason,
            expect_latest: None,
            preset: None,
            prebuild_claim: false,
        }
    }
}

fn workspace_object(row: &WorkspaceRow) -> Object {
    Object::owned(Resource::Workspace, Some(row.organization_id), row.owner_id)
}

/// Who a build records as its initiator: the person acting, or — for coderd's own builds — the
/// workspace's owner, as Coder does.
fn initiator(subject: &Subject, owner: Uuid) -> Uuid {
    if subject.is_system() {
        owner
    } else {
        subject.user_id
    }
}

/// A version a workspace is created with, and its import job (whose provisioner, file and tags
/// the build runs with), checked as [`checked_version`] does.
async fn build_version(
    state: &AppState,
    template_id: Uuid,
    id: Uuid,
) -> Result<(TemplateVersionRow, JobRow)> {
    let version = match state.store.template_version_by_id(id).await {
        Ok(version) => version,
        Err(store::Error::NotFound) => return checked_version(id, None, template_id),
        Err(other) => return Err(other.into()),
    };
    let job = state.store.job_by_id(version.job_id).await?;
    checked_version(id, Some((version, job)), template_id)
}

/// The version `id` (`found`, with its import job, if it exists) may be built: it belongs to
/// `template_id` and was imported successfully.
fn checked_version(
    id: Uuid,
    found: Option<(TemplateVersionRow, JobRow)>,
    template_id: Uuid,
) -> Result<(TemplateVersionRow, JobRow)> {
    let Some((version, job)) = found else {
        return Err(Error::bad_request("Template version does not exist.")
            .with_detail(format!("no template version {id}")));
    };
    if version.template_id != Some(template_id) {
        return Err(Error::bad_request(
            "The template version does not belong to the workspace's template.",
        ));
    }
    let status = job_status(&job);
    if status != ProvisionerJobStatus::Succeeded {
        return Err(
            Error::bad_request("The template version has not been imported successfully.")
                .with_detail(
                    job.error
                        .unwrap_or_else(|| format!("its import is {}", status.as_str())),
                ),
        );
    }
    Ok((version, job))
}

/// The job of a build: the version's provisioner and file, its tags re-normalised for the
/// workspace owner (a user-scoped template builds on the owner's daemons). A claim says so in
/// the job's input, as Coder's does, for the payload the daemon receives.
fn build_job(
    (org, owner): (Uuid, Uuid),
    import: JobRow,
    build_id: Uuid,
    initiator: Uuid,
    prebuild_claim: bool,
) -> NewJob {
    let version_tags: Tags = serde_json::from_value(import.tags).unwrap_or_default();
    let job_tags = tags::normalize(version_tags, Some(owner));
    NewJob {
        id: Uuid::new_v4(),
        organization_id: org,
        initiator_id: initiator,
        provisioner: import.provisioner,
        file_id: import.file_id,
        job_type: "workspace_build",
        input: if prebuild_claim {
            serde_json::json!({
                "workspace_build_id": build_id,
                "prebuilt_workspace_build_stage": PrebuiltWorkspaceBuildStage::Claim,
            })
        } else {
            serde_json::json!({ "workspace_build_id": build_id })
        },
        tags_key: tags::key(&job_tags),
        tags: serde_json::to_value(&job_tags).unwrap_or_default(),
    }
}

/// The entry of a build: its transition as the action, by whoever asked (none for the
/// lifecycle executor), with the reason and the workspace in `additional_fields`.
fn build_audit(subject: &Subject, build: &NewBuild, workspace: &str, org: Uuid) -> NewAuditLog {
    let action = match build.transition.parse() {
        Ok(Transition::Stop) => AuditAction::Stop,
        Ok(Transition::Delete) => AuditAction::Delete,
        _ => AuditAction::Start,
    };
    Entry::new(
        audit::actor(subject),
        ResourceType::WorkspaceBuild,
        build.id,
        workspace,
        action,
    )
    .org(org)
    .status(201)
    .diff(None, Some(build))
    .field("build_reason", build.reason.clone())
    .field("workspace_name", workspace)
    .field("workspace_id", build.workspace_id.to_string())
    .build()
}

/// Creates the next build of `workspace`; the job is posted to the provisioners when the
/// build commits. A subject that may not see the workspace gets [`Error::NotFound`]; one that
/// may see but not change it [`Error::Forbidden`]; a build still active (or created meanwhile)
/// [`Error::Conflict`].
pub async fn create_build(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
    req: BuildRequest,
) -> Result<BuildRow> {
    Ok(create_build_and_job(state, subject, workspace, req)
        .await?
        .0)
}

/// [`create_build`], also returning the build's job as written: the API renders the new build
/// from these rows instead of reading them back.
pub async fn create_build_and_job(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
    req: BuildRequest,
) -> Result<(BuildRow, JobRow)> {
    let action = match req.transition {
        Transition::Start | Transition::Stop => Action::Update,
        Transition::Delete => Action::Delete,
    };
    authz::authorize(subject, action, &workspace_object(workspace))?;
    // Hand-made state decides what terraform destroys or keeps: as orphaning, template
    // managers only.
    if req.state.is_some() {
        let template = Object::in_org(Resource::Template, workspace.organization_id);
        if !subject.can(Action::Update, &template) {
            return Err(Error::forbidden(
                "Only template managers may push a workspace's Terraform state.",
            ));
        }
    }
    if req.orphan {
        if req.transition != Transition::Delete {
            return Err(Error::bad_request(
                "Orphan is only permitted when deleting a workspace.",
            ));
        }
        // Forgetting resources without destroying them can leak what they cost and hold:
        // only those who manage the template may.
        let template = Object::in_org(Resource::Template, workspace.organization_id);
        if !subject.can(Action::Update, &template) {
            return Err(Error::forbidden(
                "Only template managers may orphan a workspace's resources.",
            ));
        }
    }
    let mut choice = req.version;
    if req.transition == Transition::Start {
        if workspace.dormant_at.is_some() {
            return Err(Error::forbidden(
                "The workspace is dormant: make it active again (PUT \
                 /api/v2/workspaces/{id}/dormant with {\"dormant\": false}) before starting it.",
            ));
        }
        choice = required_version(subject, workspace, choice)?;
    }
    // The store picks the version: the asked-for one, else (for `Previous`) the latest build's,
    // else the template's active one.
    let (exact, previous) = match choice {
        VersionChoice::Exact(id) => (Some(id), false),
        VersionChoice::Previous => (None, true),
        VersionChoice::Active => (None, false),
    };
    let inputs = state
        .store
        .build_inputs(
            workspace.id,
            exact,
            previous,
            workspace.template_active_version_id,
        )
        .await?;
    let (version, import) =
        checked_version(inputs.version_id, inputs.version, workspace.template_id)?;
    let previous_values = inputs.previous_values;
    let declared = parameters::declared(&version);
    let requested = match req.preset {
        Some(id) => {
            let preset = presets::of_build(state, version.id, id).await?;
            presets::apply(&preset, &declared, &req.parameters)?
        }
        None => req.parameters.clone(),
    };
    let values =
        parameters::resolve(&declared, &previous_values, &requested).map_err(Error::Validation)?;
    let build_id = Uuid::new_v4();
    let initiator = initiator(subject, workspace.owner_id);
    let job = build_job(
        (workspace.organization_id, workspace.owner_id),
        import,
        build_id,
        initiator,
        req.prebuild_claim,
    );
    let build = NewBuild {
        id: build_id,
        workspace_id: workspace.id,
        template_version_id: version.id,
        transition: req.transition.as_str().into(),
        initiator_id: initiator,
        reason: req.reason.as_str().into(),
        parameters: values,
        orphan: req.orphan,
        state: req.state,
        expect_latest: req.expect_latest,
        preset_id: req.preset,
        job,
    };
    let log = build_audit(subject, &build, &workspace.name, workspace.organization_id);
    let reserved = reserve_daemon(state, &build.job);
    let created = state
        .store
        .create_build(
            &build,
            Some(&log),
            reserved.as_ref().and_then(|r| r.claimant()).as_ref(),
        )
        .await?;
    let Some((row, job)) = created else {
        if req.expect_latest.is_some() {
            return Err(Error::conflict(
                "The workspace changed since it was examined: another build came first.",
            ));
        }
        return Err(Error::conflict("A workspace build is already active.")
            .with_detail("wait for it to finish or cancel it before starting another"));
    };
    jobs::dispatch_created(state, &job, reserved).await;
    tracing::info!(
        workspace = %workspace.id,
        build = %row.id,
        transition = req.transition.as_str(),
        reason = req.reason.as_str(),
        "build created"
    );
    Ok((row, job))
}

/// The version a start must use when the template requires its active version: those who
/// manage the template may start any version; everyone else gets the active one when they do
/// not name one, and a refusal when they name another.
fn required_version(
    subject: &Subject,
    workspace: &WorkspaceRow,
    choice: VersionChoice,
) -> Result<VersionChoice> {
    let manager = subject.can(
        Action::Update,
        &Object::in_org(Resource::Template, workspace.organization_id),
    );
    if !workspace.template_require_active_version || manager {
        return Ok(choice);
    }
    match choice {
        VersionChoice::Exact(id) if id != workspace.template_active_version_id => {
            Err(Error::forbidden(format!(
                "The template requires workspaces to run its active version ({}): update the \
                 workspace (coder update) instead, or ask a template admin.",
                workspace.template_active_version_id
            )))
        }
        VersionChoice::Exact(_) | VersionChoice::Active | VersionChoice::Previous => {
            Ok(VersionChoice::Active)
        }
    }
}

fn invalid(field: &str, detail: impl Into<String>) -> ValidationError {
    ValidationError {
        field: field.into(),
        detail: detail.into(),
    }
}

/// Creates a workspace for `owner` and its first build (a start), in one transaction; the job
/// is posted when it commits. `organization`, when the front door named one, must be the
/// template's. A template the subject may not see is reported as absent (400: it is named in
/// the body, not the path).
pub async fn create_workspace(
    state: &AppState,
    subject: &Subject,
    owner: Uuid,
    organization: Option<Uuid>,
    req: &CreateWorkspaceRequest,
) -> Result<WorkspaceRow> {
    create_workspace_for(state, subject, owner, organization, req, None).await
}

/// [`create_workspace`] for a Coder Task: the task is written in the workspace's transaction.
/// A task never takes a prebuilt workspace: its first build must run with the task's prompt.
pub async fn create_task_workspace(
    state: &AppState,
    subject: &Subject,
    owner: Uuid,
    req: &CreateWorkspaceRequest,
    task: &store::NewTask,
) -> Result<WorkspaceRow> {
    create_workspace_for(state, subject, owner, None, req, Some(task)).await
}

async fn create_workspace_for(
    state: &AppState,
    subject: &Subject,
    owner: Uuid,
    organization: Option<Uuid>,
    req: &CreateWorkspaceRequest,
    task: Option<&store::NewTask>,
) -> Result<WorkspaceRow> {
    let mut invalids = Vec::new();
    if let Err(detail) = validate::name(&req.name) {
        invalids.push(invalid("name", detail));
    }
    if req.ttl_ms.unwrap_or(0) < 0 {
        invalids.push(invalid("ttl_ms", "must not be negative"));
    }
    let schedule = match req
        .autostart_schedule
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        Some(raw) => match Schedule::weekly(raw) {
            Ok(schedule) => Some((raw.to_string(), schedule)),
            Err(e) => {
                invalids.push(invalid("autostart_schedule", e.to_string()));
                None
            }
        },
        None => None,
    };
    if req.template_id.is_none() && req.template_version_id.is_none() {
        invalids.push(invalid(
            "template_id",
            "a template_id or template_version_id is required",
        ));
    }
    if !invalids.is_empty() {
        return Err(Error::Validation(invalids));
    }
    let template_id = match (req.template_id, req.template_version_id) {
        (Some(id), _) => id,
        (None, Some(version)) => state
            .store
            .template_version_by_id(version)
            .await
            .map_err(|_| Error::bad_request("Template version does not exist."))?
            .template_id
            .ok_or_else(|| {
                Error::bad_request("The template version does not belong to a template.")
            })?,
        (None, None) => return Err(Error::bad_request("A template is required.")),
    };
    let absent = || {
        Error::bad_request("Template does not exist.")
            .with_detail(format!("no template {template_id}"))
    };
    let template = state
        .store
        .template_by_id(template_id)
        .await
        .map_err(|e| match e {
            store::Error::NotFound => absent(),
            other => other.into(),
        })?;
    if organization.is_some_and(|org| org != template.organization_id) {
        return Err(Error::bad_request(
            "The template belongs to another organization.",
        ));
    }
    let template_object =
        super::resolve::template_guard(state, template.id, template.organization_id).await?;
    if !subject.can(Action::Read, &template_object) {
        return Err(absent());
    }
    authz::authorize(subject, Action::Use, &template_object)?;
    authz::authorize(
        subject,
        Action::Create,
        &Object::owned(Resource::Workspace, Some(template.organization_id), owner),
    )?;
    let (version, import) = build_version(
        state,
        template.id,
        req.template_version_id
            .unwrap_or(template.active_version_id),
    )
    .await?;
    let declared = parameters::declared(&version);
    let preset = match req.template_version_preset_id {
        Some(id) => Some(presets::of_build(state, version.id, id).await?),
        None => None,
    };
    let requested = match &preset {
        Some(preset) => presets::apply(preset, &declared, &req.rich_parameter_values)?,
        None => req.rich_parameter_values.clone(),
    };
    let values = parameters::resolve(&declared, &[], &requested).map_err(Error::Validation)?;
    // Everything a build would refuse has been checked: a ready prebuild may be taken instead.
    if let Some(preset) = preset.as_ref().filter(|_| task.is_none()) {
        let claim = super::prebuild_claim::ClaimRequest {
            owner,
            name: &req.name,
            version: version.id,
            preset: preset.id,
            preset_name: &preset.name,
            parameters: &req.rich_parameter_values,
        };
        if let Some(claimed) = super::prebuild_claim::claim(state, subject, claim).await? {
            return Ok(claimed);
        }
    }
    let workspace_id = Uuid::new_v4();
    let build_id = Uuid::new_v4();
    let initiator = initiator(subject, owner);
    let job = build_job(
        (template.organization_id, owner),
        import,
        build_id,
        initiator,
        false,
    );
    let workspace = NewWorkspace {
        id: workspace_id,
        owner_id: owner,
        organization_id: template.organization_id,
        template_id: template.id,
        name: req.name.clone(),
        // A template that does not let users schedule starts, or choose when they stop,
        // decides for them.
        next_start_at: schedule
            .as_ref()
            .filter(|_| template.allow_user_autostart)
            .and_then(|(_, s)| {
                s.next_allowed_after(
                    state.options.clock.now(),
                    day_bits(template.autostart_allowed_days),
                )
            }),
        autostart_schedule: schedule
            .filter(|_| template.allow_user_autostart)
            .map(|(raw, _)| raw),
        ttl_ms: req
            .ttl_ms
            .filter(|_| template.allow_user_autostop)
            .or(Some(template.default_ttl_ms))
            .filter(|t| *t > 0),
        automatic_updates: req
            .automatic_updates
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "never".into()),
    };
    let build = NewBuild {
        id: build_id,
        workspace_id,
        template_version_id: version.id,
        transition: Transition::Start.as_str().into(),
        initiator_id: initiator,
        reason: BuildReason::Initiator.as_str().into(),
        parameters: values,
        orphan: false,
        state: None,
        expect_latest: None,
        preset_id: req.template_version_preset_id,
        job,
    };
    let org = template.organization_id;
    let logs = [
        Entry::new(
            audit::actor(subject),
            ResourceType::Workspace,
            workspace_id,
            &req.name,
            AuditAction::Create,
        )
        .org(org)
        .diff(None, Some(&workspace))
        .build(),
        build_audit(subject, &build, &req.name, org),
    ];
    let reserved = reserve_daemon(state, &build.job);
    let (row, _, job) = state
        .store
        .create_workspace(
            &workspace,
            &build,
            task,
            &logs,
            reserved.as_ref().and_then(|r| r.claimant()).as_ref(),
        )
        .await
        .map_err(|e| match e {
            store::Error::Conflict { .. } => Error::conflict(format!(
                "Workspace {:?} already exists for this user.",
                req.name
            )),
            other => other.into(),
        })?;
    jobs::dispatch_created(state, &job, reserved).await;
    Ok(row)
}

/// An idle daemon here for `job` to be claimed for by its insert, saving the daemon a claim
/// statement and its commit (see `Dispatcher::reserve`).
fn reserve_daemon(state: &AppState, job: &NewJob) -> Option<Reserved> {
    state
        .dispatcher
        .reserve(job.organization_id, &job.provisioner, &job.tags_key)
}

/// Cancels a build's job: a pending one at once, a running one through its daemon. Allowed to
/// those who may change the workspace, when its template lets users cancel or they manage the
/// template. A finished job answers [`Error::BadRequest`].
pub async fn cancel_build(
    state: &AppState,
    subject: &Subject,
    build: &BuildRow,
    workspace: &WorkspaceRow,
) -> Result<()> {
    authz::authorize(subject, Action::Update, &workspace_object(workspace))?;
    let template_admin = subject.can(
        Action::Update,
        &Object::in_org(Resource::Template, workspace.organization_id),
    );
    if !workspace.template_allow_user_cancel_workspace_jobs && !template_admin {
        return Err(Error::forbidden(
            "The template does not allow users to cancel builds.",
        ));
    }
    match state.store.cancel_job(build.job_id).await? {
        Some(_) => Ok(()),
        None => Err(Error::bad_request("Job has already completed.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_round_trip_and_only_client_reasons_are_requestable() {
        for reason in BuildReason::ALL {
            assert_eq!(reason.as_str().parse::<BuildReason>(), Ok(reason));
        }
        let requestable: Vec<&str> = BuildReason::ALL
            .into_iter()
            .filter(|r| r.requestable())
            .map(BuildReason::as_str)
            .collect();
        // What requests are validated against and the OpenAPI document lists.
        assert_eq!(requestable, validate::BUILD_REASONS);
        assert!(
            "autostop"
                .parse::<BuildReason>()
                .is_ok_and(|r| !r.requestable())
        );
        assert!("bogus".parse::<BuildReason>().is_err());
    }

    #[test]
    fn coderd_builds_are_initiated_by_the_owner() {
        let owner = Uuid::new_v4();
        let person = Uuid::new_v4();
        let user = Subject {
            user_id: person,
            site_roles: Vec::new(),
            orgs: Default::default(),
            groups: Vec::new(),
        };
        assert_eq!(initiator(&user, owner), person);
        assert_eq!(initiator(&Subject::system(), owner), owner);
    }
}
