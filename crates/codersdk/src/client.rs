//! The typed HTTP client: one `Client` per deployment and token. Endpoint methods live beside
//! their types (`impl Client` blocks in each resource module).

use reqwest::{Method, StatusCode};
use serde::{Serialize, de::DeserializeOwned};
use url::Url;

use crate::error::{ClientError, Response};

/// The header Coder clients send their token in.
pub const SESSION_TOKEN_HEADER: &str = "Coder-Session-Token";
/// The cookie the dashboard keeps the token in.
pub const SESSION_TOKEN_COOKIE: &str = "coder_session_token";

#[derive(Clone)]
pub struct Client {
    url: Url,
    token: Option<String>,
    /// Sent with every request, WebSocket upgrades included: what `--header` and
    /// `--header-command` ask for (a proxy in front of the deployment may want its own).
    headers: reqwest::header::HeaderMap,
    http: reqwest::Client,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url.as_str())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Client {
    pub fn new(url: Url) -> Self {
        let http = reqwest::Client::builder()
            .user_agent(concat!("coder-rs/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self {
            url,
            token: None,
            headers: reqwest::header::HeaderMap::new(),
            http,
        }
    }

    /// Adds `headers` to every request from now on.
    pub fn with_headers(mut self, headers: reqwest::header::HeaderMap) -> Self {
        self.headers.extend(headers);
        self
    }

    pub fn headers(&self) -> &reqwest::header::HeaderMap {
        &self.headers
    }

    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    pub fn set_token(&mut self, token: Option<String>) {
        self.token = token;
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Resolves `path` (which starts with `/`) against the deployment URL, keeping any base path.
    pub fn endpoint(&self, path: &str) -> Result<Url, ClientError> {
        let base = self.url.as_str().trim_end_matches('/');
        Ok(Url::parse(&format!("{base}{path}"))?)
    }

    /// A request builder with the session token attached, for callers that need more control
    /// (raw bodies, streaming) than the JSON helpers give.
    pub fn request(
        &self,
        method: Method,
        path: &str,
    ) -> Result<reqwest::RequestBuilder, ClientError> {
        let mut req = self
            .http
            .request(method, self.endpoint(path)?)
            .headers(self.headers.clone());
        if let Some(token) = &self.token {
            req = req.header(SESSION_TOKEN_HEADER, token);
        }
        Ok(req)
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(self.request(Method::GET, path)?).await
    }

    pub async fn get_query<T: DeserializeOwned, Q: Serialize + ?Sized>(
        &self,
        path: &str,
        query: &Q,
    ) -> Result<T, ClientError> {
        self.send(self.request(Method::GET, path)?.query(query))
            .await
    }

    pub async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.send(self.request(Method::POST, path)?.json(body))
            .await
    }

    pub async fn put<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.send(self.request(Method::PUT, path)?.json(body)).await
    }

    pub async fn patch<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.send(self.request(Method::PATCH, path)?.json(body))
            .await
    }

    /// Sends a request whose success body is irrelevant (204s, acknowledgements).
    pub async fn send_empty(&self, req: reqwest::RequestBuilder) -> Result<(), ClientError> {
        let resp = req.send().await?;
        check(resp).await.map(drop)
    }

    pub async fn delete(&self, path: &str) -> Result<(), ClientError> {
        self.send_empty(self.request(Method::DELETE, path)?).await
    }

    pub async fn send<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let resp = check(req.send().await?).await?;
        let bytes = resp.bytes().await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }
}

/// Turns an error status into `ClientError::Api`, reading Coder's error body when there is one.
pub async fn check(resp: reqwest::Response) -> Result<reqwest::Response, ClientError> {
    let status = resp.status();
    if status.is_success() || status == StatusCode::SWITCHING_PROTOCOLS {
        return Ok(resp);
    }
    let bytes = resp.bytes().await.unwrap_or_default();
    let response = serde_json::from_slice::<Response>(&bytes)
        .unwrap_or_else(|_| Response::new(String::from_utf8_lossy(&bytes).trim().to_string()));
    Err(ClientError::Api {
        status: status.as_u16(),
        response,
    })
}
