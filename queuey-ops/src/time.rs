//! Wall-clock times as milliseconds since the Unix epoch, and the two
//! formats the broker writes them in.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Parses `2026-11-30T16:44:50.413+00:00`, `2026-11-30 16:44:50` (UTC) and
/// the same with `Z`; other offsets are applied.
pub(crate) fn parse_ms(text: &str) -> Option<i64> {
    let t = text.trim();
    // The first three numbers of `part`, split at `sep`.
    let three = |part: &str, sep: char| -> Option<[i64; 3]> {
        let mut numbers = part.split(sep).map(|n| n.parse().ok());
        let mut next = || numbers.next().flatten();
        Some([next()?, next()?, next()?])
    };
    let [y, m, d] = three(t.get(0..10)?, '-')?;
    if !matches!(t.get(10..11)?, "T" | " ") {
        return None;
    }
    let [hh, mm, ss] = three(t.get(11..19)?, ':')?;
    let mut rest = &t[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits: String = frac.chars().take_while(char::is_ascii_digit).collect();
        let padded = format!("{digits:0<3}");
        millis = padded.get(0..3)?.parse().ok()?;
        rest = &frac[digits.len()..];
    }
    let offset_min = match rest {
        "" | "Z" => 0,
        _ => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let body = rest.get(1..)?;
            let (oh, om) = body
                .split_once(':')
                .unwrap_or((body.get(0..2)?, body.get(2..)?));
            sign * (oh.parse::<i64>().ok()? * 60 + om.parse::<i64>().ok()?)
        }
    };
    let days = days_from_civil(y, m, d);
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss - offset_min * 60;
    Some(secs * 1000 + millis)
}

/// `ms` as `2026-11-30 16:44:50Z`; a value beyond `i64` counts as `i64::MAX`.
pub(crate) fn format_ms(ms: impl TryInto<i64>) -> String {
    let ms = ms.try_into().unwrap_or(i64::MAX);
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A duration in ms as `1h02m`, `3m05s`, `12s` or `450ms`; a value beyond
/// `i64` counts as `i64::MAX`.
pub(crate) fn format_duration_ms(ms: impl TryInto<i64>) -> String {
    let ms: i64 = ms.try_into().unwrap_or(i64::MAX);
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    let s = ms / 1000;
    if ms < 1000 {
        format!("{sign}{ms}ms")
    } else if s < 60 {
        format!("{sign}{s}s")
    } else if s < 3600 {
        format!("{sign}{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{sign}{}h{:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{sign}{}d{:02}h", s / 86_400, s % 86_400 / 3600)
    }
}

/// `ms` as a UTC time with how far it is from `now_ms`:
/// `2026-11-30 16:44:50Z (in 3s)`, `… (2s ago)`; a value beyond `i64`
/// counts as `i64::MAX`.
pub(crate) fn when(ms: impl TryInto<i64>, now_ms: i64) -> String {
    let ms = ms.try_into().unwrap_or(i64::MAX);
    let gap = ms.saturating_sub(now_ms);
    if gap >= 0 {
        format!("{} (in {})", format_ms(ms), format_duration_ms(gap))
    } else {
        format!("{} ({} ago)", format_ms(ms), format_duration_ms(-gap))
    }
}

// Howard Hinnant's civil-date algorithms.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brokers_time_formats_parse() {
        let t = parse_ms("2026-11-30T16:44:50.413+00:00").unwrap();
        assert_eq!(t, 1_796_057_090_413);
        assert_eq!(parse_ms("2026-11-30 16:44:50"), Some(t - 413));
        assert_eq!(parse_ms("2026-11-30T17:44:50+01:00"), Some(t - 413));
        assert_eq!(parse_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_ms("yesterday"), None);
        assert_eq!(format_ms(t), "2026-11-30 16:44:50Z");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration_ms(450), "450ms");
        assert_eq!(format_duration_ms(12_000), "12s");
        assert_eq!(format_duration_ms(185_000), "3m05s");
        assert_eq!(format_duration_ms(3_720_000), "1h02m");
        assert_eq!(format_duration_ms(-2000), "-2s");
        let t = parse_ms("2026-11-30T16:44:50Z").unwrap();
        assert_eq!(when(t, t - 3000), "2026-11-30 16:44:50Z (in 3s)");
        assert_eq!(when(t, t + 2000), "2026-11-30 16:44:50Z (2s ago)");
    }
}
