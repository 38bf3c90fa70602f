//! The way into a broker benchmark: its settings read, a runtime started,
//! the run awaited, and any failure printed under the benchmark's name
//! with the exit code that says which kind it was.

use std::fmt::Display;
use std::future::Future;
use std::process::ExitCode;

/// Runs `run` with the settings `settings` read, on a multi-threaded tokio
/// runtime: exit code 2 for settings that do not read, 1 for a run (or a
/// runtime) that fails.
pub(crate) fn main_with<S, E, F, R>(
    name: &str,
    settings: Result<S, R>,
    run: impl FnOnce(S) -> F,
) -> ExitCode
where
    R: Display,
    E: Display,
    F: Future<Output = Result<(), E>>,
{
    let settings = match settings {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("{name}: cannot start a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
