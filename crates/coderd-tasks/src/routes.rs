//! The front door of tasks: Coder's `/api/v2/tasks` endpoints.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use codersdk::tasks::{
    CreateTaskRequest, Task, TaskLogsResponse, TaskSendRequest, TasksListResponse,
};

use coderd_core::state::AppState;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path, Query};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/tasks", get(list))
        .route("/tasks/{user}", post(create))
        .route("/tasks/{user}/{task}", get(read).delete(remove))
        .route("/tasks/{user}/{task}/send", post(send))
        .route("/tasks/{user}/{task}/logs", get(logs))
}

#[utoipa::path(post, path = "/api/v2/tasks/{user}", tag = "Tasks",
    params(("user" = String, Path, description = "Username, user ID, or 'me' for the authenticated user")),
    request_body = CreateTaskRequest,
    responses((status = 201, body = Task),
        (status = 400, description = "The template version has no `coder_ai_task`, or a field is invalid.", body = codersdk::Response),
        (status = 409, description = "The owner has a workspace of that name.", body = codersdk::Response)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(req): Json<CreateTaskRequest>,
) -> ApiResult<(StatusCode, Json<Task>)> {
    let task = super::create(&state, &auth.subject, &user, &req).await?;
    Ok((StatusCode::CREATED, Json(task)))
}

#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct ListParams {
    #[serde(default)]
    q: String,
}

#[utoipa::path(get, path = "/api/v2/tasks", tag = "Tasks",
    params(("q" = Option<String>, Query, description = "Search query: owner:<username/uuid/me>, organization:<org-name/uuid>, status:<status>")),
    responses((status = 200, body = TasksListResponse)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<TasksListResponse>> {
    let tasks = super::list(&state, &auth.subject, &params.q).await?;
    Ok(Json(TasksListResponse {
        count: tasks.len() as i64,
        tasks,
    }))
}

#[utoipa::path(get, path = "/api/v2/tasks/{user}/{task}", tag = "Tasks",
    params(("user" = String, Path, description = "Username, user ID, or 'me' for the authenticated user"),
        ("task" = String, Path, description = "Task ID, or task name")),
    responses((status = 200, body = Task)))]
pub(crate) async fn read(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, task)): Path<(String, String)>,
) -> ApiResult<Json<Task>> {
    Ok(Json(super::get(&state, &auth.subject, &user, &task).await?))
}

#[utoipa::path(delete, path = "/api/v2/tasks/{user}/{task}", tag = "Tasks",
    params(("user" = String, Path, description = "Username, user ID, or 'me' for the authenticated user"),
        ("task" = String, Path, description = "Task ID, or task name")),
    responses((status = 202, description = "The task is deleted and its workspace's delete build queued."),
        (status = 409, description = "The workspace has a build in progress.", body = codersdk::Response)))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, task)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    super::delete(&state, &auth.subject, &user, &task).await?;
    Ok(StatusCode::ACCEPTED)
}

impl From<super::AppError> for ApiError {
    #[track_caller]
    fn from(e: super::AppError) -> Self {
        match e {
            super::AppError::Domain(e) => e.into(),
            super::AppError::Gateway { message, detail } => {
                ApiError::new(StatusCode::BAD_GATEWAY, message).with_detail(detail)
            }
        }
    }
}

#[utoipa::path(post, path = "/api/v2/tasks/{user}/{task}/send", tag = "Tasks",
    params(("user" = String, Path, description = "Username, user ID, or 'me' for the authenticated user"),
        ("task" = String, Path, description = "Task ID, or task name")),
    request_body = TaskSendRequest,
    responses((status = 204, description = "The input was submitted to the task's AI agent."),
        (status = 400, description = "The input is empty, the task is not active (error or unknown), or its app cannot be reached (not plain HTTP on the workspace's loopback).", body = codersdk::Response),
        (status = 409, description = "The task is pending, initializing or paused.", body = codersdk::Response),
        (status = 502, description = "The task's app could not be reached, is busy (its agent is running), or refused the message.", body = codersdk::Response)))]
pub(crate) async fn send(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, task)): Path<(String, String)>,
    Json(req): Json<TaskSendRequest>,
) -> ApiResult<StatusCode> {
    super::send(&state, &auth.subject, &user, &task, &req.input).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v2/tasks/{user}/{task}/logs", tag = "Tasks",
    params(("user" = String, Path, description = "Username, user ID, or 'me' for the authenticated user"),
        ("task" = String, Path, description = "Task ID, or task name")),
    responses((status = 200, description = "The conversation, live from an active task's app; an empty snapshot for a pending, initializing or paused task.", body = TaskLogsResponse),
        (status = 400, description = "The task's app cannot be reached (not plain HTTP on the workspace's loopback).", body = codersdk::Response),
        (status = 409, description = "The task failed or its state is unknown.", body = codersdk::Response),
        (status = 502, description = "The task's app could not be reached or answered something unusable.", body = codersdk::Response)))]
pub(crate) async fn logs(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, task)): Path<(String, String)>,
) -> ApiResult<Json<TaskLogsResponse>> {
    Ok(Json(
        super::logs(&state, &auth.subject, &user, &task).await?,
    ))
}
