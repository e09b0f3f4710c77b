//! A template version's presets: recorded at import, listed in Coder's shape, applied to the
//! builds that name them.

use codersdk::ClientError;
use codersdk::organizations::CreateOrganizationRequest;
use codersdk::proto::{Prebuild, Preset, PresetParameter, RichParameter};
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, WorkspaceBuildParameter,
};
use provisionerd::engines::echo::{EchoTemplate, ImportStage};
use testutil::{TestApp, wait_build};
use uuid::Uuid;

fn param(name: &str, default: &str) -> RichParameter {
    RichParameter {
        name: name.into(),
        kind: "string".into(),
        default_value: default.into(),
        mutable: true,
        ..Default::default()
    }
}

fn value(name: &str, value: &str) -> WorkspaceBuildParameter {
    WorkspaceBuildParameter {
        name: name.into(),
        value: value.into(),
    }
}

fn template() -> EchoTemplate {
    EchoTemplate {
        import: Some(ImportStage {
            rich_parameters: vec![param("cpu", "2"), param("region", "eu")],
            presets: vec![
                Preset {
                    name: "big".into(),
                    parameters: vec![PresetParameter {
                        name: "cpu".into(),
                        value: "16".into(),
                    }],
                    prebuild: Some(Prebuild {
                        instances: 2,
                        ..Default::default()
                    }),
                    default: true,
                    description: "sixteen cores".into(),
                    icon: "/icon/big.svg".into(),
                },
                Preset {
                    name: "small".into(),
                    parameters: vec![PresetParameter {
                        name: "cpu".into(),
                        value: "1".into(),
                    }],
                    ..Default::default()
                },
            ],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn presets_are_listed_in_coders_shape_and_applied_to_builds() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let t = app
        .echo_template(&owner, "presets", &template(), &[])
        .await?;

    // Coder's Preset has no JSON tags: the keys are the Go field names.
    let raw: serde_json::Value = member
        .get(&format!(
            "/api/v2/templateversions/{}/presets",
            t.active_version_id
        ))
        .await?;
    let big = raw
        .as_array()
        .and_then(|a| a.iter().find(|p| p["Name"] == "big"))
        .cloned()
        .expect("the big preset is listed");
    assert!(
        big["ID"]
            .as_str()
            .is_some_and(|s| s.parse::<Uuid>().is_ok())
    );
    assert_eq!(
        big["Parameters"],
        serde_json::json!([{"Name": "cpu", "Value": "16"}])
    );
    assert_eq!(
        (
            &big["Default"],
            &big["DesiredPrebuildInstances"],
            &big["Description"],
            &big["Icon"]
        ),
        (
            &serde_json::json!(true),
            &serde_json::json!(2),
            &serde_json::json!("sixteen cores"),
            &serde_json::json!("/icon/big.svg")
        )
    );
    let presets = member.template_version_presets(t.active_version_id).await?;
    assert_eq!(presets.len(), 2);
    let small = presets.iter().find(|p| p.name == "small").expect("small");
    assert_eq!(small.desired_prebuild_instances, None, "no prebuilds block");
    let big_id = presets.iter().find(|p| p.name == "big").expect("big").id;

    // The preset's values are the build's; the others still come from the request.
    let ws = member
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(t.id),
                name: "dev".into(),
                rich_parameter_values: vec![value("region", "us")],
                template_version_preset_id: Some(big_id),
                ..Default::default()
            },
        )
        .await?;
    let build = wait_build(&member, ws.latest_build.id).await?;
    assert_eq!(build.template_version_preset_id, Some(big_id));
    let params = member.workspace_build_parameters(build.id).await?;
    assert!(params.contains(&value("cpu", "16")), "{params:?}");
    assert!(params.contains(&value("region", "us")), "{params:?}");

    // A different value for a preset's parameter is refused, on create and on a build.
    let refused = member
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(t.id),
                name: "dev2".into(),
                rich_parameter_values: vec![value("cpu", "4")],
                template_version_preset_id: Some(big_id),
                ..Default::default()
            },
        )
        .await
        .expect_err("the preset's value cannot be overridden");
    assert_eq!(status(&refused), 400);
    assert!(
        refused.to_string().contains("rich_parameter_values.cpu"),
        "{refused}"
    );
    let refused = member
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "start".into(),
                rich_parameter_values: vec![value("cpu", "4")],
                template_version_preset_id: Some(big_id),
                ..Default::default()
            },
        )
        .await
        .expect_err("the preset's value cannot be overridden");
    assert_eq!(status(&refused), 400);
    // A preset of no version of this template is refused by name.
    let refused = member
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(t.id),
                name: "dev3".into(),
                template_version_preset_id: Some(Uuid::new_v4()),
                ..Default::default()
            },
        )
        .await
        .expect_err("no such preset");
    assert_eq!(status(&refused), 400);
    assert!(
        refused.to_string().contains("template_version_preset_id"),
        "{refused}"
    );
    // Nothing was written by the refusals.
    assert_eq!(member.workspace_builds(ws.id).await?.len(), 1);

    // A version the caller may not see, or none at all, is not found.
    owner
        .create_organization(&CreateOrganizationRequest {
            name: "other".into(),
            ..Default::default()
        })
        .await?;
    let hidden = app.echo_version(&owner, "other", &template(), &[]).await?;
    for id in [hidden.id, Uuid::new_v4()] {
        let e = member
            .template_version_presets(id)
            .await
            .expect_err("not found");
        assert_eq!(status(&e), 404, "{e}");
    }
    Ok(())
}
