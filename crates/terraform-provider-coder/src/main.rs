//! Standalone provider binary: Terraform starts it as a plugin.

use std::process::ExitCode;

fn main() -> ExitCode {
    match terraform_provider_coder::serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("terraform-provider-coder: {err}");
            ExitCode::FAILURE
        }
    }
}
