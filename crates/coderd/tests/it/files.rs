//! Template uploads: validated, size-limited, content-addressed; bad ones change nothing.

use codersdk::files::CONTENT_TYPE_TAR;
use codersdk::templates::CreateTemplateVersionRequest;
use reqwest::Method;
use testutil::TestApp;

fn raw_tar(name: &str, data: &[u8]) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    // set_path refuses `..`; write the raw bytes an attacker would send.
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, data).expect("append");
    builder.into_inner().expect("finish")
}

#[tokio::test]
async fn uploads_are_validated_and_deduplicated() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let good = raw_tar("main.tf", b"terraform {}");
    let first = owner.upload_tar(good.clone()).await?;
    let again = owner.upload_tar(good.clone()).await?;
    assert_eq!(first.hash, again.hash, "same bytes, same file");
    assert_eq!(owner.download_file(first.hash).await?, good);

    for (bad, what) in [
        (raw_tar("../escape.tf", b"x"), "traversal"),
        (raw_tar("/etc/cron.d/evil", b"x"), "absolute"),
        (
            b"not a tar archive at all, just some words............".to_vec(),
            "garbage",
        ),
    ] {
        let err = owner.upload_tar(bad).await.expect_err(what);
        assert_eq!(err.status(), Some(400), "{what}: {err}");
    }
    let wrong_type = owner
        .request(Method::POST, "/api/v2/files")?
        .header("content-type", "application/zip")
        .body(good)
        .send()
        .await?;
    assert_eq!(wrong_type.status(), 400);
    let huge = vec![0u8; 11 << 20];
    let resp = owner
        .request(Method::POST, "/api/v2/files")?
        .header("content-type", CONTENT_TYPE_TAR)
        .body(huge)
        .send()
        .await?;
    assert_eq!(resp.status(), 413);
    let body: codersdk::Response = resp.json().await?;
    assert_eq!(body.message, "File is too large.");
    Ok(())
}

#[tokio::test]
async fn template_versions_refuse_bad_input_and_write_nothing() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let file = owner.upload_tar(raw_tar("echo.json", b"{}")).await?;
    let base = CreateTemplateVersionRequest {
        file_id: file.hash,
        provisioner: "echo".into(),
        storage_method: "file".into(),
        ..Default::default()
    };
    let cases = [
        CreateTemplateVersionRequest {
            file_id: uuid::Uuid::new_v4(),
            ..base.clone()
        },
        CreateTemplateVersionRequest {
            provisioner: "pulumi".into(),
            ..base.clone()
        },
        CreateTemplateVersionRequest {
            tags: [("".to_string(), "x".to_string())].into(),
            ..base.clone()
        },
        CreateTemplateVersionRequest {
            tags: [("k".to_string(), "v\0".to_string())].into(),
            ..base.clone()
        },
        CreateTemplateVersionRequest {
            template_id: Some(uuid::Uuid::new_v4()),
            ..base.clone()
        },
        CreateTemplateVersionRequest {
            storage_method: "s3".into(),
            ..base.clone()
        },
    ];
    for req in cases {
        let err = owner
            .create_template_version("coder", &req)
            .await
            .expect_err("bad input");
        assert_eq!(err.status(), Some(400), "{req:?}: {err}");
    }
    assert!(
        owner.provisioner_jobs("coder", None, 100).await?.is_empty(),
        "no job was queued"
    );
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let denied = member
        .create_template_version("coder", &base)
        .await
        .expect_err("members cannot");
    assert_eq!(denied.status(), Some(403));
    Ok(())
}
