//! `coder groups` against an in-process coderd.

use codersdk::groups::Group;
use testutil::TestApp;

use crate::harness::Coder;

#[tokio::test(flavor = "multi_thread")]
async fn groups_are_created_listed_edited_and_deleted() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (_, alice) = app.user(&owner, "alice", &[]).await?;
    app.user(&owner, "bob", &[]).await?;
    let coder = Coder::new()?;
    let token = owner.token().unwrap_or_default().to_string();
    let url = app.url.as_str();
    let run = |args: &[&str]| -> anyhow::Result<std::process::Output> {
        Ok(coder
            .command()
            .env("CODER_URL", url)
            .env("CODER_SESSION_TOKEN", &token)
            .args(args)
            .output()?)
    };
    let ok = |args: &[&str]| -> anyhow::Result<String> {
        let out = run(args)?;
        anyhow::ensure!(
            out.status.success(),
            "coder {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    };

    let out = ok(&[
        "groups",
        "create",
        "devs",
        "--display-name",
        "Developers",
        "-u",
        "/icon/dev.svg",
    ])?;
    assert!(out.contains("Successfully created group devs!"), "{out}");
    let out = ok(&[
        "groups",
        "edit",
        "devs",
        "-a",
        &alice.id.to_string(),
        "--add-users",
        "bob@example.com",
        "-n",
        "developers",
    ])?;
    assert!(
        out.contains("Successfully patched group developers!"),
        "{out}"
    );

    let table = ok(&["groups", "list"])?;
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("NAME") && header.contains("MEMBERS"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with("developers"))
        .unwrap_or_default();
    assert!(
        row.contains("alice@example.com") && row.contains("bob@example.com"),
        "{table}"
    );

    let groups: Vec<Group> =
        serde_json::from_str(&ok(&["groups", "ls", "-o", "json", "--org", "coder"])?)?;
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["Everyone", "developers"]);
    assert_eq!(groups[1].display_name, "Developers");
    assert_eq!(groups[1].avatar_url, "/icon/dev.svg");

    ok(&["groups", "edit", "developers", "-r", "alice"])?;
    let group = owner.group_by_org_and_name("coder", "developers").await?;
    let members: Vec<&str> = group.members.iter().map(|m| m.username.as_str()).collect();
    assert_eq!(members, ["bob"]);

    // Coder's messages for what cannot be done.
    let bad = run(&["groups", "create", "Everyone"])?;
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("reserved"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let bad = run(&["groups", "edit", "developers", "-a", "nobody"])?;
    assert!(!bad.status.success());

    let out = ok(&["groups", "rm", "developers"])?;
    assert!(
        out.contains("Successfully deleted group developers!"),
        "{out}"
    );
    assert_eq!(owner.groups_by_organization("coder").await?.len(), 1);
    let gone = run(&["groups", "delete", "developers"])?;
    assert!(!gone.status.success());
    Ok(())
}
