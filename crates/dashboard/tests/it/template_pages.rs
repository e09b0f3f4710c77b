//! A template's page and one version's page over real HTTP: what they show, escaping, 404s for
//! what the viewer may not see, and the login redirect.

use codersdk::groups::{TemplateRole, UpdateTemplateACL};
use codersdk::templates::UpdateTemplateMeta;
use testutil::PASSWORD;

use crate::common::{Web, app, push_template};

#[tokio::test]
async fn template_and_version_pages_show_resources_import_and_parameters() -> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    let template = push_template(&app, &owner, "docker").await?;
    owner
        .update_template_meta(
            template,
            &UpdateTemplateMeta {
                display_name: Some("<b>Docker</b>".into()),
                ..Default::default()
            },
        )
        .await?;
    let active = owner.template(template).await?.active_version_id;
    let version = owner.template_version(active).await?.name;
    let version_path = format!("/templates/docker/versions/{version}");

    let signed_out = Web::new(&app)?.get("/templates/docker").await?;
    assert_eq!(signed_out.status, 303);
    assert!(signed_out.location().starts_with("/login?redirect="));

    let mut web = Web::new(&app)?;
    web.login("owner@example.com", PASSWORD).await?;
    let page = web.get("/templates/docker").await?;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("&#60;b&#62;Docker&#60;/b&#62;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<b>Docker</b>"));
    // The resource a start of the active version builds.
    assert!(page.body.contains("docker_container"), "{}", page.body);
    assert!(page.body.contains(&format!("href=\"{version_path}\"")));
    assert!(
        web.get("/templates")
            .await?
            .body
            .contains("href=\"/templates/docker\"")
    );
    assert!(
        web.get("/templates/docker/versions")
            .await?
            .body
            .contains(&format!("href=\"{version_path}\""))
    );

    let page = web.get(&version_path).await?;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Succeeded"), "{}", page.body);
    assert!(page.body.contains("role=\"log\""));
    // A finished import is not polled; its parameters are listed.
    assert!(!page.body.contains("hx-trigger"), "{}", page.body);
    assert!(page.body.contains("<td>cpus</td>"), "{}", page.body);
    let fragment = web.get(&format!("{version_path}/import")).await?;
    assert_eq!(fragment.status, 200);
    assert!(
        fragment.body.starts_with("<section id=\"import\""),
        "{}",
        fragment.body
    );
    assert_eq!(
        web.get("/templates/docker/versions/nope").await?.status,
        404
    );
    assert_eq!(web.get("/templates/nope").await?.status, 404);

    // Once the template is closed to everyone, a member sees neither page.
    app.user(&owner, "member", &[]).await?;
    let org = owner.organization("default").await?;
    owner
        .update_template_acl(
            template,
            &UpdateTemplateACL {
                group_perms: [(org.id.to_string(), TemplateRole::Deleted)].into(),
                ..Default::default()
            },
        )
        .await?;
    let mut member = Web::new(&app)?;
    member.login("member@example.com", PASSWORD).await?;
    assert_eq!(member.get("/templates/docker").await?.status, 404);
    assert_eq!(member.get(&version_path).await?.status, 404);
    assert_eq!(
        member.get(&format!("{version_path}/import")).await?.status,
        404
    );
    Ok(())
}
