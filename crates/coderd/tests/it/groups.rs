//! Groups and template access lists through the real API: Coder's shapes, the Everyone group,
//! validation in Coder's error shape, 404s across organizations, and a template restricted to a
//! group invisible (list, get, create workspace) to everyone else.

use codersdk::groups::{
    CreateGroupRequest, GroupSource, PatchGroupRequest, TemplateRole, UpdateTemplateACL,
};
use codersdk::organizations::CreateOrganizationRequest;
use codersdk::workspaces::CreateWorkspaceRequest;
use codersdk::{Client, ClientError};
use testutil::TestApp;

/// The status and the fields named by a refusal.
fn refusal<T: std::fmt::Debug>(result: Result<T, ClientError>) -> (u16, Vec<String>) {
    match result {
        Err(ClientError::Api { status, response }) => (
            status,
            response.validations.into_iter().map(|v| v.field).collect(),
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn create(name: &str) -> CreateGroupRequest {
    CreateGroupRequest {
        name: name.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn groups_have_coders_shape_and_rules() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (alice_client, alice) = app.user(&owner, "alice", &[]).await?;
    let (_, bob) = app.user(&owner, "bob", &[]).await?;
    let org = owner.organization("coder").await?;

    // The Everyone group: the organization's id, all its members, listed first.
    let groups = owner.groups_by_organization("coder").await?;
    assert_eq!(groups.len(), 1);
    let everyone = &groups[0];
    assert!(everyone.is_everyone() && everyone.id == org.id);
    assert_eq!(everyone.name, "Everyone");
    assert_eq!(everyone.total_member_count, 3);
    assert_eq!(everyone.organization_name, "coder");
    assert_eq!(everyone.source, GroupSource::User);

    let devs = owner
        .create_group(
            "coder",
            &CreateGroupRequest {
                name: "devs".into(),
                display_name: "Developers".into(),
                avatar_url: "/emojis/1f4bb.png".into(),
                quota_allowance: 3,
            },
        )
        .await?;
    assert_eq!(
        (
            devs.name.as_str(),
            devs.display_name.as_str(),
            devs.quota_allowance
        ),
        ("devs", "Developers", 3)
    );
    assert!(devs.members.is_empty() && devs.organization_id == org.id);
    assert_eq!(
        refusal(owner.create_group("coder", &create("DEVS")).await),
        (409, vec![])
    );
    for bad in ["Everyone", "no spaces", "new", ""] {
        assert_eq!(
            refusal(owner.create_group("coder", &create(bad)).await),
            (400, vec!["name".to_string()]),
            "{bad:?}"
        );
    }

    let devs = owner
        .patch_group(
            devs.id,
            &PatchGroupRequest {
                add_users: vec![alice.id.to_string(), bob.id.to_string()],
                display_name: Some("Devs".into()),
                ..Default::default()
            },
        )
        .await?;
    let names: Vec<&str> = devs.members.iter().map(|m| m.username.as_str()).collect();
    assert_eq!(names, ["alice", "bob"]);
    assert_eq!(
        (devs.total_member_count, devs.display_name.as_str()),
        (2, "Devs")
    );
    let devs = owner
        .patch_group(
            devs.id,
            &PatchGroupRequest {
                remove_users: vec![bob.id.to_string()],
                name: "developers".into(),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(devs.members.len(), 1);
    let by_name = owner.group_by_org_and_name("coder", "developers").await?;
    assert_eq!(by_name, devs);
    assert_eq!(owner.group(devs.id).await?, devs);

    // Only the organization's members can join; ids must be ids.
    let (_, carol) = app.user(&owner, "carol", &[]).await?;
    owner.remove_organization_member("coder", "carol").await?;
    for (users, field) in [
        (vec![carol.id.to_string()], "add_users"),
        (vec!["not-an-id".to_string()], "add_users"),
    ] {
        let patch = PatchGroupRequest {
            add_users: users,
            ..Default::default()
        };
        assert_eq!(
            refusal(owner.patch_group(devs.id, &patch).await),
            (400, vec![field.to_string()])
        );
    }
    // Leaving the organization means leaving its groups.
    owner.remove_organization_member("coder", "alice").await?;
    assert!(owner.group(devs.id).await?.members.is_empty());
    owner
        .add_organization_member("coder", &alice.id.to_string())
        .await?;

    // The Everyone group keeps its name and members and cannot go.
    let join_everyone = PatchGroupRequest {
        add_users: vec![bob.id.to_string()],
        ..Default::default()
    };
    assert_eq!(
        refusal(owner.patch_group(org.id, &join_everyone).await).0,
        400
    );
    let rename = PatchGroupRequest {
        name: "All".into(),
        ..Default::default()
    };
    assert_eq!(refusal(owner.patch_group(org.id, &rename).await).0, 400);
    assert_eq!(refusal(owner.delete_group(org.id).await).0, 400);

    // Members read their organization's groups but change none of them.
    assert_eq!(alice_client.groups_by_organization("coder").await?.len(), 2);
    assert_eq!(
        refusal(alice_client.create_group("coder", &create("mine")).await).0,
        403
    );
    assert_eq!(
        refusal(alice_client.patch_group(devs.id, &rename).await).0,
        403
    );
    assert_eq!(refusal(alice_client.delete_group(devs.id).await).0, 403);

    // Another organization's groups do not exist for them.
    let other = owner
        .create_organization(&CreateOrganizationRequest {
            name: "other".into(),
            ..Default::default()
        })
        .await?;
    let theirs = owner.create_group("other", &create("devs")).await?;
    assert_eq!(
        theirs.organization_id, other.id,
        "names are per organization"
    );
    assert_eq!(
        refusal(alice_client.groups_by_organization("other").await).0,
        404
    );
    assert_eq!(refusal(alice_client.group(theirs.id).await).0, 404);
    assert_eq!(refusal(alice_client.group(other.id).await).0, 404);
    assert_eq!(
        refusal(alice_client.group_by_org_and_name("other", "devs").await).0,
        404
    );
    assert_eq!(
        refusal(alice_client.patch_group(theirs.id, &rename).await).0,
        404
    );
    assert_eq!(refusal(alice_client.delete_group(theirs.id).await).0, 404);

    owner.delete_group(devs.id).await?;
    assert_eq!(refusal(owner.group(devs.id).await).0, 404);
    assert_eq!(refusal(owner.delete_group(devs.id).await).0, 404);
    Ok(())
}

async fn workspace(client: &Client, template: uuid::Uuid, name: &str) -> Result<(), ClientError> {
    client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template),
                name: name.into(),
                ..Default::default()
            },
        )
        .await
        .map(drop)
}

#[tokio::test]
async fn a_template_restricted_to_a_group_is_invisible_to_others() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(&owner, "secret", &Default::default(), &[])
        .await?;
    let (alice, alice_user) = app.user(&owner, "alice", &[]).await?;
    let (bob, bob_user) = app.user(&owner, "bob", &[]).await?;
    let (template_admin, _) = app.user(&owner, "tadmin", &["template-admin"]).await?;
    let org = owner.organization("coder").await?;

    // New templates: the Everyone group may use them, so every member sees them.
    let acl = owner.template_acl(template.id).await?;
    assert!(acl.users.is_empty());
    assert_eq!(acl.groups.len(), 1);
    assert!(acl.groups[0].group.is_everyone() && acl.groups[0].role == TemplateRole::Use);
    assert_eq!(bob.all_templates().await?.len(), 1);

    let devs = owner.create_group("coder", &create("devs")).await?;
    owner
        .patch_group(
            devs.id,
            &PatchGroupRequest {
                add_users: vec![alice_user.id.to_string()],
                ..Default::default()
            },
        )
        .await?;
    let restrict = UpdateTemplateACL {
        group_perms: [
            (org.id.to_string(), TemplateRole::Deleted),
            (devs.id.to_string(), TemplateRole::Use),
        ]
        .into(),
        ..Default::default()
    };
    let done = owner.update_template_acl(template.id, &restrict).await?;
    assert_eq!(done.message, "Successfully updated template ACL list.");
    let acl = owner.template_acl(template.id).await?;
    let listed: Vec<(&str, TemplateRole)> = acl
        .groups
        .iter()
        .map(|g| (g.group.name.as_str(), g.role))
        .collect();
    assert_eq!(listed, [("devs", TemplateRole::Use)]);

    // Bob is not in the group: the template does not exist for him.
    assert!(bob.all_templates().await?.is_empty());
    assert!(bob.templates("coder").await?.is_empty());
    assert_eq!(refusal(bob.template(template.id).await).0, 404);
    assert_eq!(
        refusal(bob.template_by_name("coder", "secret").await).0,
        404
    );
    assert_eq!(refusal(workspace(&bob, template.id, "nope").await).0, 400);
    assert_eq!(refusal(bob.template_acl(template.id).await).0, 404);
    assert_eq!(
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM workspaces")
            .fetch_one(app.pool())
            .await?,
        0
    );

    // Alice is: she sees it and builds from it, but does not administer it.
    assert_eq!(alice.all_templates().await?.len(), 1);
    assert_eq!(alice.template(template.id).await?.id, template.id);
    workspace(&alice, template.id, "mine").await?;
    assert_eq!(refusal(alice.template_acl(template.id).await).0, 403);
    assert_eq!(
        refusal(alice.update_template_acl(template.id, &restrict).await).0,
        403
    );

    // Template administrators are unaffected; an admin entry makes Bob one for this template.
    assert_eq!(template_admin.all_templates().await?.len(), 1);
    let bob_admin = UpdateTemplateACL {
        user_perms: [(bob_user.id.to_string(), TemplateRole::Admin)].into(),
        ..Default::default()
    };
    owner.update_template_acl(template.id, &bob_admin).await?;
    assert_eq!(bob.template(template.id).await?.id, template.id);
    let acl = bob.template_acl(template.id).await?;
    assert_eq!(acl.users.len(), 1);
    assert_eq!(
        (acl.users[0].user.username.as_str(), acl.users[0].role),
        ("bob", TemplateRole::Admin)
    );
    let described = codersdk::templates::UpdateTemplateMeta {
        description: Some("bob's now".into()),
        ..Default::default()
    };
    assert_eq!(
        bob.update_template_meta(template.id, &described)
            .await?
            .description,
        "bob's now"
    );
    assert_eq!(
        refusal(alice.update_template_meta(template.id, &described).await).0,
        403
    );
    let available = bob.template_acl_available(template.id).await?;
    assert_eq!(available.groups.len(), 2);
    assert_eq!(available.users.len(), 4);

    // Bad entries are refused in Coder's shape, naming the field, and change nothing.
    let bad = UpdateTemplateACL {
        user_perms: [("not-a-uuid".to_string(), TemplateRole::Use)].into(),
        group_perms: [(uuid::Uuid::new_v4().to_string(), TemplateRole::Use)].into(),
    };
    assert_eq!(
        refusal(owner.update_template_acl(template.id, &bad).await),
        (
            400,
            vec!["user_perms".to_string(), "group_perms".to_string()]
        )
    );
    let outsider_org = owner
        .create_organization(&CreateOrganizationRequest {
            name: "other".into(),
            ..Default::default()
        })
        .await?;
    let foreign_group = UpdateTemplateACL {
        group_perms: [(outsider_org.id.to_string(), TemplateRole::Use)].into(),
        ..Default::default()
    };
    assert_eq!(
        refusal(owner.update_template_acl(template.id, &foreign_group).await),
        (400, vec!["group_perms".to_string()])
    );
    assert_eq!(owner.template_acl(template.id).await?.groups.len(), 1);

    // Removing Bob's entry hides it again; deleting the group hides it from Alice too.
    let unlist = UpdateTemplateACL {
        user_perms: [(bob_user.id.to_string(), TemplateRole::Deleted)].into(),
        ..Default::default()
    };
    owner.update_template_acl(template.id, &unlist).await?;
    assert_eq!(refusal(bob.template(template.id).await).0, 404);
    owner.delete_group(devs.id).await?;
    assert!(alice.all_templates().await?.is_empty());
    assert_eq!(
        refusal(workspace(&alice, template.id, "again").await).0,
        400
    );
    Ok(())
}

#[tokio::test]
async fn group_changes_are_audited_with_their_diff() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (_, alice) = app.user(&owner, "alice", &[]).await?;
    let qa = owner.create_group("coder", &create("qa")).await?;
    owner
        .patch_group(
            qa.id,
            &PatchGroupRequest {
                display_name: Some("Quality".into()),
                add_users: vec![alice.id.to_string()],
                ..Default::default()
            },
        )
        .await?;
    // A refused change writes nothing.
    refusal(owner.create_group("coder", &create("qa")).await);
    owner.delete_group(qa.id).await?;

    let log = owner.audit_logs("resource_type:group", 25, 0).await?;
    let seen: Vec<(String, String)> = log
        .audit_logs
        .iter()
        .map(|e| {
            let action = serde_json::to_value(e.action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            (action, e.resource_target.clone())
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("delete".to_string(), "qa".to_string()),
            ("write".into(), "qa".into()),
            ("create".into(), "qa".into()),
        ]
    );
    let write = &log.audit_logs[1];
    assert_eq!(write.diff["display_name"].new, "Quality");
    assert_eq!(
        write.additional_fields["add_users"],
        serde_json::json!([alice.id])
    );
    assert!(write.user.as_ref().is_some_and(|u| u.username == "owner"));
    assert_eq!(log.audit_logs[2].diff["name"].new, "qa");
    Ok(())
}
