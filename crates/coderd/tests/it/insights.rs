//! Insights through the API, from usage a client really reports (`POST /workspaces/{id}/usage`,
//! as Coder's CLI sends it for an IDE) and the relay flushes into the rollups.

use std::time::Duration;

use chrono::{DurationRound, Utc};
use reqwest::Method;
use serde_json::json;
use testutil::{TestApp, eventually, running_workspace};

use crate::support::{get, region_template};

#[tokio::test]
async fn reported_use_shows_in_every_insight() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let template = app
        .echo_template(&owner, "dev", &region_template(), &[])
        .await?;
    let ws = running_workspace(&owner, template.id, "used").await?;
    let agent = ws.latest_build.resources[0].agents[0].id;

    let report = owner
        .request(Method::POST, &format!("/api/v2/workspaces/{}/usage", ws.id))?
        .json(&json!({"agent_id": agent, "app_name": "vscode"}))
        .send()
        .await?;
    assert_eq!(report.status(), 204);

    let now = Utc::now();
    let start = now.duration_trunc(chrono::Duration::days(1))?;
    let end = now.duration_trunc(chrono::Duration::hours(1))? + chrono::Duration::hours(1);
    let range = format!(
        "start_time={}&end_time={}",
        start.format("%Y-%m-%dT%H:%M:%SZ"),
        end.format("%Y-%m-%dT%H:%M:%SZ")
    );
    // The relay flushes use every 10 s.
    let activity_path = format!("/api/v2/insights/user-activity?{range}");
    eventually(
        Duration::from_secs(30),
        "the use reaches the rollups",
        || async {
            let (_, body) = get(&owner, &activity_path).await?;
            Ok(body["report"]["users"][0]["seconds"].as_i64().unwrap_or(0) >= 10)
        },
    )
    .await?;
    let (_, activity) = get(&owner, &activity_path).await?;
    let users = &activity["report"]["users"];
    assert_eq!(users.as_array().map(Vec::len), Some(1), "{activity}");
    assert_eq!(users[0]["username"], "owner");
    assert_eq!(users[0]["template_ids"], json!([template.id]));

    let (status, daus) = get(&owner, "/api/v2/insights/daus?tz_offset=0").await?;
    assert_eq!(status, 200);
    let today = now.format("%Y-%m-%d").to_string();
    assert_eq!(
        daus["entries"].as_array().and_then(|e| e.last()).cloned(),
        Some(json!({"date": today, "amount": 1}))
    );
    let (_, template_daus) =
        get(&owner, &format!("/api/v2/templates/{}/daus", template.id)).await?;
    assert_eq!(template_daus["entries"], daus["entries"]);

    let (status, insights) = get(
        &owner,
        &format!(
            "/api/v2/insights/templates?{range}&interval=day&template_ids={}",
            template.id
        ),
    )
    .await?;
    assert_eq!(status, 200, "{insights}");
    let report = &insights["report"];
    assert_eq!(report["active_users"], 1);
    let vscode = report["apps_usage"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["slug"] == "vscode")
        .cloned()
        .unwrap_or_default();
    assert!(vscode["seconds"].as_i64().unwrap_or(0) >= 10, "{report}");
    assert_eq!(
        report["parameters_usage"],
        json!([{"template_ids": [template.id], "display_name": "Region", "name": "region",
                "type": "string", "description": "", "values": [{"value": "eu", "count": 1}]}])
    );
    assert_eq!(insights["interval_reports"][0]["active_users"], 1);

    let (status, counts) = get(&owner, "/api/v2/insights/user-status-counts").await?;
    assert_eq!(status, 200);
    let active = counts["status_counts"]["active"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        active.last().map(|c| c["count"].clone()),
        Some(json!(2)),
        "{counts}"
    );

    let (status, latency) = get(&owner, &format!("/api/v2/insights/user-latency?{range}")).await?;
    assert_eq!(
        (status, latency["report"]["users"].clone()),
        (200, json!([]))
    );

    // Members see no one's insights.
    for path in [
        "/api/v2/insights/daus".to_string(),
        activity_path.clone(),
        "/api/v2/insights/user-status-counts".into(),
    ] {
        let (status, _) = get(&member, &path).await?;
        assert!(status == 403 || status == 404, "{path}: {status}");
    }

    // Bad ranges name the field.
    let day = start.format("%Y-%m-%d");
    for (query, field) in [
        (
            format!(
                "start_time={day}T05:00:00Z&end_time={}",
                end.format("%Y-%m-%dT%H:%M:%SZ")
            ),
            "start_time",
        ),
        (
            format!("start_time={day}T00:00:00Z&end_time=2999-01-01T00:00:00Z"),
            "end_time",
        ),
        (
            format!("start_time=not-a-time&end_time={day}T00:00:00Z"),
            "start_time",
        ),
        (format!("{range}&interval=month"), "interval"),
        (format!("{range}&template_ids=nope"), "template_ids"),
    ] {
        let (status, body) = get(&owner, &format!("/api/v2/insights/templates?{query}")).await?;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["validations"][0]["field"], field, "{query}: {body}");
    }
    let (status, _) = get(
        &owner,
        &format!("/api/v2/insights/user-activity?{range}&colour=red"),
    )
    .await?;
    assert_eq!(status, 400, "unknown parameters are refused");
    Ok(())
}
