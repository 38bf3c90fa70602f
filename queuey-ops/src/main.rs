//! `queuey`: the operator's command-line tool for queuey deployments.

mod cli;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", queuey_ops::escape::line(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}
