//! What every page shares: layout, style sheet, forms, links, and
//! [`shown`] for text from the broker. Only the style sheet is
//! `PreEscaped`; maud escapes everything else.

use std::fmt::Write as _;

use maud::{DOCTYPE, Escaper, Markup, PreEscaped, Render, html};

/// Text from the broker as a page shows it: control characters (but line
/// breaks and tabs) and bidirectional overrides escaped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shown<'a>(&'a str);

pub(crate) fn shown(text: &str) -> Shown<'_> {
    Shown(text)
}

impl Render for Shown<'_> {
    fn render_to(&self, buffer: &mut String) {
        let mut out = Escaper::new(buffer);
        let mut rest = self.0;
        // Line breaks and tabs lay out payloads.
        let escaped = |c: char| crate::escape::is_unsafe(c) && !matches!(c, '\n' | '\t');
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| escaped(c)) {
            let _ = out.write_str(&rest[..at]);
            let _ = out.write_str(&crate::escape::line(c.encode_utf8(&mut [0; 4])));
            rest = &rest[at + c.len_utf8()..];
        }
        let _ = out.write_str(rest);
    }
}

/// A path segment, percent-encoded.
pub(crate) use queuey_core::uri::percent_encode as seg;

/// The path of `queue`'s page, or of one under it (`/queue/{q}/{rest}`).
pub(crate) fn queue_path(queue: &str, rest: &str) -> String {
    let slash = if rest.is_empty() { "" } else { "/" };
    format!("/queue/{}{slash}{rest}", seg(queue))
}

/// The one style sheet, inline in every page (the CSP allows it by hash).
pub(crate) const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}\
header{background:#1d2430;color:#fff;padding:10px 24px}header a{color:#fff;text-decoration:none;font-weight:600}\
main{padding:16px 24px;max-width:1200px}h1{font-size:20px}h2{font-size:16px;margin-top:28px}\
table{border-collapse:collapse;background:#fff;width:100%;margin:8px 0}\
th,td{border-bottom:1px solid #e3e6ea;padding:6px 8px;text-align:left;vertical-align:top}\
th{background:#eef0f3;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}\
code,pre{font:12px ui-monospace,monospace}pre{background:#fff;padding:10px;overflow:auto;border:1px solid #e3e6ea}\
form{display:inline}button{cursor:pointer;padding:3px 10px;border:1px solid #8a94a3;border-radius:4px;background:#fff;color:#1d2430}\
button.neutral{border-color:#8a94a3;color:#1d2430}button.go{background:#1f6feb;color:#fff;border-color:#1f6feb}\
button.danger{border-color:#b3261e;color:#b3261e}\
progress{width:90px;vertical-align:middle;margin-right:6px}nav{margin:0 0 8px}\
.ok{color:#1a7f37}.bad{color:#b3261e;font-weight:600}.warn{color:#9a6700;font-weight:600}.note{color:#5b6573}\
.box{background:#fff;border:1px solid #e3e6ea;padding:12px;margin:8px 0}";

/// A whole page.
pub(crate) fn page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width";
                title { (shown(title)) " · queuey" }
                // Allowed by the CSP by its hash.
                style { (PreEscaped(STYLE)) }
            }
            body {
                header { a href="/" { "queuey" } }
                main {
                    h1 { (shown(title)) }
                    (body)
                }
            }
        }
    }
}

/// How a button looks, by consequence: `Neutral` opens the preview of a
/// change that loses nothing, `Primary` carries it out, `Danger` previews
/// or carries out one that loses something (purge, cancel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    Neutral,
    Primary,
    Danger,
}

impl Tone {
    /// The button's class in [`STYLE`].
    pub(crate) fn class(self) -> &'static str {
        match self {
            Tone::Neutral => "neutral",
            Tone::Primary => "go",
            Tone::Danger => "danger",
        }
    }
}

/// A POST form with the CSRF token, hidden fields and one button.
pub(crate) fn post_form(
    action: &str,
    csrf: &str,
    fields: &[(&str, &str)],
    label: &str,
    tone: Tone,
    id: &str,
) -> Markup {
    html! {
        form method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            @for (name, value) in fields {
                input type="hidden" name=(name) value=(value);
            }
            button type="submit" class=(tone.class()) id=(id) { (label) }
        }
    }
}

/// The link back to `queue`'s page.
pub(crate) fn back_to_queue(queue: &str) -> Markup {
    html! { a href=(queue_path(queue, "")) #back { "back to " (shown(queue)) } }
}

/// The line leading back to the overview, and to `up` when given.
pub(crate) fn nav(up: Option<Markup>) -> Markup {
    html! {
        nav {
            a href="/" #back-to-queues { "all queues" }
            @if let Some(up) = up { " · " (up) }
        }
    }
}

/// The job search box (a GET form, no CSRF token), filled with `id`.
pub(crate) fn job_search(id: &str) -> Markup {
    html! {
        form method="get" action="/job" #job-search {
            label for="job-id" { "Find a job by its id " }
            input type="search" name="id" id="job-id" value=(id) size="38" maxlength="64"
                placeholder="67e55044-10b1-426f-9247-bb680e5fe0c8";
            " "
            button type="submit" class=(Tone::Neutral.class()) id="job-find" { "find" }
        }
    }
}

/// A table's header row.
pub(crate) fn heads(names: &[&str]) -> Markup {
    html! { tr { @for name in names { th { (name) } } } }
}

/// A change's preview page: `what`, the `confirm` form, a link `back`.
pub(crate) fn preview(title: &str, what: Markup, confirm: Markup, back: Markup) -> Markup {
    let body = html! {
        div.box #preview {
            (what)
            p { "Nothing has changed yet." }
            p { (confirm) " " (back) }
        }
    };
    page(&format!("{title}: preview"), body)
}

/// A change's result page: `what` it did and a link `back`.
pub(crate) fn done(title: &str, what: Markup, back: Markup) -> Markup {
    page(
        &format!("{title}: done"),
        html! { div.box { (what) p { (back) } } },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(text: &str) -> String {
        html! { (shown(text)) }.into_string()
    }

    #[test]
    fn bidi_overrides_and_controls_are_shown_not_obeyed() {
        let shown = render("exe.\u{202e}fdp\u{1b}[2J line\nnext\u{9b}");
        assert!(
            !shown
                .chars()
                .any(|c| matches!(c, '\u{202e}' | '\u{1b}' | '\u{9b}')),
            "{shown}"
        );
        assert!(shown.contains("\\u{202e}"), "{shown}");
        assert!(shown.contains("\\e[2J"), "{shown}");
        assert!(shown.contains("line\nnext"), "{shown}");
    }

    #[test]
    fn text_attributes_and_paths_are_escaped() {
        assert_eq!(
            render("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;'"
        );
        let form = post_form(
            "/queue/a%20b/purge",
            "t\"ok",
            &[("fingerprint", "\"><script>")],
            "<b>Go</b>",
            Tone::Danger,
            "purge-0",
        )
        .into_string();
        assert!(
            !form.contains("<script>") && !form.contains("<b>"),
            "{form}"
        );
        assert!(
            form.contains("value=\"&quot;&gt;&lt;script&gt;\""),
            "{form}"
        );
        assert!(form.contains("name=\"csrf\" value=\"t&quot;ok\""), "{form}");
        assert_eq!(seg("a b/c.d"), "a%20b%2Fc.d");
        assert_eq!(queue_path("a b", "redrive"), "/queue/a%20b/redrive");
        assert_eq!(queue_path("a/b", ""), "/queue/a%2Fb");
    }

    #[test]
    fn every_tone_has_its_own_style_and_only_a_danger_is_red() {
        let rule = |class: &str| {
            let selector = format!("button.{class}{{");
            let start = STYLE.find(&selector).unwrap_or_else(|| panic!("{class}")) + selector.len();
            STYLE[start..].split('}').next().unwrap().to_owned()
        };
        let red = "#b3261e";
        assert!(rule(Tone::Danger.class()).contains(red));
        for tone in [Tone::Neutral, Tone::Primary] {
            assert!(!rule(tone.class()).contains(red), "{tone:?}");
        }
    }

    #[test]
    fn a_page_escapes_its_title_and_keeps_its_body() {
        let html = page("Queue <i>", html! { p #x { "body" } }).into_string();
        assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
        assert!(html.contains("<h1>Queue &lt;i&gt;</h1>"), "{html}");
        assert!(html.contains("<p id=\"x\">body</p>"), "{html}");
    }
}
