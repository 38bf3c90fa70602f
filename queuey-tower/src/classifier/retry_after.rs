//! Parsing HTTP `Retry-After` values.

use std::time::{Duration, SystemTime};

/// Parses a `Retry-After` header value, in either form HTTP allows: a number
/// of seconds (`"120"`) or an HTTP date (`"Wed, 21 Oct 2015 07:28:00 GMT"`),
/// relative to now.
///
/// The result is the server's wait, however long: a wait past
/// [`LONGEST_WAIT`](queuey_core::LONGEST_WAIT) is dead-lettered by the deferral
/// layer rather than shortened. A date in the past gives zero. Anything else
/// is `None`.
///
/// ```
/// use std::time::Duration;
/// use queuey_tower::classify::parse_retry_after;
///
/// assert_eq!(parse_retry_after("30"), Some(Duration::from_secs(30)));
/// assert_eq!(parse_retry_after("soon"), None);
/// ```
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    parse_retry_after_at(value, SystemTime::now())
}

/// [`parse_retry_after`] with an explicit "now", for dates.
pub fn parse_retry_after_at(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Longer digit strings than u64 holds are still "a very long time".
        let secs = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuey_core::LONGEST_WAIT;
    use std::time::UNIX_EPOCH;

    #[test]
    fn delta_seconds() {
        assert_eq!(parse_retry_after("0"), Some(Duration::ZERO));
        assert_eq!(parse_retry_after(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(
            parse_retry_after("99999999999"),
            Some(Duration::from_secs(99_999_999_999)),
            "never shortened"
        );
        assert_eq!(
            parse_retry_after("999999999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
        for bad in ["", "-1", "1.5", "+3", "3s", "soon"] {
            assert_eq!(parse_retry_after(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn http_dates() {
        // Sun, 06 Nov 1994 08:49:37 GMT
        let date = UNIX_EPOCH + Duration::from_secs(784_111_777);
        let now = date - Duration::from_secs(90);
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                parse_retry_after_at(form, now),
                Some(Duration::from_secs(90)),
                "{form}"
            );
        }
        let later = date + Duration::from_secs(5);
        assert_eq!(
            parse_retry_after_at("Sun, 06 Nov 1994 08:49:37 GMT", later),
            Some(Duration::ZERO)
        );
        let long_before = date - Duration::from_secs(365 * 24 * 3600);
        assert!(
            parse_retry_after_at("Sun, 06 Nov 1994 08:49:37 GMT", long_before)
                .is_some_and(|wait| wait > LONGEST_WAIT),
            "a year-long wait is kept whole"
        );
        assert_eq!(
            parse_retry_after_at("Sun, 32 Nov 1994 08:49:37 GMT", now),
            None
        );
    }
}
