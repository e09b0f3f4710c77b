//! P4: API reads at a fixed open-loop rate. Requests are scheduled by the clock (request `i` at
//! `start + i / rate`) whether or not earlier ones have answered, and each latency runs from
//! its scheduled time to the last byte of the response — so a stalled server shows up as
//! latency instead of silently lowering the offered rate (no coordinated omission).
//!
//! The mix is what a dashboard does: a workspace by id (half), the template by id (a quarter),
//! and the first page of the caller's workspace list (a quarter).

use std::time::{Duration, Instant};

use codersdk::Client;
use reqwest::Method;
use tokio::task::JoinSet;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Workspace,
    Template,
    ListPage,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Workspace, Kind::Template, Kind::ListPage];

    pub fn label(self) -> &'static str {
        match self {
            Kind::Workspace => "GET /workspaces/{id}",
            Kind::Template => "GET /templates/{id}",
            Kind::ListPage => "GET /workspaces?limit=25",
        }
    }

    fn of(i: usize) -> Self {
        match i % 4 {
            0 | 2 => Kind::Workspace,
            1 => Kind::Template,
            _ => Kind::ListPage,
        }
    }
}

/// Which requests a run sends: the dashboard's mix, or one kind alone (to cost it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    Dashboard,
    Only(Kind),
}

impl Mix {
    fn kind(self, i: usize) -> Kind {
        match self {
            Mix::Dashboard => Kind::of(i),
            Mix::Only(kind) => kind,
        }
    }
}

pub struct ApiRun {
    pub samples: Vec<(Kind, Duration)>,
    pub errors: usize,
    pub first_error: Option<String>,
    /// Requests per second actually sent (the schedule's own fidelity).
    pub offered: f64,
}

pub async fn run(
    owner: &Client,
    workspaces: &[Uuid],
    template: Uuid,
    mix: Mix,
    rate: f64,
    duration: Duration,
) -> anyhow::Result<ApiRun> {
    anyhow::ensure!(!workspaces.is_empty(), "no workspaces to read");
    let total = (rate * duration.as_secs_f64()).round() as usize;
    let period = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now() + Duration::from_millis(20);
    let mut tasks = JoinSet::new();
    for i in 0..total {
        let at = start + period * i as u32;
        tokio::time::sleep_until(at.into()).await;
        let kind = mix.kind(i);
        let path = match kind {
            Kind::Workspace => {
                let pick = (Uuid::new_v4().as_u128() % workspaces.len() as u128) as usize;
                format!("/api/v2/workspaces/{}", workspaces[pick])
            }
            Kind::Template => format!("/api/v2/templates/{template}"),
            Kind::ListPage => "/api/v2/workspaces?q=owner:me&limit=25".into(),
        };
        let request = owner
            .request(Method::GET, &path)?
            .timeout(Duration::from_secs(10));
        tasks.spawn(async move {
            let outcome = async {
                let resp = request.send().await?;
                let status = resp.status();
                let body = resp.bytes().await?;
                anyhow::ensure!(
                    status.is_success(),
                    "{path}: {status}: {}",
                    String::from_utf8_lossy(&body)
                );
                Ok(())
            }
            .await;
            (kind, at.elapsed(), outcome)
        });
    }
    let sent_over = start.elapsed();
    let mut result = ApiRun {
        samples: Vec::with_capacity(total),
        errors: 0,
        first_error: None,
        offered: total as f64 / sent_over.as_secs_f64().max(1e-9),
    };
    while let Some(joined) = tasks.join_next().await {
        let (kind, latency, outcome) = joined?;
        match outcome {
            Ok(()) => result.samples.push((kind, latency)),
            Err(e) => {
                result.errors += 1;
                result.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    Ok(result)
}
