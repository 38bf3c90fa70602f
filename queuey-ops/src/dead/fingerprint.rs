//! Error fingerprints: a reason with its variable parts masked, so that
//! "order 41 failed" and "order 97 failed" fall in one group.

/// The longest fingerprint, in characters: a longer one is cut there and
/// ends in `…`, so that grouping a queue of long reasons keeps its memory
/// bounded.
pub(crate) const FINGERPRINT_MAX_CHARS: usize = 500;

/// The reason with quoted values, UUIDs and other ids, and numbers replaced
/// by placeholders (`<s>`, `<id>`, `<n>`), and runs of whitespace collapsed,
/// cut at [`FINGERPRINT_MAX_CHARS`].
pub(crate) fn fingerprint(reason: &str) -> String {
    let chars: Vec<char> = reason.chars().collect();
    let mut out = String::with_capacity(reason.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let closing = matches!(c, '\'' | '"' | '`')
            .then(|| chars[i + 1..].iter().position(|&d| d == c))
            .flatten();
        if let Some(len) = closing {
            out.push_str("<s>");
            i += len + 2;
            continue;
        }
        if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
            i += 1;
            continue;
        }
        if c.is_ascii_alphanumeric() && (i == 0 || !is_word(chars[i - 1])) {
            let end = i + chars[i..].iter().take_while(|&&d| is_word(d)).count();
            let word: String = chars[i..end].iter().collect();
            if let Some(mask) = mask_word(&word) {
                out.push_str(&mask);
                i = end;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    let out = out.trim();
    match out.char_indices().nth(FINGERPRINT_MAX_CHARS - 1) {
        Some((cut, _)) if out[cut..].chars().nth(1).is_some() => format!("{}…", &out[..cut]),
        _ => out.to_owned(),
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// The mask for one word, or `None` to keep it.
fn mask_word(word: &str) -> Option<String> {
    let digits = word.chars().filter(char::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    if uuid::Uuid::try_parse(word).is_ok() {
        return Some("<id>".to_owned());
    }
    let hex = word.chars().all(|c| c.is_ascii_hexdigit());
    if hex && word.len() >= 8 && word.chars().any(|c| c.is_ascii_alphabetic()) {
        return Some("<id>".to_owned());
    }
    // A number with a unit or suffix keeps its letters: `30s` → `<n>s`.
    let lead = word.chars().take_while(char::is_ascii_digit).count();
    if lead == word.len() {
        return Some("<n>".to_owned());
    }
    if lead > 0 && word[lead..].chars().all(|c| c.is_ascii_alphabetic()) {
        return Some(format!("<n>{}", &word[lead..]));
    }
    // Mostly digits, or ending in two or more (`user42`, `ORD-2291`): an
    // identifier. `utf8` and `s3` stay.
    let trailing = word.chars().rev().take_while(char::is_ascii_digit).count();
    if digits * 2 > word.len() || trailing >= 2 {
        return Some("<id>".to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{FINGERPRINT_MAX_CHARS, fingerprint};

    #[test]
    fn reasons_that_differ_in_their_values_share_a_fingerprint() {
        assert_eq!(
            fingerprint("order 41 failed: customer 'ann' not found"),
            fingerprint("order 97 failed: customer 'bob' not found"),
        );
        assert_eq!(
            fingerprint("job 2b4e8a1c-0d3f-4c55-9c1e-8f1a2b3c4d5e timed out after 30s"),
            "job <id> timed out after <n>s"
        );
    }

    #[test]
    fn numbers_ids_and_quoted_values_are_masked() {
        assert_eq!(
            fingerprint("HTTP 503 from upstream"),
            "HTTP <n> from upstream"
        );
        assert_eq!(
            fingerprint("user \"x@y.z\" has no card (user42)"),
            "user <s> has no card (<id>)"
        );
        assert_eq!(fingerprint("deadbeef01 missing"), "<id> missing");
        assert_eq!(fingerprint("retried   3 times"), "retried <n> times");
        assert_eq!(fingerprint("malformed envelope"), "malformed envelope");
        assert_eq!(fingerprint("unclosed 'quote 7"), "unclosed 'quote <n>");
        assert_eq!(fingerprint("utf8 héllo 12"), "utf8 héllo <n>");
    }

    #[test]
    fn a_long_reason_gives_a_bounded_fingerprint() {
        let long = "x".repeat(10 * FINGERPRINT_MAX_CHARS);
        let fp = fingerprint(&long);
        assert_eq!(fp.chars().count(), FINGERPRINT_MAX_CHARS);
        assert!(fp.ends_with('…'));
        assert_eq!(fingerprint(&long), fingerprint(&format!("{long}y")));
        let exact = "y".repeat(FINGERPRINT_MAX_CHARS);
        assert_eq!(fingerprint(&exact), exact);
    }

    #[test]
    fn plain_words_with_digits_inside_stay() {
        assert_eq!(fingerprint("utf8 decode error"), "utf8 decode error");
        assert_eq!(fingerprint("s3 upload failed"), "s3 upload failed");
    }
}
