//! The one check every window goes through before it becomes a store key's
//! time-to-live: a unique job's window, the idempotency layer's window and
//! `#[job(unique(window = ".."))]`.

use std::time::Duration;

/// The longest window queuey accepts: 365 days.
///
/// A window is how long a key may outlive the process that wrote it; a
/// year covers any real use. A longer one would be refused by Redis for a
/// large enough value and read as "forever" by an operator, so it is
/// refused here, when the window is given, rather than later by the store.
pub const MAX_WINDOW: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// A window queuey refuses, from [`check_window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    /// A zero window: the key would be gone before any copy could be
    /// recognised.
    #[error(
        "a window of zero keeps nothing: give the time a key must last, from 1 ms up to \
         365 days (for example 10 minutes)"
    )]
    Zero,
    /// A window longer than [`MAX_WINDOW`].
    #[error(
        "a window of {window:?} is longer than the maximum of 365 days \
         (`queuey_core::store::MAX_WINDOW`); give a shorter one"
    )]
    TooLong {
        /// The window given.
        window: Duration,
    },
}

impl WindowError {
    /// The message, usable where only a `&'static str` is (a compile-time
    /// check).
    pub const fn as_static_str(&self) -> &'static str {
        match self {
            WindowError::Zero => {
                "a window of zero keeps nothing: give the time a key must last, from 1 ms up to \
                 365 days"
            }
            WindowError::TooLong { .. } => {
                "a window is longer than the maximum of 365 days \
                 (`queuey_core::store::MAX_WINDOW`); give a shorter one"
            }
        }
    }
}

/// Checks a window: more than zero and at most [`MAX_WINDOW`]. Answers the
/// window unchanged, so a caller can use it in place.
///
/// `const`, so a window known when the program is compiled is checked then
/// (`#[derive(Job)]` does this for `unique(window = "..")`).
///
/// ```
/// use std::time::Duration;
/// use queuey_core::store::{MAX_WINDOW, WindowError, check_window};
///
/// assert_eq!(check_window(Duration::from_secs(600)), Ok(Duration::from_secs(600)));
/// assert_eq!(check_window(Duration::ZERO), Err(WindowError::Zero));
/// assert!(check_window(MAX_WINDOW).is_ok());
/// assert!(matches!(check_window(Duration::MAX), Err(WindowError::TooLong { .. })));
/// ```
pub const fn check_window(window: Duration) -> Result<Duration, WindowError> {
    if window.is_zero() {
        return Err(WindowError::Zero);
    }
    if window.as_nanos() > MAX_WINDOW.as_nanos() {
        return Err(WindowError::TooLong { window });
    }
    Ok(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_more_than_a_year_are_refused_and_the_rest_passes_unchanged() {
        assert_eq!(check_window(Duration::ZERO), Err(WindowError::Zero));
        assert_eq!(
            check_window(Duration::from_nanos(1)),
            Ok(Duration::from_nanos(1))
        );
        assert_eq!(check_window(MAX_WINDOW), Ok(MAX_WINDOW));
        let over = MAX_WINDOW + Duration::from_nanos(1);
        assert_eq!(
            check_window(over),
            Err(WindowError::TooLong { window: over })
        );
        assert_eq!(
            check_window(Duration::MAX),
            Err(WindowError::TooLong {
                window: Duration::MAX
            })
        );
    }

    #[test]
    fn messages_say_what_to_give_instead() {
        let long = check_window(Duration::MAX).unwrap_err();
        assert!(long.to_string().contains("365 days"), "{long}");
        assert!(long.as_static_str().contains("MAX_WINDOW"));
        let zero = check_window(Duration::ZERO).unwrap_err();
        assert!(zero.to_string().contains("from 1 ms"), "{zero}");
        assert!(zero.as_static_str().contains("zero"));
    }
}
