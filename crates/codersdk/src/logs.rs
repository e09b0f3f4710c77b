//! Following job logs live: a WebSocket that first replays every line after `after`, then
//! streams new ones, and closes when the job completes.

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

use crate::provisioners::ProvisionerJobLog;
use crate::{Client, ClientError};

impl Client {
    /// Follows the logs at `path` (e.g. `/api/v2/workspacebuilds/{id}/logs`) after log id
    /// `after` (0 for all). The stream ends when the job completes.
    pub async fn follow_logs(
        &self,
        path: &str,
        after: i64,
    ) -> Result<BoxStream<'static, Result<ProvisionerJobLog, ClientError>>, ClientError> {
        self.follow(path, after).await
    }

    /// Follows an agent's logs after log id `after`; the stream lasts until either side leaves.
    pub async fn follow_agent_logs(
        &self,
        agent: uuid::Uuid,
        after: i64,
    ) -> Result<
        BoxStream<'static, Result<crate::workspaces::WorkspaceAgentLog, ClientError>>,
        ClientError,
    > {
        self.follow(&format!("/api/v2/workspaceagents/{agent}/logs"), after)
            .await
    }

    /// A WebSocket at `path?follow=true&after=N` yielding one JSON value per text message.
    async fn follow<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        path: &str,
        after: i64,
    ) -> Result<BoxStream<'static, Result<T, ClientError>>, ClientError> {
        let mut url = self.endpoint(path)?;
        url.query_pairs_mut()
            .append_pair("follow", "true")
            .append_pair("after", &after.to_string());
        let request = websocket_request(url, self.token(), self.headers())?;
        let (socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(websocket_error)?;
        Ok(Box::pin(socket.filter_map(|msg| async move {
            match msg {
                Ok(tungstenite::Message::Text(text)) => Some(
                    serde_json::from_str::<T>(&text)
                        .map_err(|e| ClientError::Decode(e.to_string())),
                ),
                Ok(tungstenite::Message::Close(_)) | Ok(_) => None,
                Err(e) => Some(Err(ClientError::WebSocket(Box::new(e)))),
            }
        })))
    }
}

/// A WebSocket handshake request for an http(s) URL, with the token (if any) in Coder's header:
/// never in the URL, which ends up in logs.
pub(crate) fn websocket_request(
    mut url: url::Url,
    token: Option<&str>,
    extra: &reqwest::header::HeaderMap,
) -> Result<tungstenite::handshake::client::Request, ClientError> {
    let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
    url.set_scheme(scheme)
        .map_err(|()| ClientError::Decode(format!("cannot make a WebSocket URL of {url}")))?;
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| ClientError::WebSocket(Box::new(e)))?;
    if let Some(token) = token {
        let value = token
            .parse()
            .map_err(|_| ClientError::Decode("the token is not a valid header value".into()))?;
        request
            .headers_mut()
            .insert(crate::client::SESSION_TOKEN_HEADER, value);
    }
    for (name, value) in extra {
        request.headers_mut().append(name, value.clone());
    }
    Ok(request)
}

/// A refused upgrade carries coderd's error body; surface it like any API error.
pub(crate) fn websocket_error(e: tungstenite::Error) -> ClientError {
    if let tungstenite::Error::Http(resp) = &e {
        let status = resp.status().as_u16();
        let body = resp.body().as_deref().unwrap_or_default();
        let response = serde_json::from_slice::<crate::Response>(body).unwrap_or_else(|_| {
            crate::Response::new(String::from_utf8_lossy(body).trim().to_string())
        });
        return ClientError::Api { status, response };
    }
    ClientError::WebSocket(Box::new(e))
}
