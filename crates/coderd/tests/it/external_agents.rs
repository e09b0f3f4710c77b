//! External agents: the credentials of an agent of a `coder_external_agent` build are handed
//! to whoever may connect to the workspace (404 for anyone else, for workspaces without
//! external agents and for unknown agents); the token is sealed at rest and authenticates
//! as the agent; the command's bootstrap script is served with this deployment's URL; the
//! workspace search finds workspaces by whether they have external agents.

use codersdk::ClientError;
use codersdk::agentsdk::{AgentConnection, Request, Response};
use codersdk::proto::TemplateFeatures;
use testutil::TestApp;
use uuid::Uuid;

use crate::agents::agent_template;

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_external_agents_credentials_go_to_who_may_connect() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let (bob, _) = app.user(&owner, "bob", &[]).await?;

    let token = Uuid::new_v4().to_string();
    let mut external = agent_template(&token);
    if let Some(start) = external.start.as_mut() {
        start.features = Some(TemplateFeatures {
            has_external_agents: true,
            ..Default::default()
        });
    }
    let t = app
        .echo_template(&owner, "external", &external, &[])
        .await?;
    let ws = testutil::running_workspace(&alice, t.id, "outside").await?;

    let creds = alice
        .workspace_external_agent_credentials(ws.id, "main")
        .await?;
    assert_eq!(creds.agent_token, token);
    let script_url = app.url.join("/api/v2/init-script/linux/amd64")?;
    assert_eq!(
        creds.command,
        format!("curl -fsSL \"{script_url}\" | CODER_AGENT_TOKEN=\"{token}\" sh")
    );

    // The token is the agent's identity.
    let conn = AgentConnection::connect(&app.url, &creds.agent_token).await?;
    assert!(matches!(
        conn.call(Request::GetManifest).await?,
        Response::Manifest(_)
    ));

    // Sealed at rest: the table holds no clear token.
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT sealed FROM workspace_agent_external_tokens")
            .fetch_all(app.pool())
            .await?;
    assert_eq!(stored.len(), 1);
    assert!(stored.iter().all(|s| !s.contains(&token)));

    // Others, unknown agents and workspaces without external agents: 404.
    let e = bob
        .workspace_external_agent_credentials(ws.id, "main")
        .await
        .expect_err("bob may not connect to alice's workspace");
    assert_eq!(status(&e), 404);
    let e = alice
        .workspace_external_agent_credentials(ws.id, "nope")
        .await
        .expect_err("no such agent");
    assert_eq!(status(&e), 404);
    let plain = app
        .echo_template(
            &owner,
            "plain",
            &agent_template(&Uuid::new_v4().to_string()),
            &[],
        )
        .await?;
    let inside = testutil::running_workspace(&alice, plain.id, "inside").await?;
    let e = alice
        .workspace_external_agent_credentials(inside.id, "main")
        .await
        .expect_err("not an external agent");
    assert_eq!(status(&e), 404);

    // Coder's search term finds workspaces by whether their agents are external; its CLI's
    // spelling with hyphens means the same; anything but true/false is refused.
    let names = |q: &'static str| {
        let alice = alice.clone();
        async move {
            let mut found: Vec<String> = alice
                .workspaces(q)
                .await?
                .workspaces
                .into_iter()
                .map(|w| w.name)
                .collect();
            found.sort();
            anyhow::Ok(found)
        }
    };
    assert_eq!(names("has_external_agent:true").await?, ["outside"]);
    assert_eq!(names("has-external-agent:true").await?, ["outside"]);
    assert_eq!(names("has_external_agent:false").await?, ["inside"]);
    assert_eq!(names("").await?, ["inside", "outside"]);
    assert_eq!(
        names("owner:me has_external_agent:true status:running").await?,
        ["outside"]
    );
    // Bob sees neither: the filter narrows what the caller may see, never widens it.
    assert!(
        bob.workspaces("has_external_agent:true")
            .await?
            .workspaces
            .is_empty()
    );
    let e = alice
        .workspaces("has_external_agent:maybe")
        .await
        .expect_err("not a boolean");
    assert_eq!(status(&e), 400);

    // The bootstrap script needs no session, and fetches this deployment's binary.
    let script = reqwest::get(script_url).await?;
    assert_eq!(script.status(), 200);
    let script = script.text().await?;
    assert!(
        script.contains(&format!("{}bin/coder-linux-amd64", app.url)),
        "{script}"
    );
    assert!(!script.contains("${AUTH_TYPE}") && !script.contains("${ACCESS_URL}"));
    let bad = reqwest::get(app.url.join("/api/v2/init-script/plan9/mips")?).await?;
    assert_eq!(bad.status(), 400);
    Ok(())
}
