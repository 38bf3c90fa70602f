//! Queue names: the default from the variant, and the broker's rules.

use syn::LitStr;

/// The longest queue name AMQP allows, in bytes (`MAX_QUEUE_NAME_BYTES`).
pub(super) const MAX_NAME_BYTES: usize = 255;

/// The prefix RabbitMQ reserves for its own queues.
const RESERVED: &str = "amq.";

/// `WebhookCalls` → `webhook_calls`, `HTTPRequests` → `http_requests`,
/// `Emails2` → `emails2`.
///
/// A word starts at an upper-case letter that follows a lower-case letter or
/// a digit, or that ends a run of capitals and is followed by a lower-case
/// letter.
pub(super) fn snake_case(ident: &str) -> String {
    let chars: Vec<char> = ident.chars().collect();
    let mut out = String::with_capacity(ident.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let starts_word = prev.is_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_uppercase() && next_is_lower);
            if starts_word && !out.ends_with('_') {
                out.push('_');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Checks a queue name written in `#[queue(name = "..")]`.
pub(super) fn check_name(lit: &LitStr) -> syn::Result<String> {
    let refuse = |message: String| Err(syn::Error::new(lit.span(), message));
    let name = lit.value();
    if name.trim().is_empty() {
        return refuse(
            "the queue name is empty or blank: write a name, like `name = \"emails\"`, or leave `name` \
             out to use the variant's name in snake_case"
                .to_owned(),
        );
    }
    refuse_whitespace(lit, &name, "queue name")?;
    if name.starts_with(RESERVED) {
        return refuse(format!(
            "the queue name `{name}` starts with `amq.`, which RabbitMQ reserves for its own \
             queues; pick another name"
        ));
    }
    Ok(name)
}

/// Checks `#[queues(prefix = "..")]`.
pub(super) fn check_prefix(lit: &LitStr) -> syn::Result<String> {
    let refuse = |message: String| Err(syn::Error::new(lit.span(), message));
    let prefix = lit.value();
    if prefix.trim().is_empty() {
        return refuse(
            "the prefix is empty or blank: write one, like `prefix = \"myapp\"`, or remove `prefix` for \
             queues without one"
                .to_owned(),
        );
    }
    refuse_whitespace(lit, &prefix, "prefix")?;
    if prefix.starts_with('.') || prefix.ends_with('.') {
        let trimmed = prefix.trim_matches('.');
        return refuse(format!(
            "the prefix `{prefix}` starts or ends with `.`; the dot between prefix and name \
             is added for you: write `prefix = \"{trimmed}\"`"
        ));
    }
    if format!("{prefix}.").starts_with(RESERVED) {
        return refuse(format!(
            "the prefix `{prefix}` makes every queue name start with `amq.`, which RabbitMQ \
             reserves for its own queues; pick another prefix"
        ));
    }
    // The shortest full name is the prefix, a dot and one byte.
    if prefix.len() + 2 > MAX_NAME_BYTES {
        return refuse(format!(
            "the prefix is {} bytes; with a dot and a name, a queue name must fit in \
             {MAX_NAME_BYTES} bytes",
            prefix.len()
        ));
    }
    Ok(prefix)
}

fn refuse_whitespace(lit: &LitStr, text: &str, what: &str) -> syn::Result<()> {
    if text.chars().any(char::is_whitespace) {
        return Err(syn::Error::new(
            lit.span(),
            format!("the {what} `{text}` contains whitespace; use `_`, `-` or `.` instead"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_words() {
        let cases = [
            ("Emails", "emails"),
            ("WebhookCalls", "webhook_calls"),
            ("HTTPRequests", "http_requests"),
            ("SendSMS", "send_sms"),
            ("Emails2", "emails2"),
            ("V2Api", "v2_api"),
            ("A", "a"),
            ("Default", "default"),
            ("already_snake", "already_snake"),
            ("Mixed_Case", "mixed_case"),
        ];
        for (ident, expected) in cases {
            assert_eq!(snake_case(ident), expected, "{ident}");
        }
    }

    fn lit(text: &str) -> LitStr {
        LitStr::new(text, proc_macro2::Span::call_site())
    }

    #[test]
    fn names() {
        assert_eq!(check_name(&lit("emails")).unwrap(), "emails");
        assert_eq!(check_name(&lit("a.b-c_d")).unwrap(), "a.b-c_d");
        for bad in ["", "  ", "two words", "tab\there", "amq.foo"] {
            assert!(check_name(&lit(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prefixes() {
        assert_eq!(check_prefix(&lit("myapp")).unwrap(), "myapp");
        assert_eq!(check_prefix(&lit("my.app")).unwrap(), "my.app");
        assert_eq!(check_prefix(&lit("amqx")).unwrap(), "amqx");
        for bad in ["", " ", "my app", ".app", "app.", "amq", "amq.x"] {
            assert!(check_prefix(&lit(bad)).is_err(), "{bad:?}");
        }
        assert!(check_prefix(&lit(&"p".repeat(253))).is_ok());
        assert!(check_prefix(&lit(&"p".repeat(254))).is_err());
    }
}
