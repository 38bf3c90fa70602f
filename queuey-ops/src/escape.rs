//! Text from the broker made safe to print on a terminal.
//!
//! Reasons, job types, ids and queue names are whatever a producer put
//! there; printed raw, control sequences retitle or rewrite the terminal
//! and bidirectional overrides reorder the text. [`line()`] escapes them by
//! the rule of [`queuey_core::escape`]; [`json()`] escapes what JSON
//! encoding leaves raw (DEL, C1, bidi), still decoding to the same values.

use std::borrow::Cow;
use std::fmt::Write as _;

use queuey_core::escape::Untrusted;
pub(crate) use queuey_core::escape::is_unsafe;

/// `text` on one line, every [unsafe](is_unsafe) character (tabs and line
/// breaks included) shown escaped.
pub(crate) fn line(text: &str) -> Cow<'_, str> {
    let shown = Untrusted(text);
    if shown.needs_escaping() {
        Cow::Owned(shown.to_string())
    } else {
        Cow::Borrowed(text)
    }
}

/// Encoder output `json` with the [unsafe](is_unsafe) characters it left
/// raw as `\uHHHH` (its C0 characters are layout, and kept).
pub(crate) fn json(json: &str) -> Cow<'_, str> {
    let raw = |c: char| is_unsafe(c) && c >= ' ';
    if !json.chars().any(raw) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if raw(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character that a terminal may act on or reorder by.
    fn hostile() -> String {
        let mut s: String = (0u32..0x20).filter_map(char::from_u32).collect();
        s.extend((0x7fu32..=0x9f).filter_map(char::from_u32));
        s.extend(
            [0x61c, 0x200e, 0x200f]
                .into_iter()
                .chain(0x202a..=0x202e)
                .chain(0x2066..=0x2069)
                .filter_map(char::from_u32),
        );
        s
    }

    #[test]
    fn a_line_keeps_no_unsafe_character_and_names_each_one() {
        let escaped = line(&hostile()).into_owned();
        assert!(!escaped.chars().any(is_unsafe), "{escaped}");
        assert!(escaped.is_ascii());
        for expected in [
            r"\x00",
            r"\x07",
            r"\t",
            r"\n",
            r"\r",
            r"\e",
            r"\x7f",
            r"\u{9b}",
            r"\u{85}",
            r"\u{202e}",
            r"\u{2066}",
            r"\u{61c}",
        ] {
            assert!(escaped.contains(expected), "{expected} in {escaped}");
        }
    }

    #[test]
    fn the_terminal_title_and_line_erase_attack_is_shown_not_run() {
        let reason = "order 7 failed\u{1b}]0;owned\u{7}\u{1b}[2K\rall good";
        assert_eq!(line(reason), r"order 7 failed\e]0;owned\x07\e[2K\rall good");
        assert_eq!(line("\u{202e}gnp.exe"), r"\u{202e}gnp.exe");
    }

    #[test]
    fn a_line_and_json_text_are_escaped_by_the_rule() {
        assert_eq!(
            line("boom\u{1b}]0;pwned\u{7}\u{1b}[2K\r"),
            r"boom\e]0;pwned\x07\e[2K\r"
        );
        assert_eq!(line("a\tb\nc"), r"a\tb\nc");
        assert_eq!(line("plain C:\\path ✓"), "plain C:\\path ✓");
        assert_eq!(json("\"\u{9b}31m\""), r#""\u009b31m""#);
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for text in ["", "HTTP 503 from upstream", "C:\\tmp\\x", "héllo 世界 ✓ ש"] {
            assert!(matches!(line(text), Cow::Borrowed(t) if t == text));
            assert!(matches!(json(text), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn json_stays_json_with_the_same_value_and_no_raw_control() {
        let value = serde_json::json!({ "reason": hostile(), "k\u{9b}": [hostile()] });
        for encoded in [
            serde_json::to_string(&value).unwrap(),
            serde_json::to_string_pretty(&value).unwrap(),
        ] {
            let escaped = json(&encoded).into_owned();
            // Only the layout's own line breaks and indentation remain.
            assert!(
                escaped.chars().all(|c| !is_unsafe(c) || c == '\n'),
                "{escaped}"
            );
            assert!(escaped.is_ascii());
            let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
            assert_eq!(back, value);
        }
    }
}
