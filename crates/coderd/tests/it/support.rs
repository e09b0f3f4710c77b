//! Helpers the API tests share: raw requests that keep the status and the JSON answer, and
//! the template most of them build from.

use codersdk::proto::{Agent, AgentAuth, Resource, RichParameter};
use provisionerd::engines::echo::{BuildStage, EchoTemplate, ImportStage};
use reqwest::Method;
use serde_json::Value;

/// Sends `body` (if any) and returns the status and the JSON answer (`null` when none).
pub async fn send(
    client: &codersdk::Client,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(u16, Value)> {
    let mut request = client.request(method, path)?;
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    Ok((status, response.json().await.unwrap_or(Value::Null)))
}

pub async fn get(client: &codersdk::Client, path: &str) -> anyhow::Result<(u16, Value)> {
    send(client, Method::GET, path, None).await
}

/// The fields an error's validations name, in order.
pub fn invalid_fields(body: &Value) -> Vec<String> {
    body["validations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["field"].as_str().map(str::to_owned))
        .collect()
}

/// A template with a `region` parameter (default `eu`) whose workspaces have one agent,
/// `main`.
pub fn region_template() -> EchoTemplate {
    EchoTemplate {
        import: Some(ImportStage {
            rich_parameters: vec![RichParameter {
                name: "region".into(),
                display_name: "Region".into(),
                kind: "string".into(),
                default_value: "eu".into(),
                mutable: true,
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
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}
