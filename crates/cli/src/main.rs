//! The `coder` binary: parse the command line, run the command, report errors.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Terraform starts this binary as the `coder/coder` provider plugin (through the link the
    // provisioner daemon installs in its provider mirror): serve it, not the CLI.
    if terraform_provider_coder::is_plugin_invocation() {
        return match terraform_provider_coder::serve() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("terraform-provider-coder: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // Git runs this binary as its askpass (the agent's GIT_ASKPASS): answer git, not the CLI.
    let askpass = cli::askpass_prompt();
    let parsed = askpass.is_none().then(cli::Cli::parse_with_sources);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match parsed {
            Some(cli) => cli::run(cli).await,
            None => cli::gitaskpass(askpass.as_deref().unwrap_or_default()).await,
        }
    });
    // A read of an interactive stdin may still be blocked in the runtime's thread pool (after
    // `coder ssh`'s session ended): do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<cli::Exit>() {
            Some(cli::Exit(code)) => ExitCode::from(u8::try_from(*code).unwrap_or(255)),
            None => {
                eprintln!("{}", cli::render_error(&e));
                ExitCode::FAILURE
            }
        },
    }
}
