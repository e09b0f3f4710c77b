//! What the document says about many operations at once, derived rather than repeated on each
//! handler: the error responses the extractors and authentication give every operation, the
//! session-token security scheme, and the limits of the request bodies' fields (from
//! `coderd_http::requests::DOCUMENTED`, the table the handlers' checks use).

use utoipa::Modify;
use utoipa::openapi::path::{HttpMethod, Operation};
use utoipa::openapi::schema::{Object, Schema, SchemaType, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Response};

use coderd_http::requests::{DOCUMENTED, Limit};

/// Operations anyone may call.
const UNAUTHENTICATED: &[(&str, HttpMethod)] = &[
    ("/api/v2/buildinfo", HttpMethod::Get),
    ("/api/v2/users/first", HttpMethod::Get),
    ("/api/v2/users/first", HttpMethod::Post),
    ("/api/v2/users/login", HttpMethod::Post),
    ("/api/v2/users/validate-password", HttpMethod::Post),
    ("/api/v2/updatecheck", HttpMethod::Get),
    ("/api/v2/auth/scopes", HttpMethod::Get),
    ("/api/v2/csp/reports", HttpMethod::Post),
];

const SESSION_TOKEN: &str = "CoderSessionToken";

/// The error responses every operation of a kind can give.
pub struct Errors;

/// What about an operation decides which generic errors it can give.
struct Shape {
    /// It has path or query parameters, or a body: the extractors may refuse them.
    input: bool,
    /// It needs a session token.
    authenticated: bool,
    /// Its path names a resource, which may not exist or be visible.
    resource: bool,
    /// It reads a body, which may be too large.
    body: bool,
}

/// Status, name in `components.responses`, description, and which operations give it.
type GenericError = (&'static str, &'static str, &'static str, fn(&Shape) -> bool);

const ERRORS: &[GenericError] = &[
    (
        "400",
        "BadRequest",
        "A path segment, query parameter or body field is invalid; `validations` names each.",
        |s| s.input,
    ),
    (
        "401",
        "Unauthorized",
        "No session token, or an invalid or expired one.",
        |s| s.authenticated,
    ),
    // Authorisation runs on every authenticated operation: a member asking for what only an
    // admin may do (list provisioner keys, suspend a user, edit a template) gets 403.
    (
        "403",
        "Forbidden",
        "The caller is signed in but may not do this.",
        |s| s.authenticated,
    ),
    (
        "404",
        "NotFound",
        "The resource does not exist, or the caller may not see it.",
        |s| s.resource,
    ),
    (
        "413",
        "PayloadTooLarge",
        "The request body is too large.",
        |s| s.body,
    ),
];

impl Modify for Errors {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (_, name, description, _) in ERRORS {
            components
                .responses
                .insert((*name).into(), error_response(description));
        }
        for (path, item) in openapi.paths.paths.iter_mut() {
            for (method, op) in operations(item) {
                let shape = Shape {
                    input: op.parameters.as_ref().is_some_and(|p| !p.is_empty())
                        || op.request_body.is_some(),
                    authenticated: !UNAUTHENTICATED.contains(&(path.as_str(), method)),
                    resource: path.contains('{'),
                    body: op.request_body.is_some(),
                };
                for (status, name, _, gives) in ERRORS {
                    if gives(&shape) {
                        op.responses
                            .responses
                            .entry((*status).into())
                            .or_insert_with(|| {
                                RefOr::Ref(Ref::new(format!("#/components/responses/{name}")))
                            });
                    }
                }
            }
        }
    }
}

fn error_response(description: &str) -> RefOr<Response> {
    let mut response = Response::new(description);
    response.content.insert(
        "application/json".into(),
        RefOr::T(Content::new(Some(Ref::from_schema_name("Response")))),
    );
    RefOr::T(response)
}

fn operations(item: &mut utoipa::openapi::PathItem) -> Vec<(HttpMethod, &mut Operation)> {
    [
        (HttpMethod::Get, item.get.as_mut()),
        (HttpMethod::Put, item.put.as_mut()),
        (HttpMethod::Post, item.post.as_mut()),
        (HttpMethod::Delete, item.delete.as_mut()),
        (HttpMethod::Patch, item.patch.as_mut()),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.map(|op| (method, op)))
    .collect()
}

/// The session token (header `Coder-Session-Token`; the cookie and bearer forms work too) on
/// every operation that needs one.
pub struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            SESSION_TOKEN,
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new(
                codersdk::client::SESSION_TOKEN_HEADER,
            ))),
        );
        for (path, item) in openapi.paths.paths.iter_mut() {
            for (method, op) in operations(item) {
                op.security = Some(if UNAUTHENTICATED.contains(&(path.as_str(), method)) {
                    Vec::new()
                } else {
                    vec![SecurityRequirement::new(
                        SESSION_TOKEN,
                        std::iter::empty::<String>(),
                    )]
                });
            }
        }
    }
}

/// The request bodies' field limits.
pub struct Limits;

impl Modify for Limits {
    fn modify(&self, openapi: &mut OpenApi) {
        let missing = apply_limits(openapi);
        if !missing.is_empty() {
            tracing::error!(
                ?missing,
                "request limits name properties the document lacks"
            );
        }
    }
}

/// Writes every limit into its property; returns the (schema, property) pairs not found.
fn apply_limits(openapi: &mut OpenApi) -> Vec<String> {
    let mut missing = Vec::new();
    let Some(components) = openapi.components.as_mut() else {
        return vec!["components".into()];
    };
    for (schema, limits) in DOCUMENTED {
        let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(*schema) else {
            missing.push((*schema).to_string());
            continue;
        };
        for (property, limit) in *limits {
            match object.properties.get_mut(*property) {
                Some(RefOr::T(Schema::Object(prop))) => apply(prop, *limit),
                _ => missing.push(format!("{schema}.{property}")),
            }
        }
    }
    missing
}

fn apply(prop: &mut Object, limit: Limit) {
    match limit {
        Limit::Text { min, max, pattern } => {
            prop.min_length = (min > 0).then_some(min);
            prop.max_length = Some(max);
            prop.pattern = pattern.map(str::to_string);
        }
        Limit::Int { min, max } => {
            let number = |v: i64| utoipa::Number::Int(isize::try_from(v).unwrap_or(isize::MAX));
            prop.minimum = Some(number(min));
            prop.maximum = Some(number(max));
        }
        Limit::OneOf { values, empty } => {
            let mut allowed: Vec<serde_json::Value> = values.iter().map(|v| (*v).into()).collect();
            if empty {
                allowed.push("".into());
            }
            if matches!(&prop.schema_type, SchemaType::Array(types) if types.contains(&Type::Null))
            {
                allowed.push(serde_json::Value::Null);
            }
            prop.enum_values = Some(allowed);
        }
    }
}

#[cfg(test)]
mod tests {
    use utoipa::OpenApi as _;

    use super::*;

    #[test]
    fn every_documented_limit_finds_its_property() {
        let mut doc = super::super::ApiDoc::openapi();
        assert_eq!(apply_limits(&mut doc), Vec::<String>::new());
    }
}
