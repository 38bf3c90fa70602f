//! HTML building blocks: escaping, the page layout, links.

/// `text` safe inside HTML text and double-quoted attributes.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Line breaks and tabs lay out payloads; every other control
            // character and the bidirectional overrides, which would reorder
            // what the page shows, are shown escaped, as the command line
            // shows them.
            '\n' | '\t' => out.push(c),
            c if crate::escape::is_unsafe(c) => {
                out.push_str(&crate::escape::line(c.encode_utf8(&mut [0; 4])));
            }
            c => out.push(c),
        }
    }
    out
}

/// A path segment, percent-encoded.
pub(crate) fn seg(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The one style sheet, inline in every page (the CSP allows it by hash).
pub(crate) const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}\
header{background:#1d2430;color:#fff;padding:10px 24px}header a{color:#fff;text-decoration:none;font-weight:600}\
main{padding:16px 24px;max-width:1200px}h1{font-size:20px}h2{font-size:16px;margin-top:28px}\
table{border-collapse:collapse;background:#fff;width:100%;margin:8px 0}\
th,td{border-bottom:1px solid #e3e6ea;padding:6px 8px;text-align:left;vertical-align:top}\
th{background:#eef0f3;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}\
code,pre{font:12px ui-monospace,monospace}pre{background:#fff;padding:10px;overflow:auto;border:1px solid #e3e6ea}\
form{display:inline}button{cursor:pointer;padding:3px 10px;border:1px solid #8a94a3;border-radius:4px;background:#fff}\
button.danger{border-color:#b3261e;color:#b3261e}button.go{background:#1f6feb;color:#fff;border-color:#1f6feb}\
.ok{color:#1a7f37}.bad{color:#b3261e;font-weight:600}.note{color:#5b6573}.box{background:#fff;border:1px solid #e3e6ea;padding:12px;margin:8px 0}";

/// A whole page.
pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{} · queuey</title>\
         <style>{STYLE}</style></head><body><header><a href=\"/\">queuey</a></header>\
         <main><h1>{}</h1>{body}</main></body></html>",
        esc(title),
        esc(title)
    )
}

/// A POST form with the CSRF token, hidden fields and one button.
pub(crate) fn post_form(
    action: &str,
    csrf: &str,
    fields: &[(&str, &str)],
    label: &str,
    class: &str,
    id: &str,
) -> String {
    let mut hidden = format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(csrf)
    );
    for (name, value) in fields {
        hidden.push_str(&format!(
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            esc(name),
            esc(value)
        ));
    }
    format!(
        "<form method=\"post\" action=\"{}\">{hidden}<button type=\"submit\" class=\"{class}\" id=\"{}\">{}</button></form>",
        esc(action),
        esc(id),
        esc(label)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_overrides_and_controls_are_shown_not_obeyed() {
        let shown = esc("exe.\u{202e}fdp\u{1b}[2J line\nnext");
        assert!(
            !shown.chars().any(|c| c == '\u{202e}' || c == '\u{1b}'),
            "{shown}"
        );
        assert!(shown.contains("\\u{202e}"), "{shown}");
        assert!(shown.contains("line\nnext"), "{shown}");
    }

    #[test]
    fn text_and_paths_are_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(seg("a b/c.d"), "a%20b%2Fc.d");
    }
}
