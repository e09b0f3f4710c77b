//! External auth end to end, with real parts only: the test OpenID provider (`oidc-provider`)
//! as the git provider (PKCE, rotating refresh tokens, short-lived access tokens, revocation,
//! the device flow), a git server (`git http-backend` behind nginx) that admits a request only
//! while its Basic-auth token is live at that provider, the real `coder` binary and a
//! `local-process` workspace built by the real terraform.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use codersdk::externalauth::{
    DeleteExternalAuthByIdResponse, ExternalAuth, ExternalAuthDevice, ListUserExternalAuthResponse,
    TemplateVersionExternalAuth,
};
use reqwest::{Method, StatusCode};
use serde_json::json;
use testutil::gitserver::GitServer;
use testutil::idp::{Browser, ClientAuth, Landing, TestIdp};
use url::Url;

use crate::harness::{Deployment, free_port};
use crate::secrets::database_text;
use crate::terraform::{Reaper, push_local_process_with, terraform};

/// A test key for `CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS` (32 bytes, base64).
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const SUB: &str = "alice-at-git";
/// Access tokens live this long in the end-to-end test (coderd refreshes 5 s early).
const TOKEN_TTL: Duration = Duration::from_secs(20);
/// Access tokens that are due for a refresh (within coderd's 5 s margin) after this long.
const SHORT_TTL: Duration = Duration::from_secs(6);

const TEMPLATE_EXTRA: &str = r#"
data "coder_external_auth" "git" {
  id = "local-git"
}

resource "terraform_data" "git_probe" {
  count = data.coder_workspace.me.start_count
  input = "probe"
}

resource "coder_metadata" "git_token" {
  count       = data.coder_workspace.me.start_count
  resource_id = terraform_data.git_probe[0].id
  item {
    key   = "token_length"
    value = nonsensitive(length(data.coder_external_auth.git.access_token))
  }
}
"#;

struct Setup {
    d: Deployment,
    idp: TestIdp,
    git: GitServer,
    base: Url,
    client_secret: String,
}

/// The provider `local-git` (code flow, for the git server's URLs) and `local-device` (the
/// device flow, a public client).
async fn setup(extra: &[&str]) -> anyhow::Result<Setup> {
    let idp = TestIdp::start().await?;
    let git = GitServer::start(&idp.issuer).await?;
    let port = free_port()?;
    let base = Url::parse(&format!("http://127.0.0.1:{port}"))?;
    let (client_id, secret) = idp
        .register_git_client(
            base.join("/external-auth/local-git/callback")?.as_str(),
            ClientAuth::Secret,
        )
        .await?;
    let client_secret = secret.context("a confidential client has a secret")?;
    let (device_client, _) = idp
        .register_git_client(
            base.join("/external-auth/local-device/callback")?.as_str(),
            ClientAuth::Public,
        )
        .await?;
    let e = idp.oauth2_endpoints()?;
    let git_port = git.url.port().context("the git server's port")?;
    let vars: Vec<(&str, String)> = vec![
        ("CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS", KEY.into()),
        ("CODER_EXTERNAL_AUTH_0_ID", "local-git".into()),
        ("CODER_EXTERNAL_AUTH_0_TYPE", "gitlab".into()),
        ("CODER_EXTERNAL_AUTH_0_DISPLAY_NAME", "Local Git".into()),
        ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", client_id),
        ("CODER_EXTERNAL_AUTH_0_CLIENT_SECRET", client_secret.clone()),
        ("CODER_EXTERNAL_AUTH_0_AUTH_URL", e.authorize.to_string()),
        ("CODER_EXTERNAL_AUTH_0_TOKEN_URL", e.token.to_string()),
        ("CODER_EXTERNAL_AUTH_0_VALIDATE_URL", e.validate.to_string()),
        ("CODER_EXTERNAL_AUTH_0_REVOKE_URL", e.revocation.to_string()),
        (
            "CODER_EXTERNAL_AUTH_0_REGEX",
            format!(r"^http://127\.0\.0\.1:{git_port}(/.*)?$"),
        ),
        (
            "CODER_EXTERNAL_AUTH_0_SCOPES",
            "openid offline_access write_repository".into(),
        ),
        ("CODER_EXTERNAL_AUTH_0_EXTRA_TOKEN_KEYS", "scope".into()),
        ("CODER_EXTERNAL_AUTH_1_ID", "local-device".into()),
        ("CODER_EXTERNAL_AUTH_1_CLIENT_ID", device_client),
        ("CODER_EXTERNAL_AUTH_1_AUTH_URL", e.authorize.to_string()),
        ("CODER_EXTERNAL_AUTH_1_TOKEN_URL", e.token.to_string()),
        ("CODER_EXTERNAL_AUTH_1_VALIDATE_URL", e.validate.to_string()),
        ("CODER_EXTERNAL_AUTH_1_DEVICE_FLOW", "true".into()),
        (
            "CODER_EXTERNAL_AUTH_1_DEVICE_CODE_URL",
            e.device_authorization.to_string(),
        ),
        (
            "CODER_EXTERNAL_AUTH_1_REGEX",
            "^https://device\\.example/".into(),
        ),
        (
            "CODER_EXTERNAL_AUTH_1_SCOPES",
            "openid write_repository".into(),
        ),
    ];
    let env: Vec<(String, String)> = vars.into_iter().map(|(k, v)| (k.into(), v)).collect();
    let address = format!("127.0.0.1:{port}");
    let mut args = vec!["--http-address", address.as_str()];
    args.extend_from_slice(extra);
    let d = Deployment::with_env(&args, &env).await?;
    idp.add_account(
        SUB,
        json!({"email": "admin@example.com", "email_verified": true, "name": "Alice"}),
    )
    .await?;
    idp.login_as(SUB).await?;
    Ok(Setup {
        d,
        idp,
        git,
        base,
        client_secret,
    })
}

impl Setup {
    /// Links `local-git` as a person would: the dashboard's link page, the provider's consent,
    /// the callback, and the page saying it worked.
    async fn link(&self) -> anyhow::Result<()> {
        let browser = Browser::new();
        browser.set_cookie(&self.base, "coder_session_token", &self.d.token);
        match browser
            .navigate(self.base.join("/external-auth/local-git")?, None)
            .await?
        {
            Landing::Page(response, url) => {
                let status = response.status();
                let body = response.text().await?;
                ensure!(
                    status == StatusCode::OK && url.path() == "/external-auth/local-git",
                    "{status} at {url}: {body}"
                );
                ensure!(body.contains("authenticated with Local Git"), "{body}");
                Ok(())
            }
            Landing::Stopped(url) => bail!("stopped at {url}"),
        }
    }

    async fn api<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
    ) -> anyhow::Result<(StatusCode, T)> {
        let response = self.d.owner.request(method, path)?.send().await?;
        let status = response.status();
        let text = response.text().await?;
        let value = serde_json::from_str(if text.is_empty() { "null" } else { &text })
            .with_context(|| format!("{status}: {text}"))?;
        Ok((status, value))
    }

    /// A shell command in the workspace `ws`, through `coder ssh`.
    fn in_workspace(&self, ws: &str, script: &str) -> Command {
        let mut cmd = self.d.coder(&self.d.token);
        cmd.args(["ssh", ws, "--", script]);
        cmd
    }

    fn ok_in(&self, ws: &str, script: &str) -> anyhow::Result<String> {
        let out = self.in_workspace(ws, script).output()?;
        ensure!(
            out.status.success(),
            "{script:?} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    }

    fn server_log(&self) -> anyhow::Result<String> {
        let mut all = String::new();
        for entry in std::fs::read_dir(self.d.dir.path())? {
            let path = entry?.path();
            if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("server-") && n.ends_with(".log"))
            {
                all.push_str(&std::fs::read_to_string(path)?);
            }
        }
        Ok(all)
    }
}

/// Spawns `cmd` with both streams in a file, which the test reads while it runs.
fn spawn_logged(mut cmd: Command, log: &Path) -> anyhow::Result<Child> {
    let file = std::fs::File::create(log)?;
    Ok(cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()?)
}

async fn wait_for_text(log: &Path, text: &str, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let seen = std::fs::read_to_string(log).unwrap_or_default();
        if seen.contains(text) {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "{text:?} not seen in:\n{seen}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_exit(child: &mut Child, within: Duration, log: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait()? {
            ensure!(
                status.success(),
                "exited {status}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!(
                "still running after {within:?}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn git_in_a_workspace_just_works_once_linked() -> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let s = setup(&["--provisioner-daemons=1"]).await?;
    let repo = s
        .git
        .create_repo("team/app", &[("README.md", "# app\n")])
        .await?;
    let workspaces = s.d.dir.path().join("workspaces");
    push_local_process_with(&s.d, "gitauth", &workspaces, TEMPLATE_EXTRA)?;
    let template = s.d.template("gitauth").await?;
    let path = format!(
        "/api/v2/templateversions/{}/external-auth",
        template.active_version_id
    );
    let (status, needed): (_, Vec<TemplateVersionExternalAuth>) = s.api(Method::GET, &path).await?;
    ensure!(status == StatusCode::OK, "{status}");
    ensure!(
        needed.len() == 1 && needed[0].id == "local-git" && !needed[0].authenticated,
        "{needed:?}"
    );
    ensure!(
        needed[0].authenticate_url == s.base.join("/external-auth/local-git")?.as_str(),
        "{needed:?}"
    );

    // `coder create` cannot go on before the link: it shows where to link, and waits.
    let create_log = s.d.dir.path().join("create.log");
    let mut create = spawn_logged(
        {
            let mut cmd = s.d.coder(&s.d.token);
            cmd.args(["create", "dev", "-t", "gitauth", "--yes"]);
            cmd
        },
        &create_log,
    )?;
    wait_for_text(
        &create_log,
        s.base.join("/external-auth/local-git")?.as_str(),
        Duration::from_secs(60),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        create.try_wait()?.is_none(),
        "create did not wait for the link"
    );
    s.idp.set_access_token_ttl(Some(TOKEN_TTL)).await?;
    s.link().await?;
    wait_exit(&mut create, Duration::from_secs(180), &create_log).await?;

    testutil::eventually(Duration::from_secs(120), "the build to finish", || async {
        Ok(s.d.workspace("dev").await?.latest_build.status
            == codersdk::workspaces::WorkspaceStatus::Running)
    })
    .await?;
    let ws = s.d.workspace("dev").await?;
    let _reaper = Reaper(
        workspaces
            .join(ws.id.to_string())
            .join(".coder-workspace.pid"),
    );
    let token_length = ws
        .latest_build
        .resources
        .iter()
        .flat_map(|r| r.metadata.iter())
        .find(|m| m.key == "token_length")
        .map(|m| m.value.clone())
        .with_context(|| format!("no token_length in {:#?}", ws.latest_build.resources))?;
    ensure!(
        token_length.parse::<usize>()? > 0,
        "the build got no token ({token_length}); the server said:\n{}",
        s.server_log()?
    );

    // git clone, commit and push over HTTP with nothing set up in the workspace.
    testutil::eventually(Duration::from_secs(90), "the agent answers", || async {
        Ok(s.in_workspace("dev", "true").output()?.status.success())
    })
    .await?;
    s.ok_in("dev", &format!("git clone -q {repo} app"))?;
    s.ok_in(
        "dev",
        "cd app && echo hi >pushed.txt && git add pushed.txt && \
         git -c user.name=Alice -c user.email=alice@example.com commit -qm 'from the workspace' && \
         git push -q origin HEAD:main",
    )?;
    let log = s.git.git("team/app", &["log", "--oneline", "main"]).await?;
    ensure!(log.contains("from the workspace"), "{log}");

    // After expiry, 20 fetches at once cost the provider one refresh.
    tokio::time::sleep(TOKEN_TTL + Duration::from_secs(1)).await;
    let before = s.idp.refresh_count().await?;
    let fetches: Vec<Child> = (0..20)
        .map(|_| {
            s.in_workspace("dev", "cd app && git fetch -q")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    for fetch in fetches {
        let out = fetch.wait_with_output()?;
        ensure!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let refreshes = s.idp.refresh_count().await? - before;
    ensure!(refreshes == 1, "{refreshes} refreshes for 20 fetches");

    // Revoked at the provider: the next fetch shows the link page and waits for a new link.
    s.idp.revoke_grants(SUB).await?;
    let fetch_log = s.d.dir.path().join("fetch.log");
    let mut fetch = spawn_logged(s.in_workspace("dev", "cd app && git fetch -q"), &fetch_log)?;
    wait_for_text(
        &fetch_log,
        s.base.join("/external-auth/local-git")?.as_str(),
        Duration::from_secs(60),
    )
    .await?;
    s.link().await?;
    wait_exit(&mut fetch, Duration::from_secs(60), &fetch_log).await?;

    // Dotfiles from a private repository: cloned with the linked token and its install script
    // run; a second run pulls and runs it again; a repository without one is linked into place.
    let dotfiles = s
        .git
        .create_repo("team/dotfiles", &[("README.md", "dotfiles\n")])
        .await?;
    s.ok_in(
        "dev",
        &format!(
            "git clone -q {dotfiles} dotsrc && cd dotsrc && \
             printf '#!/bin/sh\\necho ran >>\"$HOME/dotfiles-ran\"\\n' >install.sh && \
             chmod +x install.sh && git add install.sh && \
             git -c user.name=Alice -c user.email=alice@example.com commit -qm install && \
             git push -q origin HEAD:main"
        ),
    )?;
    for _ in 0..2 {
        s.ok_in(
            "dev",
            &format!("\"$GIT_ASKPASS\" dotfiles --yes {dotfiles}"),
        )?;
    }
    let ran = s.ok_in("dev", "cat \"$HOME/dotfiles-ran\"")?;
    ensure!(ran.lines().count() == 2, "the install script ran: {ran:?}");
    let plain = s
        .git
        .create_repo("team/plain-dots", &[(".dotrc", "set x\n")])
        .await?;
    s.ok_in(
        "dev",
        &format!(
            "\"$GIT_ASKPASS\" --global-config \"$HOME/.plain-config\" dotfiles --yes \
             --symlink-dir \"$HOME/links\" {plain}"
        ),
    )?;
    let target = s.ok_in("dev", "readlink \"$HOME/links/.dotrc\"")?;
    ensure!(target.trim().ends_with("dotfiles/.dotrc"), "{target}");

    // The CLI's view, the agent endpoint's refusals, and askpass's.
    let token = s.ok_in(
        "dev",
        "\"$GIT_ASKPASS\" external-auth access-token local-git",
    )?;
    ensure!(s.idp.access_token_active(&token).await?, "token not live");
    let scope = s.ok_in(
        "dev",
        "\"$GIT_ASKPASS\" external-auth access-token local-git --extra scope",
    )?;
    ensure!(
        scope.contains("write_repository"),
        "the kept scope: {scope:?}"
    );
    let agent_token = s.ok_in("dev", "printf %s \"$CODER_AGENT_TOKEN\"")?;
    agent_endpoint_refusals(&s, &agent_token).await?;
    let refused = s
        .in_workspace(
            "dev",
            "GIT_PREFIX= \"$GIT_ASKPASS\" \"Username for 'ftp://example.com': \"",
        )
        .output()?;
    ensure!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr).contains("unsupported scheme"),
        "{refused:?}"
    );

    // Nothing secret anywhere but the agent's answer.
    let database = database_text(&s.d).await?;
    let log = s.server_log()?;
    let processes = String::from_utf8(Command::new("ps").args(["-eo", "args"]).output()?.stdout)?;
    for (what, secret) in [
        ("token", token.as_str()),
        ("client secret", &s.client_secret),
    ] {
        ensure!(!database.contains(secret), "the {what} is in the database");
        ensure!(!log.contains(secret), "the {what} is in the server's log");
        ensure!(
            !processes.contains(secret),
            "the {what} is in a command line"
        );
    }
    let (_, listed): (_, ListUserExternalAuthResponse) =
        s.api(Method::GET, "/api/v2/external-auth").await?;
    ensure!(
        listed.links.len() == 1 && listed.links[0].authenticated,
        "{listed:?}"
    );
    ensure!(!serde_json::to_string(&listed)?.contains(&token));

    // Unlinking revokes the token at the provider; the workspace is told to link again.
    let (status, deleted): (_, DeleteExternalAuthByIdResponse) = s
        .api(Method::DELETE, "/api/v2/external-auth/local-git")
        .await?;
    ensure!(
        status == StatusCode::OK && deleted.token_revoked,
        "{deleted:?}"
    );
    ensure!(
        !s.idp.access_token_active(&token).await?,
        "still live after DELETE"
    );
    let out = s
        .in_workspace(
            "dev",
            "\"$GIT_ASKPASS\" external-auth access-token local-git",
        )
        .output()?;
    ensure!(out.status.code() == Some(1), "{out:?}");
    ensure!(
        String::from_utf8(out.stdout)? == s.base.join("/external-auth/local-git")?.as_str(),
        "the link URL on stdout"
    );
    Ok(())
}

/// The agent endpoint's answers to bad questions, with a real agent's token.
async fn agent_endpoint_refusals(s: &Setup, agent_token: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let call = |query: &str| {
        client
            .get(format!(
                "{}api/v2/workspaceagents/me/external-auth?{query}",
                s.base
            ))
            .header("Coder-Session-Token", agent_token)
            .send()
    };
    for (query, status) in [
        ("", StatusCode::BAD_REQUEST),
        ("match=http://x&id=local-git", StatusCode::BAD_REQUEST),
        ("id=nope", StatusCode::NOT_FOUND),
    ] {
        let response = call(query).await?;
        ensure!(
            response.status() == status,
            "{query}: {}",
            response.status()
        );
    }
    let response = call("match=https://elsewhere.example/repo.git").await?;
    let status = response.status();
    let body: serde_json::Value = response.json().await?;
    ensure!(status == StatusCode::NOT_FOUND, "{status}");
    let detail = body["detail"].as_str().unwrap_or_default();
    ensure!(
        detail.contains("local-git=") && detail.contains("local-device="),
        "{body}"
    );
    let response = call("id=local-git").await?;
    ensure!(response.status() == StatusCode::OK);
    let answer: serde_json::Value = response.json().await?;
    ensure!(
        answer["username"] == "oauth2" && answer["type"] == "gitlab",
        "GitLab's git user name: {}",
        answer["username"]
    );
    let stranger = client
        .get(format!(
            "{}api/v2/workspaceagents/me/external-auth?id=local-git",
            s.base
        ))
        .header("Coder-Session-Token", "not-an-agent")
        .send()
        .await?;
    ensure!(stranger.status() == StatusCode::UNAUTHORIZED);
    Ok(())
}

async fn linked(s: &Setup, provider: &str) -> anyhow::Result<bool> {
    let (status, auth): (_, ExternalAuth) = s
        .api(Method::GET, &format!("/api/v2/external-auth/{provider}"))
        .await?;
    ensure!(status == StatusCode::OK, "{status}");
    Ok(auth.authenticated)
}

#[tokio::test(flavor = "multi_thread")]
async fn linking_refuses_what_it_did_not_start_and_the_device_flow_links() -> anyhow::Result<()> {
    let mut s = setup(&[]).await?;
    let browser = Browser::new();
    browser.set_cookie(&s.base, "coder_session_token", &s.d.token);
    let callback = s.base.join("/external-auth/local-git/callback")?;

    // A code and state the deployment never sent the browser for: refused, nothing stored.
    for query in [
        "code=forged&state=forged",
        "code=forged",
        "error=access_denied&error_description=no",
    ] {
        let mut url = callback.clone();
        url.set_query(Some(query));
        let Landing::Page(response, _) = browser.navigate(url, None).await? else {
            bail!("redirected");
        };
        ensure!(
            response.status() == StatusCode::BAD_REQUEST,
            "{query}: {}",
            response.status()
        );
    }
    ensure!(
        !linked(&s, "local-git").await?,
        "linked by a forged callback"
    );

    // A real round trip, stopped before coderd sees the code: replaying it after use fails.
    // Its tokens expire soon, for the outage below.
    s.idp.set_access_token_ttl(Some(SHORT_TTL)).await?;
    let Landing::Stopped(returned) = browser
        .navigate(
            s.base.join("/external-auth/local-git")?,
            Some(&format!("{callback}?code=")),
        )
        .await?
    else {
        bail!("the provider did not send the browser back");
    };
    let Landing::Page(first, at) = browser.navigate(returned.clone(), None).await? else {
        bail!("redirected");
    };
    ensure!(
        first.status() == StatusCode::OK && at.path() == "/external-auth/local-git",
        "{at}"
    );
    ensure!(linked(&s, "local-git").await?, "not linked");
    let Landing::Page(replayed, at) = browser.navigate(returned, None).await? else {
        bail!("redirected");
    };
    let status = replayed.status();
    ensure!(
        status == StatusCode::BAD_REQUEST,
        "a replayed code: {status} at {at}: {}",
        replayed.text().await?
    );

    // Someone else cannot see or remove the link; an unknown provider is not found.
    let member = s.d.owner.clone().with_token(s.d.member_token("bob").await?);
    let response = member
        .request(Method::DELETE, "/api/v2/external-auth/local-git")?
        .send()
        .await?;
    ensure!(
        response.status() == StatusCode::NOT_FOUND,
        "{}",
        response.status()
    );
    ensure!(linked(&s, "local-git").await?, "another user unlinked it");
    let (status, _): (_, serde_json::Value) =
        s.api(Method::GET, "/api/v2/external-auth/nope").await?;
    ensure!(status == StatusCode::NOT_FOUND, "{status}");

    // The device flow: pending until the person approves, then linked.
    let (status, _): (_, serde_json::Value) = s
        .api(Method::GET, "/api/v2/external-auth/local-git/device")
        .await?;
    ensure!(
        status == StatusCode::BAD_REQUEST,
        "device flow on a code-flow provider: {status}"
    );
    let (status, device): (_, ExternalAuthDevice) = s
        .api(Method::GET, "/api/v2/external-auth/local-device/device")
        .await?;
    ensure!(
        status == StatusCode::OK && !device.user_code.is_empty(),
        "{device:?}"
    );
    let exchange = || {
        s.d.owner
            .request(Method::POST, "/api/v2/external-auth/local-device/device")
            .map(|r| r.json(&json!({"device_code": device.device_code})))
    };
    let pending = exchange()?.send().await?;
    ensure!(
        pending.status() == StatusCode::BAD_REQUEST,
        "{}",
        pending.status()
    );
    let body: serde_json::Value = pending.json().await?;
    ensure!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("authorization_pending")),
        "{body}"
    );
    s.idp.approve_device(&device.user_code, SUB).await?;
    let done = exchange()?.send().await?;
    ensure!(done.status() == StatusCode::NO_CONTENT, "{}", done.status());
    let (_, auth): (_, ExternalAuth) = s
        .api(Method::GET, "/api/v2/external-auth/local-device")
        .await?;
    ensure!(auth.authenticated && auth.device, "{auth:?}");

    // The same through the page a person opens: the code shown, and the exchange its script
    // makes with the session cookie from the deployment's own origin.
    let (status, _): (_, serde_json::Value) = s
        .api(Method::DELETE, "/api/v2/external-auth/local-device")
        .await?;
    ensure!(status == StatusCode::OK, "{status}");
    ensure!(!linked(&s, "local-device").await?, "still linked");
    let Landing::Page(page, _) = browser
        .navigate(s.base.join("/external-auth/local-device")?, None)
        .await?
    else {
        bail!("redirected");
    };
    let body = page.text().await?;
    let between = |start: &str, end: char| {
        body.split(start)
            .nth(1)
            .and_then(|rest| rest.split(end).next())
            .map(str::to_owned)
            .with_context(|| format!("no {start:?} in {body}"))
    };
    let user_code = between("<code id=\"user-code\">", '<')?;
    let device_code = between("device_code: \"", '"')?;
    s.idp.approve_device(&user_code, SUB).await?;
    let exchanged = browser
        .http
        .post(s.base.join("/api/v2/external-auth/local-device/device")?)
        .header("Origin", s.base.as_str().trim_end_matches('/'))
        .json(&json!({ "device_code": device_code }))
        .send()
        .await?;
    ensure!(
        exchanged.status() == StatusCode::NO_CONTENT,
        "{}",
        exchanged.status()
    );
    ensure!(
        linked(&s, "local-device").await?,
        "not linked through the page"
    );

    // The provider down when a token must be refreshed: retried, then a clear error; the link
    // stays, and works again once the provider is back (here: it is not, the test ends).
    tokio::time::sleep(SHORT_TTL).await;
    s.idp.stop().await?;
    let started = Instant::now();
    let (status, listed): (_, ListUserExternalAuthResponse) =
        s.api(Method::GET, "/api/v2/external-auth").await?;
    ensure!(status == StatusCode::OK, "{status}");
    let link = listed
        .links
        .iter()
        .find(|l| l.provider_id == "local-git")
        .with_context(|| format!("the link is gone: {listed:?}"))?;
    ensure!(
        !link.authenticated && link.validate_error.contains("refreshing the token failed"),
        "{link:?}"
    );
    ensure!(
        started.elapsed() >= Duration::from_secs(5),
        "not retried: {:?}",
        started.elapsed()
    );
    ensure!(
        link.has_refresh_token,
        "the refresh token was dropped: {link:?}"
    );

    // Key rotation re-seals both links under the new key, once.
    const NEW_KEY: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";
    let rotate = |old: &str| {
        s.d.coder(&s.d.token)
            .args(["server", "dbcrypt", "rotate", "--yes"])
            .args(["--postgres-url", &s.d._db.url(), "--new-key", NEW_KEY])
            .args(["--old-keys", old])
            .output()
    };
    let first = rotate(KEY)?;
    ensure!(
        String::from_utf8_lossy(&first.stdout).contains("Re-encrypted 2 "),
        "{first:?}"
    );
    let again = rotate(KEY)?;
    ensure!(
        String::from_utf8_lossy(&again.stdout).contains("Re-encrypted 0 "),
        "{again:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_provider_configuration_refuses_startup_naming_the_variable() -> anyhow::Result<()> {
    let db = testutil::TestDb::new().await?;
    let dir = tempfile::tempdir()?;
    let base = [
        ("CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS", KEY),
        ("CODER_EXTERNAL_AUTH_0_TYPE", "github"),
        ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "abc"),
    ];
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("CODER_EXTERNAL_AUTH_0_REGEX", "(")],
            "CODER_EXTERNAL_AUTH_0_REGEX",
        ),
        (
            &[("CODER_EXTERNAL_AUTH_0_NO_REFRESH", "maybe")],
            "CODER_EXTERNAL_AUTH_0_NO_REFRESH",
        ),
        (
            &[
                ("CODER_EXTERNAL_AUTH_2_TYPE", "gitlab"),
                ("CODER_EXTERNAL_AUTH_2_CLIENT_ID", "x"),
            ],
            "CODER_EXTERNAL_AUTH_2_*",
        ),
        (
            &[("CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS", "")],
            "CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS",
        ),
        (
            &[("CODER_SSH_KEYGEN_ALGORITHM", "rsa4096")],
            "ssh-keygen-algorithm",
        ),
    ];
    for (extra, variable) in cases {
        let mut cmd = crate::harness::command_with_config(dir.path().join("cli"));
        cmd.args([
            "server",
            "--postgres-url",
            &db.url(),
            "--http-address",
            "127.0.0.1:0",
        ])
        .args(["--provisioner-daemons", "0"])
        .envs(base.iter().copied())
        .envs(extra.iter().copied())
        .stdin(Stdio::null());
        let out = cmd.output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(!out.status.success(), "started with {extra:?}");
        ensure!(stderr.contains(variable), "{variable} not named: {stderr}");
    }
    Ok(())
}

/// OpenSSH's `sshd` on loopback serving one bare repository through `git-shell`, admitting the
/// keys in its `authorized_keys`.
struct GitSshd {
    dir: tempfile::TempDir,
    port: u16,
    child: Child,
}

impl GitSshd {
    fn start() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir_in("/tmp")?;
        let root = dir.path();
        let keygen = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(root.join("host_key"))
            .output()
            .context("ssh-keygen (scripts/setup.sh --tests installs OpenSSH)")?;
        ensure!(keygen.status.success(), "{keygen:?}");
        let repo = root.join("repo.git");
        let init = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "git init -q --bare -b main {repo} && git clone -q {repo} {root}/seed 2>/dev/null; \
                 cd {root}/seed && echo hi >README && git add README && \
                 git -c user.name=t -c user.email=t@e commit -qm seed && git push -q origin HEAD:main",
                repo = repo.display(),
                root = root.display()
            ))
            .output()?;
        ensure!(init.status.success(), "{init:?}");
        std::fs::write(root.join("authorized_keys"), "")?;
        let port = free_port()?;
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {root}/host_key\n\
             AuthorizedKeysFile {root}/authorized_keys\nPidFile {root}/sshd.pid\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
             PermitRootLogin prohibit-password\nStrictModes no\n",
            root = root.display()
        );
        std::fs::write(root.join("sshd_config"), config)?;
        // sshd wants its privilege separation directory, which only its service creates.
        let _ = std::fs::create_dir_all("/run/sshd");
        let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .context("sshd is not installed (scripts/setup.sh --tests installs openssh-server)")?;
        let child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(root.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(root.join("sshd.log"))?)
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            ensure!(
                Instant::now() < deadline,
                "sshd did not listen: {}",
                std::fs::read_to_string(root.join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self { dir, port, child })
    }

    /// Lets `key` in, for git only.
    fn authorize(&self, key: &str) -> anyhow::Result<()> {
        std::fs::write(
            self.dir.path().join("authorized_keys"),
            format!(
                "command=\"git-shell -c \\\"$SSH_ORIGINAL_COMMAND\\\"\",restrict {}\n",
                key.trim()
            ),
        )?;
        Ok(())
    }

    fn url(&self) -> anyhow::Result<String> {
        let user = String::from_utf8(Command::new("id").arg("-un").output()?.stdout)?;
        Ok(format!(
            "ssh://{}@127.0.0.1:{}{}/repo.git",
            user.trim(),
            self.port,
            self.dir.path().display()
        ))
    }
}

impl Drop for GitSshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The public key `coder publickey` shows.
fn shown_key(output: &str) -> anyhow::Result<String> {
    output
        .lines()
        .find(|l| l.starts_with("ssh-ed25519 "))
        .map(str::to_owned)
        .with_context(|| format!("no key in {output:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn git_over_ssh_uses_the_coder_key_and_a_reset_key_must_be_registered_again()
-> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let sshd = GitSshd::start()?;
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let workspaces = d.dir.path().join("workspaces");
    crate::terraform::push_local_process(&d, &workspaces)?;
    d.ok(&["create", "dev", "-t", "local-process", "--wait", "--yes"])?;
    let ws = d.workspace("dev").await?;
    let _reaper = Reaper(
        workspaces
            .join(ws.id.to_string())
            .join(".coder-workspace.pid"),
    );

    let key = shown_key(&d.ok(&["publickey"])?)?;
    sshd.authorize(&key)?;
    // Host keys are the user's business; the Coder key is what is tested.
    let clone = |into: &str| -> anyhow::Result<std::process::Output> {
        let script = format!(
            "GIT_SSH_COMMAND=\"$GIT_SSH_COMMAND -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null\" \
             git clone -q {} {into}",
            sshd.url()?
        );
        Ok(d.coder(&d.token)
            .args(["ssh", "dev", "--", &script])
            .output()?)
    };
    let out = clone("first")?;
    ensure!(out.status.success(), "{out:?}");

    let reset = d.ok(&["publickey", "--reset", "--yes"])?;
    let new_key = shown_key(&reset)?;
    ensure!(new_key != key, "the key did not change");
    let out = clone("second")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success(), "cloned with an unregistered key");
    ensure!(
        stderr.contains(&new_key),
        "the new key is not shown: {stderr}"
    );
    sshd.authorize(&new_key)?;
    let out = clone("third")?;
    ensure!(out.status.success(), "{out:?}");
    Ok(())
}
