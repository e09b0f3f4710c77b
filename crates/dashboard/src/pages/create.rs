//! `/templates/{name}/workspace`: the create form, rendered from the active version's rich
//! parameters; submitted values go to `domain::builds::create_workspace`, whose validation
//! errors come back beside their fields. A GET never builds anything.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, Query, RawForm, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use coderd_core::domain::{builds, parameters, resolve};
use coderd_core::state::AppState;
use coderd_store::TemplateRow;
use codersdk::proto::RichParameter;
use codersdk::workspaces::{CreateWorkspaceRequest, WorkspaceBuildParameter};

use super::FieldErrors;
use crate::error::{PageError, PageResult};
use crate::session::Viewer;
use crate::view::Chrome;

/// One parameter's input, with its current value and error.
pub struct Field {
    pub p: RichParameter,
    pub label: String,
    pub value: String,
    pub error: String,
    /// `select`, `radio`, `textarea`, `checkbox`, `number` or `text`.
    pub widget: &'static str,
}

fn widget(p: &RichParameter) -> &'static str {
    use codersdk::proto::ParameterFormType as F;
    match (p.kind.as_str(), p.form_type) {
        ("bool", _) => "checkbox",
        (_, F::Radio) if !p.options.is_empty() => "radio",
        (_, F::Textarea) => "textarea",
        _ if !p.options.is_empty() => "select",
        ("number", _) => "number",
        _ => "text",
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "create.html")]
pub struct CreatePage {
    chrome: Chrome,
    template: TemplateRow,
    name: String,
    name_error: String,
    fields: Vec<Field>,
    other_errors: Vec<String>,
    /// The external auth providers the template needs, and whether the viewer is linked.
    external_auth: Vec<codersdk::externalauth::TemplateVersionExternalAuth>,
    /// A provider the template needs is not linked: the form cannot be sent yet.
    blocked: bool,
}

/// The template, looked up by name in the viewer's organizations (the default one first).
pub(crate) async fn find_template(
    state: &AppState,
    viewer: &Viewer,
    name: &str,
) -> PageResult<TemplateRow> {
    let default = resolve::find_organization(state, "default").await?;
    let mut orgs: Vec<uuid::Uuid> = vec![default.id];
    orgs.extend(viewer.subject().orgs.keys().filter(|o| **o != default.id));
    for org in orgs {
        match resolve::template_by_name(state, viewer.subject(), org, name).await {
            Ok(t) => return Ok(t),
            Err(coderd_core::domain::Error::NotFound) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(PageError::NotFound)
}

async fn render(
    state: &AppState,
    viewer: &Viewer,
    template: TemplateRow,
    values: &[(String, String)],
    errors: FieldErrors,
) -> PageResult<CreatePage> {
    let version = resolve::version(state, viewer.subject(), template.active_version_id).await?;
    let wanted: Vec<codersdk::proto::ExternalAuthProviderResource> =
        serde_json::from_value(version.external_auth_providers.clone()).unwrap_or_default();
    let external_auth =
        coderd_core::external_auth::for_template_version(state, viewer.session.user.id, &wanted)
            .await?;
    let blocked = external_auth
        .iter()
        .any(|p| !p.authenticated && !p.optional);
    let mut declared = parameters::declared(&version);
    declared.sort_by_key(|p| p.order);
    let value_of = |key: &str| {
        values
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let mut shown = vec!["name".to_owned()];
    let fields = declared
        .into_iter()
        .map(|p| {
            let key = format!("param.{}", p.name);
            let error_key = format!("rich_parameter_values.{}", p.name);
            shown.push(error_key.clone());
            Field {
                label: if p.display_name.is_empty() {
                    p.name.clone()
                } else {
                    p.display_name.clone()
                },
                value: value_of(&key).unwrap_or_else(|| p.default_value.clone()),
                error: errors.get(&error_key).to_owned(),
                widget: widget(&p),
                p,
            }
        })
        .collect();
    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
    Ok(CreatePage {
        chrome: Chrome::of(viewer),
        name: value_of("name").unwrap_or_default(),
        name_error: errors.get("name").to_owned(),
        other_errors: errors.others(&shown),
        template,
        fields,
        external_auth,
        blocked,
    })
}

/// `?name=` and `param.X=` prefill the form (Coder's links do this); nothing is built.
pub async fn form(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(template): Path<String>,
    Query(values): Query<Vec<(String, String)>>,
) -> PageResult<CreatePage> {
    let template = find_template(&state, &viewer, &template).await?;
    render(&state, &viewer, template, &values, FieldErrors::default()).await
}

pub async fn submit(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(template): Path<String>,
    RawForm(body): RawForm,
) -> PageResult<Response> {
    // Repeated keys (a multi-select) are kept, so the body is read as pairs.
    let values: Vec<(String, String)> = serde_urlencoded::from_bytes(&body)
        .map_err(|e| PageError::BadRequest(format!("Unreadable form: {e}")))?;
    let get = |key: &str| {
        values
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    viewer.check_form(&headers, get("csrf"))?;
    let template = find_template(&state, &viewer, &template).await?;
    let version = resolve::version(&state, viewer.subject(), template.active_version_id).await?;
    let declared = parameters::declared(&version);
    let rich_parameter_values = declared
        .iter()
        .filter_map(|p| {
            let key = format!("param.{}", p.name);
            let given: Vec<&str> = values
                .iter()
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v.as_str())
                .collect();
            let value = match p.kind.as_str() {
                // An unchecked box sends nothing: false.
                "bool" => if given.is_empty() { "false" } else { "true" }.to_owned(),
                "list(string)" => serde_json::to_string(&given).unwrap_or_default(),
                _ => given.first()?.to_string(),
            };
            Some(WorkspaceBuildParameter {
                name: p.name.clone(),
                value,
            })
        })
        .collect();
    let req = CreateWorkspaceRequest {
        template_id: Some(template.id),
        name: get("name").trim().to_owned(),
        rich_parameter_values,
        ..Default::default()
    };
    let owner = viewer.session.user.id;
    match builds::create_workspace(
        &state,
        viewer.subject(),
        owner,
        Some(template.organization_id),
        &req,
    )
    .await
    {
        Ok(ws) => Ok(Redirect::to(&format!("/@{}/{}", viewer.username(), ws.name)).into_response()),
        Err(coderd_core::domain::Error::Validation(v)) => {
            let errors = FieldErrors::from_validations(v);
            let page = render(&state, &viewer, template, &values, errors).await?;
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
        Err(coderd_core::domain::Error::Conflict { message, .. }) => {
            let mut errors = FieldErrors::default();
            errors.push("name", message);
            let page = render(&state, &viewer, template, &values, errors).await?;
            Ok((StatusCode::CONFLICT, page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}
