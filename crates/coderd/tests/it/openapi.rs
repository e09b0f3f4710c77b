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

/// A path's segments, with `None` for a parameter.
fn segments(path: &str) -> Vec<Option<&str>> {
    path.trim_start_matches('/')
        .split('/')
        .map(|s| (!s.starts_with('{')).then_some(s))
        .collect()
}

/// Whether `fixed` has a literal segment where `other` has a parameter, and could otherwise
/// be the same path: the router must send it to its own handler, not `other`'s.
fn lookalike(fixed: &[Option<&str>], other: &[Option<&str>]) -> bool {
    fixed.len() == other.len()
        && fixed
            .iter()
            .zip(other)
            .any(|(f, o)| f.is_some() && o.is_none())
        && fixed
            .iter()
            .zip(other)
            .all(|(f, o)| f.is_none() || o.is_none() || f == o)
}

#[tokio::test]
async fn no_fixed_path_is_taken_by_a_parameter() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let doc: serde_json::Value = app.client().get("/api/v2/openapi.json").await?;
    let paths: Vec<String> = doc["paths"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let mut checked = 0;
    let mut shadowed = Vec::new();
    for path in &paths {
        let mine = segments(path);
        let at_risk = paths
            .iter()
            .any(|other| other != path && lookalike(&mine, &segments(other)));
        if !at_risk || doc["paths"][path]["get"].is_null() {
            continue;
        }
        // No object has the nil id, so nothing real is named; only who answers matters.
        let concrete = path
            .split('/')
            .map(|s| {
                if s.starts_with('{') {
                    "00000000-0000-0000-0000-000000000000"
                } else {
                    s
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let response = owner
            .request(reqwest::Method::GET, &concrete)?
            .send()
            .await?;
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        let message = body["message"].as_str().unwrap_or_default();
        if status == 405 || message == "Invalid path parameter." || message == "Route not found." {
            shadowed.push(format!("GET {concrete}: {status} {message}"));
        }
        checked += 1;
    }
    // Among them `/templates/examples` (beside `/templates/{id}`) and `…/tokens/tokenconfig`
    // (beside `…/tokens/{name}`), which parameters once took.
    assert!(checked >= 8, "only {checked} lookalike paths found");
    assert!(
        shadowed.is_empty(),
        "fixed paths answered by another route:\n{}",
        shadowed.join("\n")
    );
    Ok(())
}
