//! Uploaded files: template archives, content-addressed per uploader.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use codersdk::files::{CONTENT_TYPE_TAR, CONTENT_TYPE_ZIP, UploadResponse};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{AppState, archive};
use coderd_authz::{Action, Object, Resource};
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path, Query};

pub fn routes(max_file_bytes: usize) -> Router<AppState> {
    Router::new()
        .route(
            "/files",
            post(upload).layer(DefaultBodyLimit::max(max_file_bytes)),
        )
        .route("/files/{id}", get(download))
}

/// Checks that `data` is a tar archive whose entries all stay inside the directory it is
/// unpacked in. Daemons check again when extracting; refusing here gives the uploader a clear
/// error instead of a failed job later.
pub fn validate_tar(data: &[u8]) -> Result<(), String> {
    let mut archive = tar::Archive::new(data);
    let entries = archive.entries().map_err(|e| e.to_string())?;
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path().map_err(|e| e.to_string())?;
        if path.is_absolute()
            || path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(format!(
                "entry {} would be written outside the template directory",
                path.display()
            ));
        }
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Directory | tar::EntryType::Continuous => {}
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let target = entry
                    .link_name()
                    .map_err(|e| e.to_string())?
                    .unwrap_or_default();
                let escapes = target.is_absolute()
                    || path
                        .parent()
                        .unwrap_or(std::path::Path::new(""))
                        .join(&target)
                        .components()
                        .try_fold(0i32, |depth, c| match c {
                            std::path::Component::ParentDir if depth == 0 => None,
                            std::path::Component::ParentDir => Some(depth - 1),
                            std::path::Component::Normal(_) => Some(depth + 1),
                            _ => Some(depth),
                        })
                        .is_none();
                if escapes {
                    return Err(format!(
                        "link {} points outside the template directory",
                        path.display()
                    ));
                }
            }
            tar::EntryType::XGlobalHeader
            | tar::EntryType::XHeader
            | tar::EntryType::GNULongName
            | tar::EntryType::GNULongLink => {}
            other => {
                return Err(format!(
                    "entry {} has unsupported type {other:?}",
                    path.display()
                ));
            }
        }
    }
    Ok(())
}

#[utoipa::path(post, path = "/api/v2/files", tag = "Files",
    request_body(content = codersdk::files::TarArchive, content_type = "application/x-tar"),
    responses((status = 201, body = UploadResponse), (status = 200, body = UploadResponse), (status = 400, body = codersdk::Response), (status = 413, body = codersdk::Response)))]
pub(super) async fn upload(
    State(state): State<AppState>,
    auth: Auth,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> ApiResult<(StatusCode, Json<UploadResponse>)> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type != CONTENT_TYPE_TAR && content_type != CONTENT_TYPE_ZIP {
        return Err(
            ApiError::bad_request("Unsupported content type.").with_detail(format!(
                "upload templates as {CONTENT_TYPE_TAR} or {CONTENT_TYPE_ZIP}, not {content_type:?}"
            )),
        );
    }
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "File is too large.").with_detail(format!(
                "template archives may be at most {} MiB",
                state.options.max_file_bytes >> 20
            ))
        } else {
            ApiError::bad_request("Could not read the upload.").with_detail(rejection.body_text())
        }
    })?;
    auth.authorize(
        Action::Create,
        &Object::owned(Resource::File, None, auth.user.id),
    )?;
    // Stored as tar whatever was sent, as Coder stores it: provisioners unpack only tar.
    let body = if content_type == CONTENT_TYPE_ZIP {
        Bytes::from(archive::zip_to_tar(&body).map_err(|e| {
            ApiError::bad_request("File is not a valid template archive.")
                .with_detail(e.to_string())
        })?)
    } else {
        body
    };
    validate_tar(&body).map_err(|detail| {
        ApiError::bad_request("File is not a valid template archive.").with_detail(detail)
    })?;
    let hash = hex::encode(Sha256::digest(&body));
    let (id, created) = state
        .store
        .insert_file(auth.user.id, &hash, CONTENT_TYPE_TAR, &body)
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(UploadResponse { hash: id })))
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct DownloadParams {
    #[serde(default)]
    format: String,
}

#[utoipa::path(get, path = "/api/v2/files/{id}", tag = "Files",
    params(("id" = Uuid, Path), ("format" = Option<String>, Query, description = "\"zip\" converts the archive to zip")),
    responses((status = 200, content_type = "application/x-tar"), (status = 400, body = codersdk::Response)))]
pub(super) async fn download(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<DownloadParams>,
) -> ApiResult<Response> {
    if !matches!(params.format.as_str(), "" | "zip") {
        return Err(
            ApiError::bad_request("Unsupported conversion format.").with_detail(format!(
                "format must be \"zip\" or absent, not {:?}",
                params.format
            )),
        );
    }
    let file = state.store.file_by_id(id).await?;
    let object = Object::owned(Resource::File, None, file.created_by);
    if !auth.can(Action::Read, &object) && !can_read_through_templates(&auth) {
        return Err(ApiError::not_found());
    }
    if params.format == "zip" {
        if file.mimetype != CONTENT_TYPE_TAR {
            return Err(ApiError::bad_request(
                "Only .tar files can be converted to .zip format.",
            ));
        }
        let zip = archive::tar_to_zip(&file.data).map_err(ApiError::internal)?;
        return Ok(([(header::CONTENT_TYPE, CONTENT_TYPE_ZIP)], zip).into_response());
    }
    Ok(([(header::CONTENT_TYPE, file.mimetype)], file.data).into_response())
}

/// Template authors read each other's archives (to pull a template); anyone who may update
/// templates in some organization may.
fn can_read_through_templates(auth: &Auth) -> bool {
    auth.subject
        .orgs
        .keys()
        .any(|org| auth.can(Action::Update, &Object::in_org(Resource::Template, *org)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            // set_path refuses `..`, so write the raw name to test what others might send.
            let name = header.as_old_mut().name.as_mut();
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *data).expect("append");
        }
        builder.into_inner().expect("finish")
    }

    #[test]
    fn archives_must_stay_inside_their_directory() {
        assert!(validate_tar(&tar_of(&[("main.tf", b"x"), ("dir/a.txt", b"y")])).is_ok());
        assert!(validate_tar(&tar_of(&[("../evil", b"x")])).is_err());
        assert!(validate_tar(&tar_of(&[("a/../../evil", b"x")])).is_err());
        assert!(validate_tar(&tar_of(&[("/etc/passwd", b"x")])).is_err());
        assert!(
            validate_tar(b"definitely not a tar archive, but long enough to look at it....")
                .is_err()
        );
    }
}
