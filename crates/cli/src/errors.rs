//! How a failed command says why: what it was doing, then coderd's answer in full — its
//! message, its detail, and every invalid field as `field: detail` — as Coder's CLI does, so a
//! refused request never reads as a bare "400: Validation failed.".

use codersdk::ClientError;

/// The text `coder` prints on stderr when a command fails.
pub fn render(err: &anyhow::Error) -> String {
    let answer = err.chain().find_map(|cause| match cause.downcast_ref() {
        Some(ClientError::Api { status, response }) => Some((*status, response)),
        _ => None,
    });
    let Some((status, response)) = answer else {
        return format!("error: {err:#}");
    };
    let doing: Vec<String> = err
        .chain()
        .take_while(|cause| cause.downcast_ref::<ClientError>().is_none())
        .map(ToString::to_string)
        .collect();
    let mut out = String::from("error: ");
    for step in doing {
        out.push_str(&step);
        out.push_str(": ");
    }
    out.push_str(&format!("{status}: {}", response.message));
    if !response.detail.is_empty() {
        out.push('\n');
        out.push_str(&response.detail);
    }
    for invalid in &response.validations {
        out.push_str(&format!("\n  {}: {}", invalid.field, invalid.detail));
    }
    out
}

#[cfg(test)]
mod tests {
    use anyhow::Context;
    use codersdk::{Response, ValidationError};

    use super::*;

    #[test]
    fn an_api_error_shows_message_detail_and_each_field() {
        let refused: anyhow::Result<()> = Err(ClientError::Api {
            status: 400,
            response: Response {
                message: "Validation failed.".into(),
                detail: "check the fields".into(),
                validations: vec![
                    ValidationError {
                        field: "email".into(),
                        detail: "must be a valid email address".into(),
                    },
                    ValidationError {
                        field: "username".into(),
                        detail: "\"me\" is reserved".into(),
                    },
                ],
            },
        }
        .into());
        let err = refused
            .context("creating the first user")
            .expect_err("refused");
        assert_eq!(
            render(&err),
            "error: creating the first user: 400: Validation failed.\n\
             check the fields\n  \
             email: must be a valid email address\n  \
             username: \"me\" is reserved"
        );
    }

    #[test]
    fn other_errors_keep_their_chain() {
        let err = anyhow::anyhow!("no such file").context("reading the template");
        assert_eq!(render(&err), "error: reading the template: no such file");
    }
}
