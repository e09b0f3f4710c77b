//! The `coder/coder` Terraform provider on its own: what the executor installs into its mirror
//! when it runs outside the `coder` binary (this crate's integration tests, development).

use std::process::ExitCode;

fn main() -> ExitCode {
    match terraform_provider_coder::serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("coder-terraform-provider: {err}");
            ExitCode::FAILURE
        }
    }
}
