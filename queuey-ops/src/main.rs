//! `queuey`: the operator's command-line tool for queuey deployments.

mod cli;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let secrets = args.secrets();
    match cli::run(args).await {
        Ok(code) => code,
        Err(e) => {
            // Every error text, the broker client's included, leaves without
            // the passwords the tool was given and without control characters.
            let text = secrets.scrub(&e.to_string());
            eprintln!("error: {}", queuey_ops::escape::line(&text));
            ExitCode::FAILURE
        }
    }
}
