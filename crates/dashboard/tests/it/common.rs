//! What the dashboard's tests share: a coderd with the dashboard mounted, a tiny cookie-keeping
//! HTTP client that does not follow redirects, and an echo template with a parameter.

use std::sync::Arc;

use codersdk::Client;
use codersdk::proto::{Agent, AgentAuth, App, Resource, RichParameter};
use provisionerd::engines::echo::{BuildStage, EchoLog, EchoTemplate, ImportStage};
use reqwest::header::{self, HeaderMap};
use testutil::TestApp;

/// A coderd serving the dashboard, with one built-in echo daemon.
pub async fn app() -> anyhow::Result<TestApp> {
    TestApp::with_options(|o| {
        o.provisioner_daemons = 1;
        o.front_doors.push(Arc::new(dashboard::router));
    })
    .await
}

/// A template whose `cpus` must be 1–8, whose start logs a line and runs one agent with an app.
pub fn echo_template() -> EchoTemplate {
    EchoTemplate {
        import: Some(ImportStage {
            rich_parameters: vec![RichParameter {
                name: "cpus".into(),
                display_name: "CPUs".into(),
                kind: "number".into(),
                default_value: "2".into(),
                mutable: true,
                validation_min: Some(1),
                validation_max: Some(8),
                ..Default::default()
            }],
            ..Default::default()
        }),
        start: Some(BuildStage {
            logs: vec![EchoLog::info("creating the container")],
            delay_ms: 1500,
            resources: vec![Resource {
                name: "dev".into(),
                kind: "docker_container".into(),
                agents: vec![Agent {
                    name: "main".into(),
                    operating_system: "linux".into(),
                    architecture: "amd64".into(),
                    auth: AgentAuth::Token(uuid::Uuid::new_v4().to_string()),
                    apps: vec![App {
                        slug: "code".into(),
                        display_name: "VS Code".into(),
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

/// A browser-like client: keeps cookies by name, never follows redirects.
pub struct Web {
    pub base: url::Url,
    http: reqwest::Client,
    cookies: Vec<(String, String)>,
}

pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    pub fn location(&self) -> &str {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The value of the first hidden CSRF input on the page.
    pub fn csrf(&self) -> String {
        let marker = "name=\"csrf\" value=\"";
        self.body
            .find(marker)
            .map(|i| &self.body[i + marker.len()..])
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("")
            .to_owned()
    }
}

impl Web {
    pub fn new(app: &TestApp) -> anyhow::Result<Self> {
        Ok(Self {
            base: app.url.clone(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
            cookies: Vec::new(),
        })
    }

    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep(&mut self, headers: &HeaderMap) {
        for value in headers.get_all(header::SET_COOKIE) {
            let Ok(value) = value.to_str() else { continue };
            let Some((name, rest)) = value.split_once('=') else {
                continue;
            };
            let v = rest.split(';').next().unwrap_or("").to_owned();
            self.cookies.retain(|(k, _)| k != name);
            if !v.is_empty() {
                self.cookies.push((name.to_owned(), v));
            }
        }
    }

    async fn finish(&mut self, resp: reqwest::Response) -> anyhow::Result<Page> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        self.keep(&headers);
        Ok(Page {
            status,
            headers,
            body: resp.text().await?,
        })
    }

    pub async fn get(&mut self, path: &str) -> anyhow::Result<Page> {
        self.get_with(path, &[]).await
    }

    pub async fn get_with(&mut self, path: &str, extra: &[(&str, &str)]) -> anyhow::Result<Page> {
        let mut req = self
            .http
            .get(self.base.join(path)?)
            .header(header::COOKIE, self.cookie_header());
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        let resp = req.send().await?;
        // A switched protocol has no body to read.
        if resp.status().as_u16() == 101 {
            return Ok(Page {
                status: 101,
                headers: resp.headers().clone(),
                body: String::new(),
            });
        }
        self.finish(resp).await
    }

    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> anyhow::Result<Page> {
        self.post_with(path, form, &[]).await
    }

    pub async fn post_with(
        &mut self,
        path: &str,
        form: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Page> {
        let mut req = self
            .http
            .post(self.base.join(path)?)
            .header(header::COOKIE, self.cookie_header())
            .form(form);
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        let resp = req.send().await?;
        self.finish(resp).await
    }

    /// Signs in through the login form.
    pub async fn login(&mut self, email: &str, password: &str) -> anyhow::Result<Page> {
        let page = self.get("/login").await?;
        let csrf = page.csrf();
        self.post(
            "/login",
            &[("csrf", &csrf), ("email", email), ("password", password)],
        )
        .await
    }
}

/// Imports the echo template as `name` through the API.
pub async fn push_template(
    app: &TestApp,
    owner: &Client,
    name: &str,
) -> anyhow::Result<uuid::Uuid> {
    Ok(app
        .echo_template(owner, name, &echo_template(), &[])
        .await?
        .id)
}
