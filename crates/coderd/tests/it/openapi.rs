//! The served OpenAPI document is part of the API: its changes show up in review.

use testutil::TestApp;

#[tokio::test]
async fn openapi_document_matches_snapshot() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let doc: serde_json::Value = app.client().get("/api/v2/openapi.json").await?;
    assert_eq!(
        doc["openapi"].as_str().map(|v| v.starts_with('3')),
        Some(true)
    );
    insta::assert_json_snapshot!("openapi", doc);
    Ok(())
}
