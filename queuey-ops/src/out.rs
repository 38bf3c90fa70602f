//! Everything the tool prints, in one place.
//!
//! A reader that goes away before the output ends (`queuey dead ls | head`,
//! quitting `less`) closes the pipe: the first write after that fails with
//! [`ErrorKind::BrokenPipe`], and from then on the tool prints nothing more
//! on stdout. The command itself runs to its end, so that nothing it was
//! doing (a redrive, a purge) stops half-way, and exits as it would have:
//! 0 when all went well, not a panic. Any other failure to write stdout (a
//! full disk behind `> file`) is reported once on stderr and fails the run
//! ([`failed`]).
//!
//! [`outln!`] and [`out!`] write stdout, [`errln!`] stderr (where a closed
//! pipe is ignored the same way: `2>&1 | head` closes both).

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout's reader went away: nothing more is written there.
static CLOSED: AtomicBool = AtomicBool::new(false);
/// Set once writing stdout failed otherwise: the run must not exit 0.
static FAILED: AtomicBool = AtomicBool::new(false);

/// Writes `args` and a line break on stdout (see the [module](self)).
pub(crate) fn line(args: std::fmt::Arguments<'_>) {
    text(format_args!("{args}\n"));
}

/// Writes `args` on stdout, without a line break.
pub(crate) fn text(args: std::fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != ErrorKind::BrokenPipe {
            FAILED.store(true, Ordering::Relaxed);
            error_line(format_args!("error: cannot write the output: {e}"));
        }
    }
}

/// Writes `args` and a line break on stderr; a failure to write it (a
/// closed pipe) is ignored: there is nowhere left to say so.
pub(crate) fn error_line(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(format_args!("{args}\n"));
}

/// Whether writing stdout failed for another reason than a reader that
/// went away: the output is incomplete, so the run fails.
pub(crate) fn failed() -> bool {
    FAILED.load(Ordering::Relaxed)
}

/// `println!` for the tool's output: see the [module](self).
macro_rules! outln {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}

/// `print!` for the tool's output: see the [module](self).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::text(format_args!($($arg)*))
    };
}

/// `eprintln!` that ignores a closed stderr: see the [module](self).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::error_line(format_args!($($arg)*))
    };
}

pub(crate) use {errln, out, outln};
