//! What a job produced, as the API shows it: every resource, its metadata, agents, apps,
//! scripts and agent metadata with their fields and in their order, whatever the number of rows
//! (a completion inserts them all in one statement).

use codersdk::proto::{
    Agent, AgentAuth, AgentMetadata, App, AppSharingLevel, DisplayApps, Env, Healthcheck, Resource,
    ResourceMetadata, Script,
};
use codersdk::workspaces::{CreateWorkspaceRequest, WorkspaceResource, WorkspaceStatus};
use provisionerd::engines::echo::{BuildStage, EchoTemplate};
use testutil::{TestApp, wait_build};
use uuid::Uuid;

fn app(slug: &str, order: i64) -> App {
    App {
        id: format!("app-{slug}"),
        slug: slug.into(),
        display_name: format!("App {slug}"),
        url: format!("http://localhost/{slug}"),
        order,
        ..Default::default()
    }
}

fn script(name: &str) -> Script {
    Script {
        display_name: name.into(),
        icon: format!("/icon/{name}.svg"),
        script: format!("echo {name}"),
        run_on_start: true,
        timeout_seconds: 30,
        log_path: format!("/tmp/{name}.log"),
        ..Default::default()
    }
}

fn agent(name: &str, auth: AgentAuth, order: i64) -> Agent {
    Agent {
        name: name.into(),
        operating_system: "linux".into(),
        architecture: "amd64".into(),
        directory: format!("/home/{name}"),
        auth,
        order,
        ..Default::default()
    }
}

/// Two resources with three agents between them, several apps per agent, scripts, metadata:
/// more rows of every kind than one of each.
fn resources() -> Vec<Resource> {
    let mut main = agent("main", AgentAuth::Token(Uuid::new_v4().to_string()), 1);
    main.env = [("EDITOR".to_string(), "vim".to_string())].into();
    main.extra_envs = vec![Env {
        name: "EXTRA".into(),
        value: "1".into(),
        ..Default::default()
    }];
    main.connection_timeout_seconds = 90;
    main.troubleshooting_url = "https://help.example".into();
    main.display_apps = DisplayApps {
        vscode: false,
        vscode_insiders: true,
        web_terminal: true,
        ssh_helper: false,
        port_forwarding_helper: false,
    };
    main.apps = vec![
        App {
            command: "htop".into(),
            url: String::new(),
            sharing_level: AppSharingLevel::Authenticated,
            healthcheck: Some(Healthcheck {
                url: "http://localhost/healthz".into(),
                interval: 5,
                threshold: 3,
            }),
            group: "tools".into(),
            hidden: true,
            ..app("zeta", 2)
        },
        app("alpha", 1),
        app("beta", 1),
    ];
    main.scripts = vec![script("first"), script("second")];
    main.metadata = vec![
        AgentMetadata {
            key: "load".into(),
            display_name: "Load".into(),
            script: "uptime".into(),
            interval: 10,
            timeout: 2,
            order: 0,
        },
        AgentMetadata {
            key: "disk".into(),
            display_name: "Disk".into(),
            script: "df".into(),
            interval: 60,
            timeout: 5,
            order: 0,
        },
    ];
    let mut side = agent("side", AgentAuth::InstanceId("i-0123".into()), 0);
    side.apps = vec![app("web", 0)];
    let dev = Resource {
        name: "dev".into(),
        kind: "docker_container".into(),
        agents: vec![main, side],
        metadata: vec![
            ResourceMetadata {
                key: "image".into(),
                value: "ubuntu".into(),
                ..Default::default()
            },
            ResourceMetadata {
                key: "password".into(),
                value: "hunter2".into(),
                sensitive: true,
                ..Default::default()
            },
            ResourceMetadata {
                key: "unset".into(),
                is_null: true,
                ..Default::default()
            },
        ],
        icon: "/icon/docker.svg".into(),
        instance_type: "t3.micro".into(),
        daily_cost: 7,
        module_path: "module.dev".into(),
        ..Default::default()
    };
    let volume = Resource {
        name: "a_volume".into(),
        kind: "docker_volume".into(),
        hide: true,
        agents: vec![agent(
            "box",
            AgentAuth::Token(Uuid::new_v4().to_string()),
            0,
        )],
        ..Default::default()
    };
    vec![dev, volume]
}

fn check(resources: &[WorkspaceResource], transition: &str) {
    // Resources in name order, agents in display order then name, apps in display order then
    // slug: the API's order, whatever order the rows went in.
    let names: Vec<&str> = resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a_volume", "dev"]);
    let volume = &resources[0];
    assert!(volume.hide);
    assert_eq!(volume.kind, "docker_volume");
    assert_eq!(volume.agents.len(), 1);
    assert_eq!(volume.agents[0].name, "box");
    let dev = &resources[1];
    assert_eq!(dev.workspace_transition, transition);
    assert_eq!(
        (
            dev.kind.as_str(),
            dev.icon.as_str(),
            dev.daily_cost,
            dev.hide
        ),
        ("docker_container", "/icon/docker.svg", 7, false)
    );
    let metadata: Vec<(&str, &str, bool)> = dev
        .metadata
        .iter()
        .map(|m| (m.key.as_str(), m.value.as_str(), m.sensitive))
        .collect();
    assert_eq!(
        metadata,
        [
            ("image", "ubuntu", false),
            // The API never shows a sensitive value.
            ("password", "", true),
            ("unset", "", false)
        ]
    );
    let agents: Vec<&str> = dev.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(agents, ["side", "main"], "display order, then name");
    let side = &dev.agents[0];
    assert_eq!(side.instance_id, "i-0123");
    assert_eq!(side.apps.len(), 1);
    assert_eq!(side.apps[0].slug, "web");
    let main = &dev.agents[1];
    assert_eq!(main.resource_id, dev.id);
    assert_eq!(
        (main.directory.as_str(), main.connection_timeout_seconds),
        ("/home/main", 90)
    );
    assert_eq!(main.troubleshooting_url, "https://help.example");
    assert_eq!(main.display_apps, ["vscode_insiders", "web_terminal"]);
    assert_eq!(
        main.environment_variables.get("EDITOR").map(String::as_str),
        Some("vim")
    );
    assert_eq!(
        main.environment_variables.get("EXTRA").map(String::as_str),
        Some("1")
    );
    let slugs: Vec<&str> = main.apps.iter().map(|a| a.slug.as_str()).collect();
    assert_eq!(slugs, ["alpha", "beta", "zeta"]);
    let zeta = &main.apps[2];
    assert_eq!(zeta.command.as_deref(), Some("htop"));
    assert_eq!(zeta.url, None);
    assert_eq!(zeta.display_name, "App zeta");
    assert_eq!(zeta.sharing_level, "authenticated");
    assert_eq!(zeta.health, "initializing");
    assert_eq!(
        zeta.healthcheck
            .as_ref()
            .map(|h| (h.url.as_str(), h.interval, h.threshold)),
        Some(("http://localhost/healthz", 5, 3))
    );
    assert_eq!((zeta.group.as_str(), zeta.hidden), ("tools", true));
    assert_eq!(main.apps[0].health, "disabled");
    assert_eq!(main.apps[0].url.as_deref(), Some("http://localhost/alpha"));
    let scripts: Vec<(&str, &str, i64)> = main
        .scripts
        .iter()
        .map(|s| (s.display_name.as_str(), s.script.as_str(), s.timeout))
        .collect();
    // The timeout as Coder's API gives it: a Go duration, in nanoseconds.
    let timeout = 30 * 1_000_000_000;
    assert_eq!(
        scripts,
        [
            ("first", "echo first", timeout),
            ("second", "echo second", timeout)
        ]
    );
    for script in &main.scripts {
        let source = main
            .log_sources
            .iter()
            .find(|l| l.id == script.log_source_id)
            .expect("each script has its log source");
        assert_eq!(source.display_name, script.display_name);
        assert_eq!(source.icon, format!("/icon/{}.svg", script.display_name));
    }
}

#[tokio::test]
async fn every_row_a_job_produced_is_stored_with_its_fields_and_shown_in_order()
-> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let stage = BuildStage {
        resources: resources(),
        ..Default::default()
    };
    let template = app
        .echo_template(
            &owner,
            "rows",
            &EchoTemplate {
                start: Some(stage.clone()),
                stop: Some(stage),
                ..Default::default()
            },
            &[],
        )
        .await?;

    // The import's rows: start and stop resources, each in one statement.
    let imported = owner
        .template_version_resources(template.active_version_id)
        .await?;
    let (start, stop): (Vec<_>, Vec<_>) = imported
        .into_iter()
        .partition(|r| r.workspace_transition == "start");
    check(&start, "start");
    check(&stop, "stop");

    // A build's rows.
    let ws = owner
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: "rows".into(),
                ..Default::default()
            },
        )
        .await?;
    let build = wait_build(&owner, ws.latest_build.id).await?;
    assert_eq!(build.status, WorkspaceStatus::Running);
    check(&build.resources, "start");
    let main = &build.resources[1].agents[1];
    let mut metadata: Vec<(String, String, String, i64, i64)> = owner
        .workspace_agent_metadata(main.id)
        .await?
        .into_iter()
        .map(|m| {
            let d = m.description;
            (d.key, d.display_name, d.script, d.interval, d.timeout)
        })
        .collect();
    metadata.sort();
    assert_eq!(
        metadata,
        [
            ("disk".into(), "Disk".into(), "df".into(), 60, 5),
            ("load".into(), "Load".into(), "uptime".into(), 10, 2)
        ]
    );
    Ok(())
}
