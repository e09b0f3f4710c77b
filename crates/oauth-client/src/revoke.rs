//! Token revocation (RFC 7009): when a person unlinks an account, coderd tells the provider
//! the grant is over instead of only forgetting the token.

use url::Url;

use crate::oauth2::OAuth2Client;
use crate::{Error, Result};

impl OAuth2Client {
    /// Revokes `token` (an access or refresh token) at `revoke_url`.
    pub async fn revoke(&self, revoke_url: &Url, token: &str, hint: &str) -> Result<()> {
        let form = vec![
            ("token", token.to_string()),
            ("token_type_hint", hint.to_string()),
        ];
        let response = self
            .http()
            .post_form(revoke_url.clone(), &form, Some(self.credentials()))
            .await?;
        if response.status.is_success() {
            Ok(())
        } else {
            Err(Error::Refused(format!(
                "the revocation endpoint answered {}",
                response.status
            )))
        }
    }
}
