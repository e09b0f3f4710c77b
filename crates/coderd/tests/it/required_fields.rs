//! Every object the API returns carries every field Coder's TypeScript types mark required
//! (no `?`), with the JSON kind Coder gives it. `data/required_fields.json` lists them, derived
//! from Coder v2.34's `site/src/api/typesGenerated.ts`: `types` holds each interface's required
//! fields and kinds, `refs` which fields hold another listed interface (walked too).
//!
//! One deployment with a running workspace (an agent with an app), then every read route that
//! returns one of those interfaces; all gaps are reported together.

use std::collections::BTreeMap;

use codersdk::proto::{
    Agent, AgentAuth, App, Preset, PresetParameter, Resource, RichParameter, RichParameterOption,
};
use codersdk::provisionerd::TemplateVariable;
use provisionerd::engines::echo::{BuildStage, EchoTemplate, ImportStage};
use reqwest::Method;
use serde_json::{Value, json};
use testutil::{TestApp, running_workspace};

struct Spec {
    types: BTreeMap<String, BTreeMap<String, String>>,
    refs: BTreeMap<String, BTreeMap<String, String>>,
}

fn spec() -> Spec {
    let raw: Value =
        serde_json::from_str(include_str!("data/required_fields.json")).expect("the spec parses");
    let table = |key: &str| -> BTreeMap<String, BTreeMap<String, String>> {
        serde_json::from_value(raw[key].clone()).expect("a table of tables of strings")
    };
    Spec {
        types: table("types"),
        refs: table("refs"),
    }
}

fn kind_matches(kind: &str, value: &Value) -> bool {
    kind.split('|').any(|k| match k {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        "any" => true,
        _ => false,
    })
}

impl Spec {
    /// Checks `value` as the interface `ty`, recording each gap under `at`.
    fn check(&self, ty: &str, value: &Value, at: &str, gaps: &mut Vec<String>) {
        let Some(fields) = self.types.get(ty) else {
            gaps.push(format!("{at}: the spec has no interface {ty}"));
            return;
        };
        let Some(object) = value.as_object() else {
            gaps.push(format!("{at}: expected a {ty} object, got {value}"));
            return;
        };
        for (field, kind) in fields {
            match object.get(field) {
                None => gaps.push(format!("{at}: {ty}.{field} ({kind}) is missing")),
                Some(v) if !kind_matches(kind, v) => {
                    gaps.push(format!("{at}: {ty}.{field} should be {kind}, is {v}"))
                }
                Some(_) => {}
            }
        }
        for (field, nested) in self.refs.get(ty).into_iter().flatten() {
            match object.get(field) {
                Some(Value::Array(items)) => {
                    for (i, item) in items.iter().enumerate() {
                        self.check(nested, item, &format!("{at}.{field}[{i}]"), gaps);
                    }
                }
                Some(v @ Value::Object(_)) => self.check(nested, v, &format!("{at}.{field}"), gaps),
                _ => {}
            }
        }
    }
}

fn template() -> EchoTemplate {
    EchoTemplate {
        import: Some(ImportStage {
            rich_parameters: vec![RichParameter {
                name: "region".into(),
                kind: "string".into(),
                default_value: "eu".into(),
                mutable: true,
                options: vec![RichParameterOption {
                    name: "Europe".into(),
                    value: "eu".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            variables: vec![TemplateVariable {
                name: "size".into(),
                kind: "string".into(),
                default_value: "small".into(),
                ..Default::default()
            }],
            presets: vec![Preset {
                name: "Europe".into(),
                parameters: vec![PresetParameter {
                    name: "region".into(),
                    value: "eu".into(),
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        start: Some(BuildStage {
            resources: vec![Resource {
                name: "dev".into(),
                kind: "null_resource".into(),
                agents: vec![Agent {
                    name: "main".into(),
                    operating_system: "linux".into(),
                    architecture: "amd64".into(),
                    auth: AgentAuth::Token(uuid::Uuid::new_v4().to_string()),
                    apps: vec![App {
                        slug: "web".into(),
                        display_name: "Web".into(),
                        url: "http://localhost:8080".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `(method, path, body, interface)`; an interface in brackets is an array of it, which must
/// hold something unless a `?` follows (lists this deployment has no rows for).
type Route = (Method, String, Option<Value>, &'static str);

#[tokio::test]
async fn every_response_carries_every_required_field() -> anyhow::Result<()> {
    let spec = spec();
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(&owner, "fields", &template(), &[])
        .await?;
    let ws = running_workspace(&owner, template.id, "fields").await?;
    let build = ws.latest_build.clone();
    let agent = build.resources[0].agents[0].id;
    owner
        .create_token(
            "me",
            &codersdk::apikeys::CreateTokenRequest {
                token_name: "fields".into(),
                ..Default::default()
            },
        )
        .await?;
    let version = template.active_version_id;
    let (t, w, b, v) = (template.id, ws.id, build.id, version);
    let now = chrono::Utc::now();
    let range = format!(
        "start_time={}T00:00:00Z&end_time={}",
        now.format("%Y-%m-%d"),
        (now + chrono::Duration::hours(1)).format("%Y-%m-%dT%H:00:00Z")
    );

    let get = |path: String, ty: &'static str| -> Route { (Method::GET, path, None, ty) };
    let routes: Vec<Route> = vec![
        get("/api/v2/buildinfo".into(), "BuildInfoResponse"),
        get("/api/v2/appearance".into(), "AppearanceConfig"),
        get("/api/v2/users/authmethods".into(), "AuthMethods"),
        get("/api/v2/users/me".into(), "User"),
        get("/api/v2/users".into(), "GetUsersResponse"),
        get("/api/v2/users/roles".into(), "[AssignableRoles]"),
        get(
            "/api/v2/users/me/appearance".into(),
            "UserAppearanceSettings",
        ),
        get("/api/v2/users/me/login-type".into(), "UserLoginType"),
        get(
            "/api/v2/users/me/keys/tokens/tokenconfig".into(),
            "TokenConfig",
        ),
        get("/api/v2/users/me/keys/tokens".into(), "[APIKeyWithOwner]"),
        get(
            format!("/api/v2/users/me/autofill-parameters?template_id={t}"),
            "[UserParameter]",
        ),
        (
            Method::POST,
            "/api/v2/users/validate-password".into(),
            Some(json!({"password": "short"})),
            "ValidateUserPasswordResponse",
        ),
        get("/api/v2/organizations".into(), "[Organization]"),
        get(
            "/api/v2/organizations/default/members".into(),
            "[OrganizationMemberWithUserData]",
        ),
        get("/api/v2/organizations/default/groups".into(), "[Group]"),
        get(
            "/api/v2/organizations/default/provisionerdaemons".into(),
            "[ProvisionerDaemon]",
        ),
        get(
            "/api/v2/organizations/default/provisionerjobs".into(),
            "[ProvisionerJob]",
        ),
        get("/api/v2/templates".into(), "[Template]"),
        get(format!("/api/v2/templates/{t}"), "Template"),
        get(
            format!("/api/v2/templates/{t}/versions"),
            "[TemplateVersion]",
        ),
        get("/api/v2/templates/examples".into(), "[TemplateExample]"),
        get(format!("/api/v2/templateversions/{v}"), "TemplateVersion"),
        get(
            format!("/api/v2/templateversions/{v}/rich-parameters"),
            "[TemplateVersionParameter]",
        ),
        get(
            format!("/api/v2/templateversions/{v}/variables"),
            "[TemplateVersionVariable]",
        ),
        get(format!("/api/v2/templateversions/{v}/presets"), "[Preset]"),
        get(
            format!("/api/v2/templateversions/{v}/logs"),
            "[ProvisionerJobLog]",
        ),
        get("/api/v2/workspaces".into(), "WorkspacesResponse"),
        get(format!("/api/v2/workspaces/{w}"), "Workspace"),
        get(
            format!("/api/v2/workspaces/{w}/timings"),
            "WorkspaceBuildTimings",
        ),
        get(
            format!("/api/v2/workspaces/{w}/port-share"),
            "WorkspaceAgentPortShares",
        ),
        get(format!("/api/v2/workspacebuilds/{b}"), "WorkspaceBuild"),
        get(
            format!("/api/v2/workspacebuilds/{b}/resources"),
            "[WorkspaceResource]",
        ),
        get(
            format!("/api/v2/workspacebuilds/{b}/parameters"),
            "[WorkspaceBuildParameter]",
        ),
        get(
            format!("/api/v2/workspacebuilds/{b}/timings"),
            "WorkspaceBuildTimings",
        ),
        get(format!("/api/v2/workspaceagents/{agent}"), "WorkspaceAgent"),
        get(
            format!("/api/v2/workspaceagents/{agent}/logs"),
            "[WorkspaceAgentLog]?",
        ),
        get("/api/v2/audit?limit=5".into(), "AuditLogResponse"),
        get("/api/v2/deployment/ssh".into(), "SSHConfigResponse"),
        get("/api/v2/deployment/stats".into(), "DeploymentStats"),
        get("/api/v2/updatecheck".into(), "UpdateCheckResponse"),
        get("/api/v2/regions".into(), "RegionsResponse"),
        get("/api/v2/auth/scopes".into(), "ExternalAPIKeyScopes"),
        get("/api/v2/prebuilds/settings".into(), "PrebuildsSettings"),
        get(
            "/api/v2/users/me/quiet-hours".into(),
            "UserQuietHoursScheduleResponse",
        ),
        get("/api/v2/insights/daus".into(), "DAUsResponse"),
        get(format!("/api/v2/templates/{t}/daus"), "DAUsResponse"),
        get(
            format!("/api/v2/insights/user-activity?{range}"),
            "UserActivityInsightsResponse",
        ),
        get(
            format!("/api/v2/insights/user-latency?{range}"),
            "UserLatencyInsightsResponse",
        ),
        get(
            format!("/api/v2/insights/templates?{range}&interval=day"),
            "TemplateInsightsResponse",
        ),
        get(
            "/api/v2/insights/user-status-counts".into(),
            "GetUserStatusCountsResponse",
        ),
        get("/api/v2/debug/health".into(), "HealthcheckReport"),
        get("/api/v2/debug/health/settings".into(), "HealthSettings"),
    ];

    let mut gaps = Vec::new();
    for (method, path, body, ty) in routes {
        let mut request = owner.request(method.clone(), &path)?;
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status();
        let value: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            gaps.push(format!("{method} {path}: {status} {value}"));
            continue;
        }
        let at = format!("{method} {path}");
        let (ty, may_be_empty) = match ty.strip_suffix('?') {
            Some(ty) => (ty, true),
            None => (ty, false),
        };
        match ty.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(item) => match value.as_array() {
                Some(items) if items.is_empty() && !may_be_empty => {
                    gaps.push(format!("{at}: nothing to check"))
                }
                Some(items) => {
                    for (i, v) in items.iter().enumerate() {
                        spec.check(item, v, &format!("{at}[{i}]"), &mut gaps);
                    }
                }
                None => gaps.push(format!("{at}: expected an array of {item}, got {value}")),
            },
            None => spec.check(ty, &value, &at, &mut gaps),
        }
    }
    assert!(
        gaps.is_empty(),
        "{} gaps against Coder's types:\n{}",
        gaps.len(),
        gaps.join("\n")
    );
    Ok(())
}
