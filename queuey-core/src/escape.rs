//! Text that came from a message, made safe to write to a terminal or a
//! log.
//!
//! A job's type, a dead letter's reason, a heartbeat's host: the publisher
//! chose them. Written raw to a terminal, a control sequence in them runs
//! instead of showing (`\e]0;…\a` sets the window title, `\e[2K\r` erases
//! the line to forge output) and bidirectional overrides reorder the text.
//!
//! [`Untrusted`] displays such a string with every [unsafe](is_unsafe)
//! character escaped as in a Rust or C string: `\e` for ESC, `\t`, `\n`,
//! `\r`, `\xHH` for the other C0 controls and DEL, `\u{HHHH}` for the C1
//! controls (which some terminals obey) and bidirectional formatting
//! characters. Everything else, backslashes included, shows as it is.
//!
//! Log a string from a message through it, as a `%` field of `tracing`:
//!
//! ```
//! use queuey_core::escape::Untrusted;
//!
//! let job_type = "send_email\u{1b}]0;owned\u{7}";
//! tracing::warn!(job_type = %Untrusted(job_type), "job dead-lettered");
//! assert_eq!(Untrusted(job_type).to_string(), r"send_email\e]0;owned\x07");
//! assert_eq!(Untrusted("plain C:\\path ✓").to_string(), "plain C:\\path ✓");
//! ```

use std::fmt;

/// Whether `c` changes what a terminal does or displays instead of being
/// shown: the C0 controls (tab and line breaks included), DEL, the C1
/// controls, and the bidirectional formatting characters (the overrides
/// and embeddings U+202A–U+202E, the isolates U+2066–U+2069, and the marks
/// U+061C, U+200E, U+200F).
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// A string from a message, displayed on one line with every
/// [unsafe](is_unsafe) character escaped (see the [module](self)).
///
/// Its `Debug` output is that of the string itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Untrusted<'a>(pub &'a str);

impl Untrusted<'_> {
    /// Whether displaying it changes anything: it holds an
    /// [unsafe](is_unsafe) character.
    pub fn needs_escaping(&self) -> bool {
        self.0.chars().any(is_unsafe)
    }
}

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some((at, c)) = rest.char_indices().find(|(_, c)| is_unsafe(*c)) {
            f.write_str(&rest[..at])?;
            match c {
                '\u{1b}' => f.write_str("\\e")?,
                '\t' => f.write_str("\\t")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\u{0}'..='\u{7f}' => write!(f, "\\x{:02x}", u32::from(c))?,
                _ => write!(f, "\\u{{{:x}}}", u32::from(c))?,
            }
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
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
    fn nothing_unsafe_is_left_and_each_character_is_named() {
        let escaped = Untrusted(&hostile()).to_string();
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
            r"\u{202a}",
            r"\u{202e}",
            r"\u{2066}",
            r"\u{2069}",
            r"\u{61c}",
        ] {
            assert!(escaped.contains(expected), "{expected} in {escaped}");
        }
    }

    #[test]
    fn a_title_and_line_erase_sequence_is_shown_not_run() {
        let reason = "order 7 failed\u{1b}]0;owned\u{7}\u{1b}[2K\rall good";
        assert_eq!(
            Untrusted(reason).to_string(),
            r"order 7 failed\e]0;owned\x07\e[2K\rall good"
        );
        assert_eq!(Untrusted("\u{202e}gnp.exe").to_string(), r"\u{202e}gnp.exe");
        assert!(Untrusted(reason).needs_escaping());
    }

    #[test]
    fn ordinary_text_is_shown_as_it_is() {
        for text in ["", "HTTP 503 from upstream", "C:\\tmp\\x", "héllo 世界 ✓ ש"] {
            assert_eq!(Untrusted(text).to_string(), text);
            assert!(!Untrusted(text).needs_escaping());
        }
    }
}
