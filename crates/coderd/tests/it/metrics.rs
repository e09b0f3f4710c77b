//! `/metrics` in Prometheus' text format.

use testutil::TestApp;

#[tokio::test]
async fn latencies_are_histograms_with_fixed_buckets() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    for _ in 0..3 {
        app.client().build_info().await?;
    }
    let text = reqwest::get(app.url.join("/metrics")?)
        .await?
        .error_for_status()?
        .text()
        .await?;
    let api: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("coderd_api_request_latencies_seconds"))
        .collect();
    // Summaries would carry `quantile` labels and keep a sketch per series that grows with
    // every observation; histograms keep one counter per bucket.
    assert!(
        api.iter().any(
            |l| l.starts_with("coderd_api_request_latencies_seconds_bucket{")
                && l.contains("route=\"/api/v2/buildinfo\"")
                && l.contains("le=\"0.005\"")
        ),
        "no buckets for buildinfo in:\n{}",
        api.join("\n")
    );
    assert!(
        !api.iter().any(|l| l.contains("quantile=")),
        "{}",
        api.join("\n")
    );
    Ok(())
}
