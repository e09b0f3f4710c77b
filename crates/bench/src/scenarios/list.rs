//! P5: listing every workspace in one request (`GET /api/v2/workspaces`, no limit), timed from
//! sending to the last byte, and checked to hold them all.

use std::time::{Duration, Instant};

use anyhow::ensure;
use reqwest::Method;

use crate::deploy::Deployment;

pub struct ListRun {
    pub elapsed: Duration,
    pub bytes: usize,
}

pub async fn run(deploy: &Deployment, expected: usize) -> anyhow::Result<ListRun> {
    let request = deploy
        .owner
        .request(Method::GET, "/api/v2/workspaces")?
        .timeout(deploy.timeout);
    let started = Instant::now();
    let resp = request.send().await?;
    let status = resp.status();
    let body = resp.bytes().await?;
    let elapsed = started.elapsed();
    ensure!(status.is_success(), "listing workspaces: {status}");
    let parsed: codersdk::workspaces::WorkspacesResponse = serde_json::from_slice(&body)?;
    ensure!(
        parsed.workspaces.len() == expected && parsed.count as usize == expected,
        "the list held {} workspaces (count {}), expected {expected}",
        parsed.workspaces.len(),
        parsed.count
    );
    Ok(ListRun {
        elapsed,
        bytes: body.len(),
    })
}
