//! Provisioner daemons (listing, and the endpoint they connect to), provisioner jobs and
//! provisioner keys.

use std::time::Duration;

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use codersdk::provisionerd::{
    DaemonMessage, KEY_HEADER, PROTOCOL_VERSION, PSK_HEADER, SCOPE_USER, ServeParams,
    ServerMessage, TAG_SCOPE, Tags,
};
use codersdk::provisioners::{
    CreateProvisionerKeyRequest, CreateProvisionerKeyResponse, ProvisionerDaemon, ProvisionerJob,
    ProvisionerKey,
};
use futures::{SinkExt, StreamExt};
use subtle::ConstantTimeEq;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::AppState;
use super::templates::PROVISIONERS;
use coderd_authz::{Action, Object, Resource};
use coderd_core::domain::{jobs, provisioner_jobs, provisioner_keys};
use coderd_core::provisioners::dispatch::Capability;
use coderd_core::provisioners::session::{self, SessionIo};
use coderd_core::provisioners::tags;
use coderd_http::error::{ApiError, ApiResult, Validator};
use coderd_http::extract::{
    Auth, Json, Path, Query, authenticate, empty_as_none, find_org, resolve_org, token_from_parts,
};
use coderd_store::{self as store, DaemonRow, NewDaemon, OrganizationRow};

/// A connection with no frame at all for this long is dead.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
const PING_INTERVAL: Duration = Duration::from_secs(15);

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/organizations/{organization}/provisionerdaemons",
            get(list_daemons),
        )
        .route(
            "/organizations/{organization}/provisionerdaemons/serve",
            get(serve),
        )
        .route(
            "/organizations/{organization}/provisionerjobs",
            get(list_jobs),
        )
        .route(
            "/organizations/{organization}/provisionerjobs/{job}",
            get(get_job),
        )
        .route(
            "/organizations/{organization}/provisionerkeys",
            get(list_keys).post(create_key),
        )
        .route(
            "/organizations/{organization}/provisionerkeys/{name}",
            axum::routing::delete(delete_key),
        )
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/provisionerdaemons", tag = "Provisioning",
    params(("organization" = String, Path)), responses((status = 200, body = [ProvisionerDaemon])))]
pub(super) async fn list_daemons(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
) -> ApiResult<Json<Vec<ProvisionerDaemon>>> {
    let org = resolve_org(&state, &auth, &org).await?;
    auth.authorize(
        Action::Read,
        &Object::in_org(Resource::ProvisionerDaemon, org.id),
    )?;
    let daemons = jobs::daemons(&state, &auth.subject, org.id).await?;
    Ok(Json(daemons))
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct JobListParams {
    #[serde(default)]
    status: Option<String>,
    #[serde(default, deserialize_with = "empty_as_none")]
    limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/provisionerjobs", tag = "Provisioning",
    params(("organization" = String, Path), ("status" = Option<String>, Query), ("limit" = Option<i64>, Query)),
    responses((status = 200, body = [ProvisionerJob])))]
pub(super) async fn list_jobs(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
    Query(params): Query<JobListParams>,
) -> ApiResult<Json<Vec<ProvisionerJob>>> {
    let org = resolve_org(&state, &auth, &org).await?;
    let statuses: Vec<String> = params
        .status
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let limit = params.limit.unwrap_or(0);
    Ok(Json(
        provisioner_jobs::list(&state, &auth.subject, &org, &statuses, limit).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/provisionerjobs/{job}", tag = "Provisioning",
    params(("organization" = String, Path), ("job" = Uuid, Path)), responses((status = 200, body = ProvisionerJob)))]
pub(super) async fn get_job(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, job)): Path<(String, Uuid)>,
) -> ApiResult<Json<ProvisionerJob>> {
    let org = resolve_org(&state, &auth, &org).await?;
    let row = provisioner_jobs::get(&state, &auth.subject, &org, job).await?;
    Ok(Json(jobs::render_one(&state, &row).await?.0))
}

#[utoipa::path(post, path = "/api/v2/organizations/{organization}/provisionerkeys", tag = "Provisioning",
    params(("organization" = String, Path)), request_body = CreateProvisionerKeyRequest,
    responses((status = 201, body = CreateProvisionerKeyResponse), (status = 400, body = codersdk::Response), (status = 409, body = codersdk::Response)))]
pub(super) async fn create_key(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
    Json(req): Json<CreateProvisionerKeyRequest>,
) -> ApiResult<(StatusCode, Json<CreateProvisionerKeyResponse>)> {
    let org = resolve_org(&state, &auth, &org).await?;
    let secret = provisioner_keys::create(&state, &auth.subject, &org, &req.name, req.tags).await?;
    Ok((
        StatusCode::CREATED,
        Json(CreateProvisionerKeyResponse { key: secret }),
    ))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/provisionerkeys", tag = "Provisioning",
    params(("organization" = String, Path)), responses((status = 200, body = [ProvisionerKey])))]
pub(super) async fn list_keys(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
) -> ApiResult<Json<Vec<ProvisionerKey>>> {
    let org = resolve_org(&state, &auth, &org).await?;
    Ok(Json(
        provisioner_keys::list(&state, &auth.subject, &org).await?,
    ))
}

#[utoipa::path(delete, path = "/api/v2/organizations/{organization}/provisionerkeys/{name}", tag = "Provisioning",
    params(("organization" = String, Path), ("name" = String, Path)), responses((status = 204)))]
pub(super) async fn delete_key(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, name)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let org = resolve_org(&state, &auth, &org).await?;
    provisioner_keys::delete(&state, &auth.subject, &org, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Who a connecting daemon is, once authenticated.
struct DaemonIdentity {
    org: OrganizationRow,
    tags: Tags,
    key_id: Option<Uuid>,
}

async fn authenticate_daemon(
    state: &AppState,
    org_param: &str,
    headers: &HeaderMap,
    parts_token: Option<String>,
    requested: Tags,
) -> ApiResult<DaemonIdentity> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    if let Some(secret) = header(KEY_HEADER) {
        let key = match state
            .store
            .provisioner_key_by_secret(&coderd_authz::auth::hash_secret(&secret))
            .await
        {
            Ok(key) => key,
            Err(store::Error::NotFound) => {
                return Err(ApiError::unauthorized("Invalid provisioner key."));
            }
            Err(e) => return Err(e.into()),
        };
        let org = if org_param == "default" {
            state.store.organization_by_id(key.organization_id).await?
        } else {
            find_org(state, org_param).await?
        };
        if org.id != key.organization_id {
            return Err(ApiError::forbidden()
                .with_detail("The provisioner key belongs to another organization."));
        }
        let key_tags: Tags = serde_json::from_value(key.tags).unwrap_or_default();
        let wanted = tags::normalize(requested.clone(), None);
        if !requested.is_empty() && wanted != key_tags {
            return Err(ApiError::bad_request("Tags come from the provisioner key.")
                .with_detail("A daemon authenticated with a provisioner key may not set its own tags; drop --tag."));
        }
        return Ok(DaemonIdentity {
            org,
            tags: key_tags,
            key_id: Some(key.id),
        });
    }
    if let Some(psk) = header(PSK_HEADER) {
        let Some(expected) = &state.options.provisioner_psk else {
            return Err(ApiError::unauthorized(
                "Pre-shared key authentication is not enabled on this deployment.",
            )
            .with_detail(
                "Start coder server with --provisioner-daemon-psk (CODER_PROVISIONER_DAEMON_PSK).",
            ));
        };
        if !bool::from(psk.as_bytes().ct_eq(expected.as_bytes())) {
            return Err(ApiError::unauthorized("Invalid pre-shared key."));
        }
        let org = find_org(state, org_param).await?;
        if !org.is_default {
            return Err(ApiError::forbidden().with_detail(
                "Pre-shared keys only authenticate daemons of the default organization.",
            ));
        }
        if requested.get(TAG_SCOPE).map(String::as_str) == Some(SCOPE_USER) {
            return Err(ApiError::bad_request(
                "Daemons authenticated with a pre-shared key are organization-scoped.",
            )
            .with_detail("Drop --tag scope=user, or authenticate with a session token."));
        }
        return Ok(DaemonIdentity {
            org,
            tags: tags::normalize(requested, None),
            key_id: None,
        });
    }
    let token = parts_token.ok_or_else(|| {
        ApiError::unauthorized("Provisioner daemons must authenticate.")
            .with_detail("Use a session token (CODER_SESSION_TOKEN), a provisioner key (--key) or the pre-shared key (--psk).")
    })?;
    let auth = authenticate(state, &token).await?;
    let org = find_org(state, org_param).await?;
    auth.authorize(
        Action::Read,
        &Object::in_org(Resource::Organization, org.id),
    )?;
    if requested.get(TAG_SCOPE).map(String::as_str) == Some(SCOPE_USER) {
        // Anyone may serve their own jobs; the owner is forced to them.
        return Ok(DaemonIdentity {
            org,
            tags: tags::normalize(requested, Some(auth.user.id)),
            key_id: None,
        });
    }
    auth.authorize(
        Action::Create,
        &Object::in_org(Resource::ProvisionerDaemon, org.id),
    )
    .map_err(|_| {
        ApiError::forbidden().with_detail(
            "Organization-scoped provisioner daemons need the Owner or Template Admin role; \
                 run one for your own workspaces with --tag scope=user.",
        )
    })?;
    Ok(DaemonIdentity {
        org,
        tags: tags::normalize(requested, None),
        key_id: None,
    })
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ServeQuery {
    #[serde(flatten)]
    params: ServeParams,
}

/// `GET /organizations/{org}/provisionerdaemons/serve`: a daemon's one connection.
pub(super) async fn serve(
    State(state): State<AppState>,
    Path(org): Path<String>,
    Query(query): Query<ServeQuery>,
    headers: HeaderMap,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    let (mut parts, _) = request.into_parts();
    let token = token_from_parts(&parts);
    let params = query.params;
    let requested: Tags = if params.tags.is_empty() {
        Tags::new()
    } else {
        serde_json::from_str(&params.tags).map_err(|e| {
            ApiError::bad_request("Invalid tags.")
                .with_detail(format!("tags must be a JSON object of strings: {e}"))
        })?
    };
    let their_major = params
        .protocol_version
        .split('.')
        .next()
        .unwrap_or_default();
    let our_major = PROTOCOL_VERSION.split('.').next().unwrap_or_default();
    if their_major != our_major {
        return Err(
            ApiError::bad_request("Incompatible provisioner daemon protocol.").with_detail(
                format!(
                    "coderd speaks {PROTOCOL_VERSION}, the daemon {:?}; run matching versions",
                    params.protocol_version
                ),
            ),
        );
    }
    let provisioners: Vec<String> = params
        .provisioners
        .split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    Validator::default()
        .push("name", coderd_core::validate::daemon_name(&params.name))
        .check(
            !provisioners.is_empty(),
            "provisioners",
            "at least one provisioner type is required",
        )
        .check(
            provisioners
                .iter()
                .all(|p| PROVISIONERS.contains(&p.as_str())),
            "provisioners",
            format!("must be among {}", PROVISIONERS.join(", ")),
        )
        .push(
            "tags",
            tags::validate(&requested).map_err(|e| e.to_string()),
        )
        .finish()?;
    let identity = authenticate_daemon(&state, &org, &headers, token, requested).await?;
    let ws = WebSocketUpgrade::from_request_parts(&mut parts, &state)
        .await
        .map_err(|e| {
            ApiError::bad_request("This endpoint needs a WebSocket upgrade.")
                .with_detail(e.body_text())
        })?;
    let owner_key = identity.tags.get("owner").cloned().unwrap_or_default();
    let row = state
        .store
        .upsert_daemon(&NewDaemon {
            organization_id: identity.org.id,
            name: params.name,
            owner_key,
            provisioners: provisioners.clone(),
            tags: serde_json::to_value(&identity.tags).unwrap_or_default(),
            version: params.version,
            api_version: params.protocol_version,
            key_id: identity.key_id,
        })
        .await?;
    let capability = Capability {
        org: identity.org.id,
        provisioners,
        keys: tags::acceptable_keys(&identity.tags),
    };
    Ok(ws
        .on_upgrade(move |socket| pump(state, row, capability, socket))
        .into_response())
}

/// A message as a text frame, written into a buffer of its size: a job carries megabytes of
/// base64, and growing a buffer to that size would allocate (and copy) it several times.
fn text_frame(msg: &ServerMessage) -> Option<Message> {
    let mut json = Vec::with_capacity(msg.json_len_hint());
    serde_json::to_writer(&mut json, msg).ok()?;
    String::from_utf8(json)
        .ok()
        .map(|text| Message::Text(text.into()))
}

/// Carries a daemon session over a WebSocket: JSON text frames both ways, pings, and a dead
/// connection noticed within [`IDLE_TIMEOUT`].
async fn pump(state: AppState, daemon: DaemonRow, capability: Capability, socket: WebSocket) {
    let (in_tx, in_rx) = mpsc::channel::<DaemonMessage>(64);
    let (out_tx, mut out_rx) = mpsc::channel::<ServerMessage>(64);
    let (mut sink, mut stream) = socket.split();
    let shutdown = state.shutdown.child_token();
    let session = tokio::spawn(session::run(
        state.clone(),
        daemon,
        capability,
        SessionIo {
            incoming: in_rx,
            outgoing: out_tx,
        },
        shutdown.clone(),
    ));
    let writer = tokio::spawn(async move {
        let mut ping = tokio::time::interval(PING_INTERVAL);
        loop {
            let frame = tokio::select! {
                msg = out_rx.recv() => match msg {
                    Some(msg) => match text_frame(&msg) {
                        Some(frame) => frame,
                        None => continue,
                    },
                    None => break,
                },
                _ = ping.tick() => Message::Ping(Vec::new().into()),
            };
            if sink.send(frame).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    loop {
        let frame = match tokio::time::timeout(IDLE_TIMEOUT, stream.next()).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(_) => break,
            Err(_) => {
                tracing::warn!(
                    "provisioner daemon connection silent for {IDLE_TIMEOUT:?}; closing it"
                );
                break;
            }
        };
        match frame {
            Message::Text(text) => match serde_json::from_str::<DaemonMessage>(&text) {
                Ok(msg) => {
                    if in_tx.send(msg).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "provisioner daemon sent an unreadable message; closing");
                    break;
                }
            },
            Message::Close(_) => break,
            _ => {}
        }
    }
    drop(in_tx);
    let _ = session.await;
    writer.abort();
    shutdown.cancel();
}
