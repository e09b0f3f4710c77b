//! The RBAC matrix: every role against every endpoint built so far, through the real API.
//! Each row names an endpoint and the status each role must get. Rows that change or delete a
//! user act on a fresh victim per role, so rows never depend on each other.

use codersdk::Client;
use codersdk::organizations::CreateOrganizationRequest;
use codersdk::users::{CreateUserRequest, LoginType};
use reqwest::Method;
use serde_json::{Value, json};
use testutil::{TestApp, unique};

/// Column order of the expectations.
const ROLES: [&str; 6] = [
    "owner",
    "user-admin",
    "template-admin",
    "auditor",
    "member",
    "org-admin",
];

/// What a row needs before its request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Setup {
    /// Just the victim user (always created).
    Victim,
    /// A fresh running workspace of the owner: `{ws}`, `{build}`, `{agent}`.
    Workspace,
    /// A file the caller uploaded: `{file}`.
    CallerFile,
    /// A fresh running workspace of the owner whose agent `main` is external
    /// (`coder_external_agent`): `{ws}`, `{build}`, `{agent}`.
    ExternalWorkspace,
    /// A fresh task of the owner, its first build done: `{task}`.
    Task,
}

struct Row {
    method: Method,
    /// `{victim}` becomes the victim's username; see [`Setup`] for the others, and `{template}`
    /// is the shared template's id
    /// (`{version}` its active version's).
    path: &'static str,
    body: Option<Value>,
    expect: [u16; 6],
    setup: Setup,
}

fn row(method: Method, path: &'static str, body: Option<Value>, expect: [u16; 6]) -> Row {
    Row {
        method,
        path,
        body,
        expect,
        setup: Setup::Victim,
    }
}

fn with(setup: Setup, r: Row) -> Row {
    Row { setup, ..r }
}

fn rows() -> Vec<Row> {
    use Method as M;
    vec![
        row(M::GET, "/api/v2/buildinfo", None, [200; 6]),
        row(M::GET, "/api/v2/users/me", None, [200; 6]),
        row(M::GET, "/api/v2/users", None, [200; 6]),
        row(M::GET, "/api/v2/users/roles", None, [200; 6]),
        row(M::GET, "/api/v2/users/first", None, [200; 6]),
        row(
            M::POST,
            "/api/v2/users",
            Some(
                json!({"email": "{victim}-new@example.com", "username": "{victim}-new", "login_type": "none"}),
            ),
            [201, 201, 403, 403, 403, 403],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}",
            None,
            [200, 200, 200, 200, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/roles",
            None,
            [200, 200, 200, 200, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/organizations",
            None,
            [200, 200, 200, 200, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/status/suspend",
            None,
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/status/activate",
            None,
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/roles",
            Some(json!({"roles": ["auditor"]})),
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/password",
            Some(json!({"password": "a brand new password"})),
            [204, 204, 403, 403, 404, 404],
        ),
        row(
            M::DELETE,
            "/api/v2/users/{victim}",
            None,
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/keys/tokens",
            None,
            [200, 404, 404, 404, 404, 404],
        ),
        row(
            M::POST,
            "/api/v2/users/{victim}/keys/tokens",
            Some(json!({"token_name": "t"})),
            [201, 403, 403, 403, 404, 404],
        ),
        row(
            M::POST,
            "/api/v2/users/{victim}/keys",
            None,
            [201, 403, 403, 403, 404, 404],
        ),
        // A user's own settings: theirs, and those who may update users.
        row(
            M::GET,
            "/api/v2/users/{victim}/appearance",
            None,
            [200, 200, 404, 404, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/appearance",
            Some(json!({"theme_preference": "dark"})),
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/profile",
            Some(json!({"username": "{victim}", "name": "Renamed"})),
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/login-type",
            None,
            [200, 200, 404, 404, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/keys/tokens/tokenconfig",
            None,
            [200, 200, 404, 404, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/autofill-parameters?template_id={template}",
            None,
            [200, 200, 404, 404, 404, 404],
        ),
        row(M::GET, "/api/v2/users/me/appearance", None, [200; 6]),
        // Git SSH keys: one's own, and those who may update users.
        row(
            M::GET,
            "/api/v2/users/{victim}/gitsshkey",
            None,
            [200, 200, 404, 404, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/gitsshkey",
            None,
            [200, 200, 404, 404, 404, 404],
        ),
        row(M::GET, "/api/v2/users/me/gitsshkey", None, [200; 6]),
        // External auth: everyone's own links; this deployment configures no provider.
        row(
            M::GET,
            "/api/v2/replicas",
            None,
            [200, 404, 404, 404, 404, 404],
        ),
        row(M::GET, "/api/v2/external-auth", None, [200; 6]),
        row(M::GET, "/api/v2/external-auth/github", None, [404; 6]),
        row(M::DELETE, "/api/v2/external-auth/github", None, [404; 6]),
        row(
            M::GET,
            "/api/v2/external-auth/github/device",
            None,
            [404; 6],
        ),
        row(
            M::GET,
            "/api/v2/templateversions/{version}/external-auth",
            None,
            [200; 6],
        ),
        // Only a workspace agent's token opens these.
        row(
            M::GET,
            "/api/v2/workspaceagents/me/external-auth?id=github",
            None,
            [401; 6],
        ),
        row(
            M::GET,
            "/api/v2/workspaceagents/me/gitsshkey",
            None,
            [401; 6],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/preferences",
            None,
            [200, 200, 404, 404, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/preferences",
            Some(json!({"task_notification_alert_dismissed": true})),
            [200, 200, 403, 403, 404, 404],
        ),
        // Only one's own, and only for those who signed in with OIDC (none of these did).
        row(M::GET, "/api/v2/users/oidc-claims", None, [400; 6]),
        row(
            M::GET,
            "/api/v2/users/{victim}/quiet-hours",
            None,
            [200, 200, 404, 404, 404, 404],
        ),
        row(M::GET, "/api/v2/users/me/quiet-hours", None, [200; 6]),
        // Everyone shares the deployment's quiet hours.
        row(
            M::PUT,
            "/api/v2/users/me/quiet-hours",
            Some(json!({"schedule": "CRON_TZ=UTC 0 2 * * *"})),
            [403; 6],
        ),
        // The health report and its dismissals: deployment administrators.
        row(
            M::GET,
            "/api/v2/debug/health",
            None,
            [200, 404, 404, 404, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/debug/health/settings",
            None,
            [200, 404, 404, 404, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/debug/health/settings",
            Some(json!({"dismissed_healthchecks": []})),
            [204, 404, 404, 404, 404, 404],
        ),
        // Insights: the deployment's for owners, templates' for who may change them.
        row(
            M::GET,
            "/api/v2/insights/daus",
            None,
            [200, 404, 404, 404, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/templates/{template}/daus",
            None,
            [200, 403, 200, 403, 403, 200],
        ),
        row(
            M::GET,
            "/api/v2/insights/user-activity?start_time=2026-01-01T00:00:00Z&end_time=2026-01-08T00:00:00Z",
            None,
            [200, 404, 200, 403, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/insights/user-latency?start_time=2026-01-01T00:00:00Z&end_time=2026-01-08T00:00:00Z",
            None,
            [200, 404, 200, 403, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/insights/templates?start_time=2026-01-01T00:00:00Z&end_time=2026-01-08T00:00:00Z&template_ids={template}",
            None,
            [200, 403, 200, 403, 403, 200],
        ),
        row(
            M::GET,
            "/api/v2/insights/user-status-counts",
            None,
            // Those who read every user.
            [200, 200, 200, 200, 403, 403],
        ),
        row(
            M::POST,
            "/api/v2/users/validate-password",
            Some(json!({"password": "a long enough password"})),
            [200; 6],
        ),
        // Deployment reads.
        row(
            M::GET,
            "/api/v2/deployment/config",
            None,
            [200, 404, 404, 404, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/deployment/stats",
            None,
            [200, 404, 404, 404, 404, 404],
        ),
        row(M::GET, "/api/v2/deployment/ssh", None, [200; 6]),
        row(M::GET, "/api/v2/experiments", None, [200; 6]),
        row(M::GET, "/api/v2/experiments/available", None, [200; 6]),
        row(M::GET, "/api/v2/updatecheck", None, [200; 6]),
        row(M::GET, "/api/v2/regions", None, [200; 6]),
        row(M::GET, "/api/v2/auth/scopes", None, [200; 6]),
        row(
            M::POST,
            "/api/v2/authcheck",
            Some(json!({"checks": {}})),
            [200; 6],
        ),
        row(M::POST, "/api/v2/csp/reports", Some(json!({})), [200; 6]),
        row(
            M::GET,
            "/api/v2/prebuilds/settings",
            None,
            [200, 404, 404, 404, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/prebuilds/settings",
            Some(json!({"reconciliation_paused": false})),
            [200, 404, 404, 404, 404, 404],
        ),
        // Starter templates: for those who may read or create templates in general (members
        // see templates only through access lists).
        row(
            M::GET,
            "/api/v2/templates/examples",
            None,
            [200, 404, 200, 200, 404, 200],
        ),
        row(
            M::GET,
            "/api/v2/organizations/coder/templates/examples",
            None,
            [200, 404, 200, 200, 404, 200],
        ),
        // Template versions after import: for those who may update the template; those who
        // only see it (its access list lets everyone use it) are refused.
        row(
            M::PATCH,
            "/api/v2/templateversions/{version}",
            Some(json!({"message": "edited"})),
            [200, 403, 200, 403, 403, 200],
        ),
        row(
            M::POST,
            "/api/v2/templateversions/{version}/archive",
            None,
            // The active version: those allowed are told it cannot be.
            [400, 403, 400, 403, 403, 400],
        ),
        row(
            M::POST,
            "/api/v2/templates/{template}/versions/archive",
            Some(json!({})),
            [200, 403, 200, 403, 403, 200],
        ),
        row(M::GET, "/api/v2/appearance", None, [200; 6]),
        row(M::GET, "/api/v2/applications/host", None, [200; 6]),
        row(
            M::PUT,
            "/api/v2/appearance",
            Some(json!({})),
            [200, 403, 403, 403, 403, 403],
        ),
        row(M::GET, "/api/v2/organizations", None, [200; 6]),
        row(M::GET, "/api/v2/organizations/coder", None, [200; 6]),
        row(
            M::GET,
            "/api/v2/organizations/coder/members",
            None,
            [200; 6],
        ),
        row(
            M::POST,
            "/api/v2/organizations",
            Some(json!({"name": "{victim}-org"})),
            [201, 403, 403, 403, 403, 403],
        ),
        row(
            M::GET,
            "/api/v2/organizations/other",
            None,
            [200, 200, 200, 200, 404, 404],
        ),
        row(
            M::POST,
            "/api/v2/organizations/other/members/{victim}",
            None,
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/organizations/coder/members/{victim}/roles",
            Some(json!({"roles": ["organization-auditor"]})),
            [200, 200, 403, 403, 403, 200],
        ),
        row(
            M::DELETE,
            "/api/v2/organizations/coder/members/{victim}",
            None,
            [204, 204, 403, 403, 403, 204],
        ),
        // Files, templates, versions.
        with(
            Setup::CallerFile,
            row(M::GET, "/api/v2/files/{file}", None, [200; 6]),
        ),
        row(M::GET, "/api/v2/templates", None, [200; 6]),
        row(
            M::GET,
            "/api/v2/organizations/coder/templates",
            None,
            [200; 6],
        ),
        row(M::GET, "/api/v2/templates/{template}", None, [200; 6]),
        // Groups and template access lists.
        row(M::GET, "/api/v2/organizations/coder/groups", None, [200; 6]),
        row(
            M::GET,
            "/api/v2/organizations/other/groups",
            None,
            [200, 200, 200, 404, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/organizations/coder/groups/Everyone",
            None,
            [200; 6],
        ),
        row(
            M::GET,
            "/api/v2/templates/{template}/acl",
            None,
            [200, 403, 200, 403, 403, 200],
        ),
        row(
            M::GET,
            "/api/v2/templates/{template}/acl/available",
            None,
            [200, 403, 200, 403, 403, 200],
        ),
        row(
            M::GET,
            "/api/v2/templates/{template}/versions",
            None,
            [200; 6],
        ),
        row(
            M::GET,
            "/api/v2/templateversions/{version}/presets",
            None,
            [200; 6],
        ),
        row(
            M::PATCH,
            "/api/v2/templates/{template}",
            Some(json!({"description": "changed"})),
            [200, 403, 200, 403, 403, 200],
        ),
        with(
            Setup::CallerFile,
            row(
                M::POST,
                "/api/v2/organizations/coder/templateversions",
                Some(json!({"file_id": "{file}", "provisioner": "echo", "storage_method": "file"})),
                [201, 403, 201, 403, 403, 201],
            ),
        ),
        // Workspaces and builds (a fresh workspace of the owner per request).
        row(M::GET, "/api/v2/workspaces", None, [200; 6]),
        row(
            M::POST,
            "/api/v2/users/me/workspaces",
            Some(json!({"template_id": "{template}", "name": "{victim}"})),
            [201; 6],
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspaces/{ws}",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspacebuilds/{build}",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspacebuilds/{build}/logs",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspacebuilds/{build}/state",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::PUT,
                "/api/v2/workspacebuilds/{build}/state",
                Some(json!({"state": "e30="})),
                [204, 404, 204, 404, 404, 204],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspaceagents/{agent}/connection",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspaces/{ws}/timings",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspacebuilds/{build}/timings",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspaceagents/{agent}/containers",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        // Recreating needs the right to connect; this agent has no dev container, so those who
        // may are told it is not found (tests/it/devcontainers.rs: one that exists gets 501).
        with(
            Setup::Workspace,
            row(
                M::POST,
                "/api/v2/workspaceagents/{agent}/containers/devcontainers/00000000-0000-4000-8000-000000000000/recreate",
                None,
                [404, 404, 403, 404, 404, 404],
            ),
        ),
        // An external agent's token is its identity: only who may connect to the workspace
        // gets it (the owner; an org admin, as for SSH). Coder hands it to whoever may read
        // the workspace; here a template admin, who may read but not connect, gets 403.
        with(
            Setup::ExternalWorkspace,
            row(
                M::GET,
                "/api/v2/workspaces/{ws}/external-agent/main/credentials",
                None,
                [200, 404, 403, 404, 404, 200],
            ),
        ),
        with(
            Setup::ExternalWorkspace,
            row(
                M::GET,
                "/api/v2/workspaces/{ws}/external-agent/nope/credentials",
                None,
                [404, 404, 403, 404, 404, 404],
            ),
        ),
        // A workspace without external agents has no credentials to hand out, to anyone.
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspaces/{ws}/external-agent/main/credentials",
                None,
                [404, 404, 403, 404, 404, 404],
            ),
        ),
        // The bootstrap script holds no secret: anyone signed in (or not) may fetch it.
        row(M::GET, "/api/v2/init-script/linux/amd64", None, [200; 6]),
        row(M::GET, "/api/v2/init-script/plan9/amd64", None, [400; 6]),
        // A user's secrets are theirs alone, for every role.
        row(M::GET, "/api/v2/users/me/secrets", None, [200; 6]),
        row(M::GET, "/api/v2/users/{victim}/secrets", None, [404; 6]),
        row(
            M::GET,
            "/api/v2/users/{victim}/secrets/anything",
            None,
            [404; 6],
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspaces/{ws}/port-share",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::POST,
                "/api/v2/workspaces/{ws}/builds",
                Some(json!({"transition": "stop"})),
                [201, 404, 403, 404, 404, 201],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::PUT,
                "/api/v2/workspaces/{ws}/autostart",
                Some(json!({"schedule": "CRON_TZ=Europe/Dublin 30 9 * * 1-5"})),
                [204, 404, 403, 404, 404, 204],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::PUT,
                "/api/v2/workspaces/{ws}/ttl",
                Some(json!({"ttl_ms": 3_600_000})),
                [204, 404, 403, 404, 404, 204],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::PUT,
                "/api/v2/workspaces/{ws}/extend",
                Some(json!({"deadline": "2099-01-01T00:00:00Z"})),
                [409, 404, 403, 404, 404, 409],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::PUT,
                "/api/v2/workspaces/{ws}/dormant",
                Some(json!({"dormant": true})),
                [200, 404, 403, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::PUT,
                "/api/v2/workspaces/{ws}/autoupdates",
                Some(json!({"automatic_updates": "always"})),
                [204, 404, 403, 404, 404, 204],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspaces/{ws}/watch",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::PATCH,
                "/api/v2/workspaces/{ws}",
                Some(json!({"name": "renamed"})),
                // Renames are off on this deployment: whoever may update hears so.
                [400, 404, 403, 404, 404, 400],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::PUT,
                "/api/v2/workspaces/{ws}/favorite",
                None,
                [204, 404, 403, 404, 404, 403],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::DELETE,
                "/api/v2/workspaces/{ws}/favorite",
                None,
                [204, 404, 403, 404, 404, 403],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::POST,
                "/api/v2/workspaces/{ws}/usage",
                None,
                [204, 404, 403, 404, 404, 204],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspaces/{ws}/resolve-autostart",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Workspace,
            row(
                M::GET,
                "/api/v2/workspaceagents/{agent}",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        // Tasks are workspaces: seen, deleted and reached by whoever may do so to the workspace.
        row(M::GET, "/api/v2/tasks", None, [200; 6]),
        row(
            M::POST,
            "/api/v2/tasks/me",
            Some(
                json!({"template_version_id": "{version}", "input": "fix it", "name": "{victim}"}),
            ),
            [201; 6],
        ),
        with(
            Setup::Task,
            row(
                M::GET,
                "/api/v2/tasks/owner/{task}",
                None,
                [200, 404, 200, 404, 404, 200],
            ),
        ),
        with(
            Setup::Task,
            row(
                M::POST,
                "/api/v2/tasks/owner/{task}/send",
                Some(json!({"input": "and more"})),
                // Reachers get the task's state (it is still starting); the others, as in
                // Coder, not found.
                [409, 404, 404, 404, 404, 409],
            ),
        ),
        with(
            Setup::Task,
            row(
                M::GET,
                "/api/v2/tasks/owner/{task}/logs",
                None,
                [200, 404, 404, 404, 404, 200],
            ),
        ),
        with(
            Setup::Task,
            row(
                M::DELETE,
                "/api/v2/tasks/owner/{task}",
                None,
                [202, 404, 403, 404, 404, 202],
            ),
        ),
        // Provisioners.
        row(
            M::GET,
            "/api/v2/organizations/coder/provisionerdaemons",
            None,
            [200; 6],
        ),
        row(
            M::GET,
            "/api/v2/organizations/coder/provisionerjobs",
            None,
            [200, 403, 200, 403, 403, 200],
        ),
        row(
            M::GET,
            "/api/v2/organizations/coder/provisionerkeys",
            None,
            [200, 403, 403, 403, 403, 200],
        ),
        row(
            M::POST,
            "/api/v2/organizations/coder/provisionerkeys",
            Some(json!({"name": "{victim}"})),
            [201, 403, 403, 403, 403, 201],
        ),
        // Site-wide readers only (organization auditors and admins are not served yet).
        row(
            M::GET,
            "/api/v2/audit",
            None,
            [200, 403, 403, 200, 403, 403],
        ),
        row(
            M::GET,
            "/api/v2/audit?q=action:login",
            None,
            [200, 403, 403, 200, 403, 403],
        ),
    ]
}

/// A template whose workspaces have one agent, imported by the built-in daemon; it declares an
/// AI task, so tasks can be made of it too.
fn agent_template() -> provisionerd::engines::echo::EchoTemplate {
    use codersdk::proto::{Agent, AgentAuth, Resource, TemplateFeatures};
    provisionerd::engines::echo::EchoTemplate {
        start: Some(provisionerd::engines::echo::BuildStage {
            features: Some(TemplateFeatures {
                has_ai_tasks: true,
                ..Default::default()
            }),
            resources: vec![Resource {
                name: "dev".into(),
                kind: "null_resource".into(),
                agents: vec![Agent {
                    name: "main".into(),
                    operating_system: "linux".into(),
                    architecture: "amd64".into(),
                    auth: AgentAuth::Token(uuid::Uuid::new_v4().to_string()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `agent_template` with its agent outside (`coder_external_agent`).
fn external_template() -> provisionerd::engines::echo::EchoTemplate {
    let mut template = agent_template();
    if let Some(start) = template.start.as_mut() {
        start.resources[0].kind = "coder_external_agent".into();
        start.features = Some(codersdk::proto::TemplateFeatures {
            has_external_agents: true,
            ..Default::default()
        });
    }
    template
}

/// Placeholder values for one request.
type Vars = Vec<(&'static str, String)>;

fn subst(s: &str, vars: &Vars) -> String {
    vars.iter().fold(s.to_string(), |s, (k, v)| s.replace(k, v))
}

fn fill(value: &Value, vars: &Vars) -> Value {
    match value {
        Value::String(s) => Value::String(subst(s, vars)),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, vars)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, vars)).collect()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn every_role_against_every_endpoint() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(&owner, "shared", &agent_template(), &[])
        .await?;
    let external = app
        .echo_template(&owner, "external", &external_template(), &[])
        .await?;
    owner
        .create_organization(&CreateOrganizationRequest {
            name: "other".into(),
            ..Default::default()
        })
        .await?;
    let mut callers: Vec<Client> = vec![owner.clone()];
    for (name, roles) in [
        ("useradmin", &["user-admin"][..]),
        ("templateadmin", &["template-admin"]),
        ("auditor", &["auditor"]),
        ("member", &[]),
        ("orgadmin", &[]),
    ] {
        callers.push(app.user(&owner, name, roles).await?.0);
    }
    owner
        .update_organization_member_roles("coder", "orgadmin", &["organization-admin".into()])
        .await?;

    let mut failures = Vec::new();
    for row in rows() {
        for (i, caller) in callers.iter().enumerate() {
            let victim = unique("victim");
            owner
                .create_user(&CreateUserRequest {
                    email: format!("{victim}@example.com"),
                    username: victim.clone(),
                    login_type: Some(LoginType::None),
                    ..Default::default()
                })
                .await?;
            let mut vars: Vars = vec![
                ("{victim}", victim.clone()),
                ("{template}", template.id.to_string()),
                ("{version}", template.active_version_id.to_string()),
            ];
            match row.setup {
                Setup::Victim => {}
                Setup::Workspace | Setup::ExternalWorkspace => {
                    let from = if row.setup == Setup::Workspace {
                        &template
                    } else {
                        &external
                    };
                    let ws = owner
                        .create_workspace(
                            "me",
                            &codersdk::workspaces::CreateWorkspaceRequest {
                                template_id: Some(from.id),
                                name: victim.clone(),
                                ..Default::default()
                            },
                        )
                        .await?;
                    let build = testutil::wait_build(&owner, ws.latest_build.id).await?;
                    vars.push(("{ws}", ws.id.to_string()));
                    vars.push(("{build}", build.id.to_string()));
                    vars.push(("{agent}", build.resources[0].agents[0].id.to_string()));
                }
                Setup::Task => {
                    let task = owner
                        .create_task(
                            "me",
                            &codersdk::tasks::CreateTaskRequest {
                                template_version_id: template.active_version_id,
                                input: "fix it".into(),
                                name: victim.clone(),
                                ..Default::default()
                            },
                        )
                        .await?;
                    let ws = owner
                        .workspace(task.workspace_id.unwrap_or_default())
                        .await?;
                    testutil::wait_build(&owner, ws.latest_build.id).await?;
                    vars.push(("{task}", task.id.to_string()));
                }
                Setup::CallerFile => {
                    let tar = provisionerd::engines::echo::archive_with_files(
                        &Default::default(),
                        &[("victim.txt", victim.as_bytes())],
                    );
                    vars.push(("{file}", caller.upload_tar(tar).await?.hash.to_string()));
                }
            }
            let path = subst(row.path, &vars);
            let mut req = caller.request(row.method.clone(), &path)?;
            if let Some(body) = &row.body {
                req = req.json(&fill(body, &vars));
            }
            let got = req.send().await?.status().as_u16();
            if got != row.expect[i] {
                failures.push(format!(
                    "{} {} as {}: expected {}, got {got}",
                    row.method, row.path, ROLES[i], row.expect[i]
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "RBAC mismatches:\n{}",
        failures.join("\n")
    );
    Ok(())
}

#[tokio::test]
async fn endpoints_need_a_session_except_the_public_ones() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    app.owner().await?;
    let anonymous = app.client();
    for path in ["/api/v2/buildinfo", "/api/v2/users/first", "/healthz"] {
        let status = anonymous.request(Method::GET, path)?.send().await?.status();
        assert_eq!(status, 200, "{path}");
    }
    for path in [
        "/api/v2/users",
        "/api/v2/users/me",
        "/api/v2/organizations",
        "/api/v2/users/roles",
        "/api/v2/tasks",
    ] {
        let status = anonymous.request(Method::GET, path)?.send().await?.status();
        assert_eq!(status, 401, "{path}");
    }
    // Nothing of coderd's may be framed by another site, answered or refused.
    for path in ["/api/v2/buildinfo", "/api/v2/users", "/healthz"] {
        let response = anonymous.request(Method::GET, path)?.send().await?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(header("x-frame-options").as_deref(), Some("DENY"), "{path}");
        assert_eq!(
            header("content-security-policy").as_deref(),
            Some("frame-ancestors 'none'"),
            "{path}"
        );
    }
    Ok(())
}
