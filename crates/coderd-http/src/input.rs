//! The edge of the API for what callers send: JSON bodies, query strings and path segments.
//!
//! Every rejection answers Coder's `{message, detail, validations}` naming the field, and every
//! string a request carries (body strings and keys, query keys and values, path segments) passes
//! [`validate::storable`] here, once, so no handler can hand PostgreSQL a NUL.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, RawPathParamsRejection};
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use codersdk::ValidationError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use coderd_core::validate;

/// A JSON request body or response. Unlike axum's, any content type is accepted (as Coder
/// does); the body must be a JSON object (serde would otherwise read a struct from an array);
/// malformed bodies answer 400 and oversized ones 413.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(body_rejection)?;
        parse_body(&bytes).map(Json)
    }
}

/// Where a response's serialisation starts: about one rendered workspace. axum's starts at
/// 128 bytes, so a workspace (~4 KiB) was copied through six reallocations and a page of 25
/// through eleven, a visible share of a read's CPU.
const RESPONSE_CAPACITY: usize = 8 * 1024;

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        let mut buf = Vec::with_capacity(RESPONSE_CAPACITY);
        match serde_json::to_writer(&mut buf, &self.0) {
            Ok(()) => (
                [(
                    axum::http::header::CONTENT_TYPE,
                    axum::http::HeaderValue::from_static("application/json"),
                )],
                buf,
            )
                .into_response(),
            // What axum's Json answers: only a type that cannot be JSON (a map with non-string
            // keys) gets here, a bug rather than a caller's error.
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    }
}

fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "Request body is too large.")
            .with_detail(rejection.body_text())
    } else {
        ApiError::bad_request("Could not read the request body.").with_detail(rejection.body_text())
    }
}

const INVALID_JSON: &str = "Request body must be valid JSON.";

/// A request body: a JSON object whose strings PostgreSQL can store, read as `T`.
pub fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(INVALID_JSON).with_detail(e.to_string()))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("Request body must be a JSON object.")
            .with_detail(format!("got {}", json_kind(&value))));
    }
    let mut invalid = Vec::new();
    unstorable_strings(&value, &mut String::new(), &mut invalid);
    if !invalid.is_empty() {
        return Err(ApiError::validation(invalid));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let detail = e.inner().to_string();
        let mut err = ApiError::bad_request(INVALID_JSON).with_detail(detail.clone());
        if field != "." {
            err.body.validations.push(ValidationError { field, detail });
        }
        err
    })
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Collects a validation for every string (object keys included) PostgreSQL cannot store,
/// naming it by its path (`tags.region`, `rich_parameter_values[0].value`).
fn unstorable_strings(value: &Value, path: &mut String, out: &mut Vec<ValidationError>) {
    match value {
        Value::String(s) => push_unstorable(path, s, out),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                unstorable_strings(item, path, out);
                path.truncate(len);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                push_unstorable(path, key, out);
                unstorable_strings(item, path, out);
                path.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn push_unstorable(field: &str, s: &str, out: &mut Vec<ValidationError>) {
    if let Err(detail) = validate::storable(s) {
        out.push(ValidationError {
            field: field.replace('\0', "\\u0000"),
            detail,
        });
    }
}

/// A query string, failing with Coder's error shape and naming the parameter.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let pairs = url::form_urlencoded::parse(query.as_bytes());
        let mut invalid = Vec::new();
        for (key, value) in pairs {
            push_unstorable(&key, &key, &mut invalid);
            push_unstorable(&key, &value, &mut invalid);
        }
        if !invalid.is_empty() {
            return Err(ApiError::validation(invalid));
        }
        let deserializer = serde_urlencoded::Deserializer::new(pairs);
        serde_path_to_error::deserialize(deserializer)
            .map(Query)
            .map_err(|e| {
                let detail = e.inner().to_string();
                let mut err =
                    ApiError::bad_request("Invalid query parameters.").with_detail(detail.clone());
                let field = match e.path().to_string() {
                    path if path != "." => Some(path),
                    _ => culprit::<T>(query, &detail),
                };
                if let Some(field) = field {
                    err.body.validations.push(ValidationError { field, detail });
                }
                err
            })
    }
}

/// The parameter that made `query` fail with `detail`, when the path to it was lost (serde's
/// `flatten` hides it): the one whose removal changes the outcome. Short queries only, since
/// each guess parses the query again.
fn culprit<T: DeserializeOwned>(query: &str, detail: &str) -> Option<String> {
    const MAX_GUESSES: usize = 16;
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    if pairs.len() > MAX_GUESSES {
        return None;
    }
    pairs.iter().map(|(key, _)| key).find_map(|key| {
        let rest: Vec<&(String, String)> = pairs.iter().filter(|(k, _)| k != key).collect();
        let encoded = serde_urlencoded::to_string(&rest).ok()?;
        match serde_urlencoded::from_str::<T>(&encoded) {
            Err(e) if e.to_string() == detail => None,
            _ => Some(key.clone()),
        }
    })
}

/// Path parameters, failing with Coder's error shape and naming the parameter (a malformed
/// UUID is a 400, as in Coder, never axum's `text/plain`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let raw = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(raw_path_rejection)?;
        let names: Vec<String> = raw.iter().map(|(name, _)| name.to_string()).collect();
        let mut invalid = Vec::new();
        for (name, value) in &raw {
            push_unstorable(name, value, &mut invalid);
        }
        if !invalid.is_empty() {
            return Err(ApiError::validation(invalid));
        }
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Path(value))
            .map_err(|rejection| path_rejection(rejection, &names))
    }
}

fn raw_path_rejection(rejection: RawPathParamsRejection) -> ApiError {
    match rejection {
        RawPathParamsRejection::InvalidUtf8InPathParam(e) => {
            ApiError::bad_request("Invalid path parameter.").with_detail(e.body_text())
        }
        other => ApiError::internal(other.body_text()),
    }
}

fn path_rejection(rejection: PathRejection, names: &[String]) -> ApiError {
    use axum::extract::path::ErrorKind;
    let PathRejection::FailedToDeserializePathParams(failed) = rejection else {
        return ApiError::internal(rejection.body_text());
    };
    let (field, value, expected) = match failed.kind() {
        ErrorKind::ParseErrorAtKey {
            key,
            value,
            expected_type,
        } => (key.clone(), value.clone(), *expected_type),
        // Types with their own parser (UUIDs) fail here, with their parser's words.
        ErrorKind::DeserializeError {
            key,
            value,
            message,
        } => {
            let expected = if message.contains("UUID") {
                "Uuid"
            } else {
                message.as_str()
            };
            return invalid_path_param(key.clone(), value, expected);
        }
        ErrorKind::ParseErrorAtIndex {
            index,
            value,
            expected_type,
        } => (
            names.get(*index).cloned().unwrap_or_default(),
            value.clone(),
            *expected_type,
        ),
        ErrorKind::ParseError {
            value,
            expected_type,
        } => (
            names.first().cloned().unwrap_or_default(),
            value.clone(),
            *expected_type,
        ),
        ErrorKind::InvalidUtf8InPathParam { key } => (key.clone(), String::new(), "UTF-8 text"),
        _ => return ApiError::internal(failed.body_text()),
    };
    invalid_path_param(field, &value, expected)
}

fn invalid_path_param(field: String, value: &str, expected: &str) -> ApiError {
    let expected = describe_type(expected);
    let mut err = ApiError::bad_request(format!("Invalid {field} {value:?}."))
        .with_detail(format!("{field} must be {expected}"));
    err.body.validations.push(ValidationError {
        field,
        detail: format!("must be {expected}"),
    });
    err
}

fn describe_type(rust_type: &str) -> &str {
    match rust_type.rsplit("::").next().unwrap_or(rust_type) {
        "Uuid" => "a UUID",
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "usize" | "isize" => {
            "an integer"
        }
        "bool" => "true or false",
        other => other,
    }
}
