//! The HTTP client every provider call goes through: our reqwest, with redirects never
//! followed (a provider's token or userinfo endpoint that redirects is misbehaving, and
//! following it would let a URL in provider metadata steer coderd's requests) and a timeout,
//! so a hung provider cannot hold a login open forever.

use std::pin::Pin;
use std::time::Duration;

use openidconnect::{HttpRequest, HttpResponse};

/// A cheap-to-clone HTTP client for provider calls.
#[derive(Debug, Clone)]
pub struct HttpClient {
    inner: reqwest::Client,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpError(String);

impl HttpClient {
    pub fn new() -> Result<Self, crate::Error> {
        let inner = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(15))
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("coder-rs/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| crate::Error::Config(format!("building the HTTP client: {e}")))?;
        Ok(Self { inner })
    }

    /// Performs one request for the `openidconnect`/`oauth2` crates.
    pub(crate) async fn execute(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let (parts, body) = request.into_parts();
        let response = self
            .inner
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .map_err(|e| HttpError(without_url(e).to_string()))?;
        let mut builder = http::Response::builder().status(response.status());
        if let Some(headers) = builder.headers_mut() {
            headers.extend(response.headers().clone());
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| HttpError(without_url(e).to_string()))?;
        builder
            .body(body.to_vec())
            .map_err(|e| HttpError(e.to_string()))
    }

    /// GETs a JSON document from a provider's API with an access token. `Ok(None)` for a 404
    /// (GitHub's answer for "not a member" as much as "no such thing").
    pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: url::Url,
        access_token: &str,
        accept: &str,
    ) -> Result<Option<T>, crate::Error> {
        let what = url.path().to_string();
        let response = self
            .inner
            .get(url)
            .bearer_auth(access_token)
            .header(reqwest::header::ACCEPT, accept)
            .send()
            .await
            .map_err(|e| crate::Error::Unavailable(format!("{what}: {}", without_url(e))))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(crate::Error::Refused(format!(
                "{what} answered {status} (the access token was refused or lacks a scope)"
            )));
        }
        if !status.is_success() {
            return Err(crate::Error::Unavailable(format!(
                "{what} answered {status}"
            )));
        }
        response
            .json()
            .await
            .map(Some)
            .map_err(|e| crate::Error::Unavailable(format!("{what}: {}", without_url(e))))
    }

    pub(crate) fn inner(&self) -> &reqwest::Client {
        &self.inner
    }

    /// POSTs a form (the device flow's and revocation's requests), authenticating the client
    /// as configured, and reads the whole answer whatever its status.
    pub(crate) async fn post_form(
        &self,
        url: url::Url,
        form: &[(&str, String)],
        client: Option<ClientCredentials<'_>>,
    ) -> Result<RawResponse, crate::Error> {
        let what = url.path().to_string();
        let mut fields: Vec<(&str, String)> = form.to_vec();
        let mut request = self
            .inner
            .post(url)
            .header(reqwest::header::ACCEPT, "application/json");
        match client {
            // A public client (no secret) proves nothing beyond its id, which the form has.
            Some(c) if c.secret.is_empty() => {}
            Some(c) if c.in_body => {
                fields.retain(|(name, _)| *name != "client_id");
                fields.push(("client_id", c.id.to_string()));
                fields.push(("client_secret", c.secret.to_string()));
            }
            Some(c) => request = request.basic_auth(c.id, Some(c.secret)),
            None => {}
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        let response = request
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
            .send()
            .await
            .map_err(|e| crate::Error::Unavailable(format!("{what}: {}", without_url(e))))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| crate::Error::Unavailable(format!("{what}: {}", without_url(e))))?;
        Ok(RawResponse {
            status,
            body: body.to_vec(),
        })
    }

    /// The closure form the `openidconnect` crate takes as its async client.
    pub(crate) fn adapter(
        &self,
    ) -> impl Fn(
        HttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send>>
    + use<> {
        let this = self.clone();
        move |request| {
            let this = this.clone();
            Box::pin(async move { this.execute(request).await })
        }
    }
}

/// How a client authenticates itself to the provider's endpoints.
#[derive(Clone, Copy)]
pub(crate) struct ClientCredentials<'a> {
    pub id: &'a str,
    pub secret: &'a str,
    /// In the form rather than as HTTP Basic authentication.
    pub in_body: bool,
}

/// A provider's answer, read whole.
pub(crate) struct RawResponse {
    pub status: reqwest::StatusCode,
    pub body: Vec<u8>,
}

/// Request URLs may carry codes or tokens in their query; errors are logged, so drop the URL.
fn without_url(e: reqwest::Error) -> reqwest::Error {
    e.without_url()
}
