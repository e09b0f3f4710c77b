//! Coder operations added for parity, through the real API: deployment reads, the dashboard's
//! permission checks, template versions after import (rename, archive, the one before),
//! starter templates, zip archives, a workspace's timings and a deleted workspace's 410.

use codersdk::templates::CreateTemplateVersionRequest;
use provisionerd::engines::echo::{EchoTemplate, ImportStage};
use reqwest::Method;
use serde_json::json;
use testutil::{TestApp, running_workspace, wait_build};

use crate::support::{region_template, send};

#[tokio::test]
async fn deployment_reads_and_permission_checks() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, member_user) = app.user(&owner, "member", &[]).await?;
    let template = app
        .echo_template(&owner, "dev", &region_template(), &[])
        .await?;
    let ws = running_workspace(&member, template.id, "mine").await?;

    let (status, ssh) = send(&member, Method::GET, "/api/v2/deployment/ssh", None).await?;
    assert_eq!(status, 200);
    assert_eq!(ssh["hostname_prefix"], "coder.");
    assert_eq!(ssh["hostname_suffix"], "coder");

    let (status, stats) = send(&owner, Method::GET, "/api/v2/deployment/stats", None).await?;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["workspaces"]["running"], 1, "{stats}");
    let (status, _) = send(&member, Method::GET, "/api/v2/deployment/stats", None).await?;
    assert!(status == 403 || status == 404, "{status}");

    let (status, config) = send(&owner, Method::GET, "/api/v2/deployment/config", None).await?;
    assert_eq!(status, 200);
    assert!(config["options"].as_array().is_some_and(|o| !o.is_empty()));
    let (status, _) = send(&member, Method::GET, "/api/v2/deployment/config", None).await?;
    assert!(status == 403 || status == 404, "{status}");

    let (_, experiments) = send(&member, Method::GET, "/api/v2/experiments", None).await?;
    assert_eq!(experiments, json!([]));
    let (_, regions) = send(&member, Method::GET, "/api/v2/regions", None).await?;
    assert_eq!(regions["regions"][0]["name"], "primary");
    let anonymous = app.client();
    let (status, update) = send(&anonymous, Method::GET, "/api/v2/updatecheck", None).await?;
    assert_eq!((status, update["current"].as_bool()), (200, Some(true)));
    let (status, report) = send(
        &anonymous,
        Method::POST,
        "/api/v2/csp/reports",
        Some(json!({"csp-report": {"blocked-uri": "https://evil.example"}})),
    )
    .await?;
    assert_eq!((status, report), (200, json!("ok")));
    let bad = anonymous
        .request(Method::POST, "/api/v2/csp/reports")?
        .body("{not json")
        .send()
        .await?;
    assert_eq!(bad.status(), 400);

    // The dashboard's checks, answered by the same engine that guards the routes.
    let checks = json!({"checks": {
        "create_template": {"object": {"resource_type": "template", "any_org": true}, "action": "create"},
        "read_own_workspace": {"object": {"resource_type": "workspace", "resource_id": ws.id}, "action": "read"},
        "ssh_own_workspace": {"object": {"resource_type": "workspace", "owner_id": "me",
                                          "organization_id": ws.organization_id}, "action": "ssh"},
        "read_deployment": {"object": {"resource_type": "deployment_config"}, "action": "read"},
        "licenses": {"object": {"resource_type": "license"}, "action": "read"},
        "ghost": {"object": {"resource_type": "workspace", "resource_id": uuid::Uuid::new_v4()}, "action": "read"}
    }});
    let (status, mine) = send(
        &member,
        Method::POST,
        "/api/v2/authcheck",
        Some(checks.clone()),
    )
    .await?;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(
        mine,
        json!({"create_template": false, "read_own_workspace": true, "ssh_own_workspace": true,
               "read_deployment": false, "licenses": false, "ghost": false})
    );
    let (_, owners) = send(&owner, Method::POST, "/api/v2/authcheck", Some(checks)).await?;
    assert_eq!(owners["create_template"], true);
    assert_eq!(owners["read_deployment"], true);
    assert_eq!(
        owners["read_own_workspace"], true,
        "owners read every workspace"
    );
    let (status, refused) = send(
        &member,
        Method::POST,
        "/api/v2/authcheck",
        Some(json!({"checks": {"x": {"object": {"resource_type": "workspace"}, "action": "fly"}}})),
    )
    .await?;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["validations"][0]["field"], "checks.x.action");

    // The member's earlier value comes back for the next workspace.
    let (status, autofill) = send(
        &member,
        Method::GET,
        &format!(
            "/api/v2/users/me/autofill-parameters?template_id={}",
            template.id
        ),
        None,
    )
    .await?;
    assert_eq!(status, 200);
    assert_eq!(autofill, json!([{"name": "region", "value": "eu"}]));
    let (status, _) = send(
        &member,
        Method::GET,
        "/api/v2/users/me/autofill-parameters",
        None,
    )
    .await?;
    assert_eq!(status, 400);
    let (status, _) = send(
        &owner,
        Method::GET,
        &format!(
            "/api/v2/users/{}/autofill-parameters?template_id={}",
            member_user.username, template.id
        ),
        None,
    )
    .await?;
    assert_eq!(status, 200, "an owner may look on a member's behalf");

    // Prebuild reconciliation can be paused, by owners only.
    let (status, paused) = send(
        &owner,
        Method::PUT,
        "/api/v2/prebuilds/settings",
        Some(json!({"reconciliation_paused": true})),
    )
    .await?;
    assert_eq!(
        (status, paused["reconciliation_paused"].as_bool()),
        (200, Some(true))
    );
    let (status, _) = send(
        &member,
        Method::PUT,
        "/api/v2/prebuilds/settings",
        Some(json!({"reconciliation_paused": false})),
    )
    .await?;
    assert!(status == 403 || status == 404, "{status}");
    let (_, still) = send(&owner, Method::GET, "/api/v2/prebuilds/settings", None).await?;
    assert_eq!(still["reconciliation_paused"], true);
    Ok(())
}

#[tokio::test]
async fn template_versions_after_import() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(&owner, "dev", &region_template(), &[])
        .await?;
    let first = owner.template_version(template.active_version_id).await?;
    let second = app
        .echo_version_of(
            &owner,
            "default",
            Some(template.id),
            &region_template(),
            &[],
        )
        .await?;
    testutil::wait_job(|| async { Ok(owner.template_version(second.id).await?.job) }).await?;

    let (status, renamed) = send(
        &owner,
        Method::PATCH,
        &format!("/api/v2/templateversions/{}", second.id),
        Some(json!({"name": "v2", "message": "the second"})),
    )
    .await?;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(
        (renamed["name"].as_str(), renamed["message"].as_str()),
        (Some("v2"), Some("the second"))
    );
    let (status, taken) = send(
        &owner,
        Method::PATCH,
        &format!("/api/v2/templateversions/{}", second.id),
        Some(json!({"name": first.name})),
    )
    .await?;
    assert_eq!(status, 400, "{taken}");
    assert_eq!(taken["validations"][0]["field"], "name");
    let (status, _) = send(
        &owner,
        Method::PATCH,
        &format!("/api/v2/templateversions/{}", second.id),
        Some(json!({"name": "not a valid name!"})),
    )
    .await?;
    assert_eq!(status, 400);
    assert_eq!(
        owner.template_version(second.id).await?.name,
        "v2",
        "refusals changed nothing"
    );

    let by_name = "/api/v2/organizations/default/templates/dev/versions/v2";
    let (status, found) = send(&owner, Method::GET, by_name, None).await?;
    assert_eq!(
        (status, found["id"].as_str()),
        (200, Some(second.id.to_string().as_str()))
    );
    let (status, previous) =
        send(&owner, Method::GET, &format!("{by_name}/previous"), None).await?;
    assert_eq!(
        (status, previous["id"].as_str()),
        (200, Some(first.id.to_string().as_str()))
    );
    let (status, _) = send(
        &owner,
        Method::GET,
        &format!(
            "/api/v2/organizations/default/templates/dev/versions/{}/previous",
            first.name
        ),
        None,
    )
    .await?;
    assert_eq!(status, 404, "the first version has none before it");

    // The active version stays usable; others can be archived and restored.
    let active = format!("/api/v2/templateversions/{}/archive", first.id);
    let (status, refused) = send(&owner, Method::POST, &active, None).await?;
    assert_eq!(status, 400, "{refused}");
    assert!(!owner.template_version(first.id).await?.archived);
    let archive = format!("/api/v2/templateversions/{}/archive", second.id);
    let (status, _) = send(&owner, Method::POST, &archive, None).await?;
    assert_eq!(status, 200);
    assert!(owner.template_version(second.id).await?.archived);
    let (status, _) = send(&owner, Method::POST, &archive, None).await?;
    assert_eq!(status, 400, "already archived");
    let (status, promote) = send(
        &owner,
        Method::PATCH,
        &format!("/api/v2/templates/{}/versions", template.id),
        Some(json!({"id": second.id})),
    )
    .await?;
    assert_eq!(
        status, 400,
        "an archived version cannot be promoted: {promote}"
    );
    let (status, _) = send(
        &owner,
        Method::POST,
        &format!("/api/v2/templateversions/{}/unarchive", second.id),
        None,
    )
    .await?;
    assert_eq!(status, 200);

    // Bulk: only failed imports unless all; never the active one.
    let failing = EchoTemplate {
        import: Some(ImportStage {
            error: Some(provisionerd::engines::echo::EchoError {
                message: "boom".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let failed = app
        .echo_version_of(&owner, "default", Some(template.id), &failing, &[])
        .await?;
    testutil::wait_job(|| async { Ok(owner.template_version(failed.id).await?.job) }).await?;
    let bulk = format!("/api/v2/templates/{}/versions/archive", template.id);
    let (status, archived) = send(&owner, Method::POST, &bulk, Some(json!({}))).await?;
    assert_eq!(status, 200, "{archived}");
    assert_eq!(archived["archived_ids"], json!([failed.id]));
    let (_, all) = send(&owner, Method::POST, &bulk, Some(json!({"all": true}))).await?;
    assert_eq!(all["archived_ids"], json!([second.id]));
    assert!(!owner.template_version(first.id).await?.archived);
    Ok(())
}

#[tokio::test]
async fn starter_templates_and_zip_archives() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;

    let (status, examples) = send(&owner, Method::GET, "/api/v2/templates/examples", None).await?;
    assert_eq!(status, 200, "{examples}");
    let ids: Vec<&str> = examples
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"local-process") && ids.contains(&"docker"),
        "{ids:?}"
    );
    let (status, _) = send(&member, Method::GET, "/api/v2/templates/examples", None).await?;
    assert_eq!(status, 404, "members create no templates");

    // A version straight from a starter template: its files are the example's.
    let version = owner
        .create_template_version(
            "default",
            &CreateTemplateVersionRequest {
                example_id: "local-process".into(),
                provisioner: "terraform".into(),
                ..Default::default()
            },
        )
        .await?;
    let tar = owner.download_file(version.job.file_id).await?;
    let mut names = Vec::new();
    for entry in tar::Archive::new(tar.as_slice()).entries()? {
        names.push(entry?.path()?.display().to_string());
    }
    assert!(names.contains(&"main.tf".to_string()), "{names:?}");
    let (status, refused) = send(
        &owner,
        Method::POST,
        "/api/v2/organizations/default/templateversions",
        Some(json!({"example_id": "nope", "provisioner": "terraform"})),
    )
    .await?;
    assert_eq!(status, 400);
    assert_eq!(refused["validations"][0]["field"], "example_id");

    // The same archive as zip, and a zip upload stored as tar.
    let response = owner
        .request(
            Method::GET,
            &format!("/api/v2/files/{}?format=zip", version.job.file_id),
        )?
        .send()
        .await?;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/zip");
    let zip = response.bytes().await?.to_vec();
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip.clone()))?;
    assert!(archive.by_name("main.tf").is_ok());
    let uploaded: codersdk::files::UploadResponse = owner
        .request(Method::POST, "/api/v2/files")?
        .header("content-type", "application/zip")
        .body(zip)
        .send()
        .await?
        .json()
        .await?;
    let back = owner.download_file(uploaded.hash).await?;
    let mut names_back = Vec::new();
    for entry in tar::Archive::new(back.as_slice()).entries()? {
        names_back.push(entry?.path()?.display().to_string());
    }
    assert_eq!(names_back, names);
    let (status, _) = send(
        &owner,
        Method::GET,
        &format!("/api/v2/files/{}?format=rar", version.job.file_id),
        None,
    )
    .await?;
    assert_eq!(status, 400);
    Ok(())
}

#[tokio::test]
async fn timings_and_deleted_workspaces() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(&owner, "dev", &region_template(), &[])
        .await?;
    let ws = running_workspace(&owner, template.id, "gone").await?;
    let (status, timings) = send(
        &owner,
        Method::GET,
        &format!("/api/v2/workspaces/{}/timings", ws.id),
        None,
    )
    .await?;
    assert_eq!(status, 200, "{timings}");
    assert!(timings["provisioner_timings"].is_array());
    let agent = ws.latest_build.resources[0].agents[0].id;
    let (status, connection) = send(
        &owner,
        Method::GET,
        &format!("/api/v2/workspaceagents/{agent}/connection"),
        None,
    )
    .await?;
    assert_eq!(status, 200);
    assert_eq!(
        connection["disable_direct_connections"], true,
        "everything rides the relay"
    );
    assert_eq!(connection["hostname_suffix"], "coder");
    let (status, logs) = send(
        &owner,
        Method::GET,
        &format!("/api/v2/workspaceagents/{agent}/startup-logs"),
        None,
    )
    .await?;
    assert_eq!(
        (status, logs.is_array()),
        (200, true),
        "Coder's older name for the logs"
    );

    let build = owner
        .create_workspace_build(
            ws.id,
            &codersdk::workspaces::CreateWorkspaceBuildRequest {
                transition: "delete".into(),
                ..Default::default()
            },
        )
        .await?;
    wait_build(&owner, build.id).await?;
    let (status, gone) = send(
        &owner,
        Method::GET,
        &format!("/api/v2/workspaces/{}", ws.id),
        None,
    )
    .await?;
    assert_eq!(status, 410, "{gone}");
    let (status, _) = send(
        &owner,
        Method::GET,
        &format!("/api/v2/workspaces/{}?include_deleted=true", ws.id),
        None,
    )
    .await?;
    assert_eq!(status, 200);
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let (status, _) = send(
        &member,
        Method::GET,
        &format!("/api/v2/workspaces/{}", ws.id),
        None,
    )
    .await?;
    assert_eq!(
        status, 404,
        "who could not see it learns nothing of its deletion"
    );
    Ok(())
}

#[tokio::test]
async fn health_report_in_coders_shape_with_dismissals() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;

    let (status, report) = send(&owner, Method::GET, "/api/v2/debug/health", None).await?;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["database"]["reachable"], true);
    assert_eq!(report["access_url"]["status_code"], 200, "{report}");
    assert_eq!(
        report["websocket"]["code"], 101,
        "the probe upgraded: {report}"
    );
    assert_eq!(report["websocket"]["severity"], "ok");
    assert!(
        report["provisioner_daemons"]["items"]
            .as_array()
            .is_some_and(|items| !items.is_empty()),
        "{report}"
    );
    let (status, _) = send(&member, Method::GET, "/api/v2/debug/health", None).await?;
    assert!(status == 403 || status == 404, "{status}");
    let (status, _) = send(
        &owner,
        Method::GET,
        "/api/v2/debug/health?format=html",
        None,
    )
    .await?;
    assert_eq!(status, 400);

    let dismiss = json!({"dismissed_healthchecks": ["ProvisionerDaemons"]});
    let (status, saved) = send(
        &owner,
        Method::PUT,
        "/api/v2/debug/health/settings",
        Some(dismiss.clone()),
    )
    .await?;
    assert_eq!((status, saved), (200, dismiss.clone()));
    let (status, _) = send(
        &owner,
        Method::PUT,
        "/api/v2/debug/health/settings",
        Some(dismiss.clone()),
    )
    .await?;
    assert_eq!(status, 204, "nothing changed");
    let (status, refused) = send(
        &owner,
        Method::PUT,
        "/api/v2/debug/health/settings",
        Some(json!({"dismissed_healthchecks": ["Everything"]})),
    )
    .await?;
    assert_eq!(status, 400, "{refused}");
    let (status, _) = send(
        &member,
        Method::PUT,
        "/api/v2/debug/health/settings",
        Some(json!({"dismissed_healthchecks": []})),
    )
    .await?;
    assert!(status == 403 || status == 404, "{status}");
    let (_, settings) = send(&owner, Method::GET, "/api/v2/debug/health/settings", None).await?;
    assert_eq!(settings, dismiss, "refusals changed nothing");
    let (_, report) = send(&owner, Method::GET, "/api/v2/debug/health", None).await?;
    assert_eq!(report["provisioner_daemons"]["dismissed"], true);
    Ok(())
}
