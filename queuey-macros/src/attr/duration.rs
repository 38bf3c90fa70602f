//! Duration strings: a whole number followed by a unit.

use std::fmt;

/// A duration in whole milliseconds, the finest unit the attributes accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Millis(u64);

/// The accepted units and their length in milliseconds, smallest first.
const UNITS: [(&str, u64); 5] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

impl Millis {
    /// Builds a value from milliseconds (for the defaults).
    pub(crate) const fn from_millis(ms: u64) -> Self {
        Millis(ms)
    }

    /// The milliseconds.
    pub(crate) const fn get(self) -> u64 {
        self.0
    }

    /// Parses `"500ms"`, `"30s"`, `"5m"`, `"1h"` or `"2d"`: ASCII digits, then
    /// a unit (spaces around and between them are allowed). Zero parses; the
    /// caller refuses it with a hint for its key. The error says what to
    /// write instead.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err("empty duration: write a whole number and a unit, like \"30s\"".into());
        }
        let digits_end = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(digits_end);
        let unit = unit.trim_start();
        if number.is_empty() {
            return Err(format!(
                "`{text}` is not a duration: start with a whole number, like \"30s\""
            ));
        }
        if unit.starts_with(['.', ',']) {
            return Err(format!(
                "`{text}` has a fraction: use a smaller unit instead, like \"1500ms\" for 1.5 s"
            ));
        }
        if unit.is_empty() {
            return Err(format!(
                "`{text}` has no unit: write \"{number}s\" for seconds or \"{number}ms\" \
                 for milliseconds (units: ms, s, m, h, d)"
            ));
        }
        let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(format!(
                "unknown unit `{unit}` in `{text}`: use ms, s, m, h or d, like \"30s\""
            ));
        };
        number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
            .map(Millis)
            .ok_or_else(|| format!("`{text}` is too long a duration"))
    }
}

impl fmt::Display for Millis {
    /// The value in the largest unit that divides it exactly, as the user
    /// would write it (`300000` ms shows as `5m`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, scale) = UNITS
            .iter()
            .rev()
            .find(|(_, scale)| self.0 != 0 && self.0.is_multiple_of(*scale))
            .copied()
            .unwrap_or(UNITS[0]);
        write!(f, "{}{name}", self.0 / scale)
    }
}

/// What to write instead of a zero duration, per key.
pub(super) fn zero_hint(key: &str) -> &'static str {
    match key {
        "message_ttl" => "; leave `message_ttl` out for messages that never expire",
        "delay" => "; use `backoff = \"none\"` to retry without waiting",
        _ => "; the shortest duration is \"1ms\"",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(Millis::parse("500ms"), Ok(Millis(500)));
        assert_eq!(Millis::parse("30s"), Ok(Millis(30_000)));
        assert_eq!(Millis::parse("5m"), Ok(Millis(300_000)));
        assert_eq!(Millis::parse("1h"), Ok(Millis(3_600_000)));
        assert_eq!(Millis::parse("2d"), Ok(Millis(172_800_000)));
        assert_eq!(Millis::parse(" 10 s "), Ok(Millis(10_000)));
        assert_eq!(Millis::parse("0s"), Ok(Millis(0)));
    }

    #[test]
    fn refusals_say_what_to_write() {
        let cases = [
            ("", "empty duration"),
            ("s", "start with a whole number"),
            ("-1s", "start with a whole number"),
            ("1.5s", "1500ms"),
            ("30", "\"30s\""),
            ("3 weeks", "unknown unit `weeks`"),
            ("5M", "unknown unit `M`"),
            ("1m30s", "unknown unit `m30s`"),
            ("99999999999999999999s", "too long"),
            ("18446744073709551615s", "too long"),
        ];
        for (text, expected) in cases {
            let err = Millis::parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn display_picks_the_largest_exact_unit() {
        assert_eq!(Millis(300_000).to_string(), "5m");
        assert_eq!(Millis(90_000).to_string(), "90s");
        assert_eq!(Millis(1_500).to_string(), "1500ms");
        assert_eq!(Millis(172_800_000).to_string(), "2d");
        assert_eq!(Millis(0).to_string(), "0ms");
    }
}
