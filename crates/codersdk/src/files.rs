//! Uploaded files (template archives).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// `POST /files` answers with the file's id, which Coder calls `hash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UploadResponse {
    pub hash: Uuid,
}

/// Zip uploads are converted to tar when stored.
pub const CONTENT_TYPE_ZIP: &str = "application/zip";

pub const CONTENT_TYPE_TAR: &str = "application/x-tar";

/// The body of `POST /files` as the OpenAPI document describes it: the raw bytes of a tar
/// archive (not JSON).
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct TarArchive(pub Vec<u8>);

impl crate::Client {
    /// Uploads a tar archive; the same bytes uploaded twice get the same id.
    pub async fn upload_tar(&self, tar: Vec<u8>) -> Result<UploadResponse, crate::ClientError> {
        let req = self
            .request(reqwest::Method::POST, "/api/v2/files")?
            .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE_TAR)
            .body(tar);
        self.send(req).await
    }

    pub async fn download_file(&self, id: Uuid) -> Result<Vec<u8>, crate::ClientError> {
        let resp = crate::client::check(
            self.request(reqwest::Method::GET, &format!("/api/v2/files/{id}"))?
                .send()
                .await?,
        )
        .await?;
        Ok(resp.bytes().await?.to_vec())
    }
}
