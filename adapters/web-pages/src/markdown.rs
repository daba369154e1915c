//! A tiny, safe inline Markdown renderer for plan descriptions and features: both go through
//! [`inline`] (a feature line, a description's paragraph), so `**bold**` reads as bold in either
//! and never as literal asterisks. [`paragraphs`] renders a description: blank lines part
//! paragraphs, single line breaks stay.
//!
//! Supported: `**bold**`, `*emphasis*`, `` `code` ``, `[text](url)` for
//! `https:`, `http:`, `mailto:` and site-relative (`/…`) URLs, and `\` escapes. Everything else
//! is text: every character is HTML-escaped and raw HTML never passes through, so an admin's
//! feature line can never inject markup or script into `/pricing`.

use maud::{Markup, PreEscaped, html};

/// The longest input rendered; the rest is cut (features are at most a few hundred chars).
const MAX_INPUT_CHARS: usize = 2_000;

/// `text` as escaped HTML with the inline subset applied.
pub(crate) fn render_inline(text: &str) -> String {
    let text: String = text.chars().take(MAX_INPUT_CHARS).collect();
    let mut out = String::with_capacity(text.len() + 16);
    render_into(&mut out, &text, 0);
    out
}

/// One line of plan text (a feature) as markup.
pub(crate) fn inline(text: &str) -> Markup {
    PreEscaped(render_inline(text))
}

/// A plan description as markup: one `<p>` (with `class`) per paragraph, `<br>` for a single
/// line break, each paragraph rendered as [`inline`].
pub(crate) fn paragraphs(text: &str, class: &str) -> Markup {
    let text: String = text.chars().take(MAX_INPUT_CHARS).collect();
    let normalised = text.replace("\r\n", "\n");
    html! {
        @for paragraph in normalised.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
            p class=(class) {
                @for (i, line) in paragraph.lines().enumerate() {
                    @if i > 0 { br; }
                    (inline(line.trim()))
                }
            }
        }
    }
}

/// Nesting depth limit for bold/emphasis inside each other.
const MAX_DEPTH: usize = 4;

fn render_into(out: &mut String, mut rest: &str, depth: usize) {
    while let Some(c) = rest.chars().next() {
        if let Some(after) = span(out, rest, depth) {
            rest = after;
            continue;
        }
        if c == '\\'
            && let Some(next) = rest[1..].chars().next()
            && next.is_ascii_punctuation()
        {
            push_escaped(out, &rest[1..1 + next.len_utf8()]);
            rest = &rest[1 + next.len_utf8()..];
            continue;
        }
        push_escaped(out, &rest[..c.len_utf8()]);
        rest = &rest[c.len_utf8()..];
    }
}

/// Renders one span starting at `rest` if there is one; returns what follows it.
fn span<'a>(out: &mut String, rest: &'a str, depth: usize) -> Option<&'a str> {
    if let Some(body) = rest.strip_prefix('`') {
        let end = body.find('`').filter(|&e| e > 0)?;
        out.push_str("<code>");
        push_escaped(out, &body[..end]);
        out.push_str("</code>");
        return Some(&body[end + 1..]);
    }
    if depth < MAX_DEPTH {
        for (marker, tag) in [("**", "strong"), ("*", "em")] {
            if let Some(after) = delimited(out, rest, marker, tag, depth) {
                return Some(after);
            }
        }
    }
    if rest.starts_with('[') {
        return link(out, rest, depth);
    }
    None
}

fn delimited<'a>(
    out: &mut String,
    rest: &'a str,
    marker: &str,
    tag: &str,
    depth: usize,
) -> Option<&'a str> {
    let body = rest.strip_prefix(marker)?;
    if body.starts_with(char::is_whitespace) || body.starts_with(marker) {
        return None;
    }
    let end = body.find(marker).filter(|&e| e > 0)?;
    let inner = &body[..end];
    if inner.ends_with(char::is_whitespace) {
        return None;
    }
    out.push('<');
    out.push_str(tag);
    out.push('>');
    render_into(out, inner, depth + 1);
    out.push_str("</");
    out.push_str(tag);
    out.push('>');
    Some(&body[end + marker.len()..])
}

fn link<'a>(out: &mut String, rest: &'a str, depth: usize) -> Option<&'a str> {
    let close = rest.find("](")?;
    let label = &rest[1..close];
    if label.is_empty() || label.contains('[') {
        return None;
    }
    let target_start = close + 2;
    let target_len = rest[target_start..].find(')')?;
    let url = rest[target_start..target_start + target_len].trim();
    if !is_safe_url(url) {
        return None;
    }
    out.push_str("<a href=\"");
    push_escaped(out, url);
    out.push_str("\" rel=\"nofollow noopener noreferrer\">");
    render_into(out, label, depth + 1);
    out.push_str("</a>");
    Some(&rest[target_start + target_len + 1..])
}

fn is_safe_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    let scheme_ok = ["https://", "http://", "mailto:"]
        .iter()
        .any(|s| lower.starts_with(s));
    let relative_ok = url.starts_with('/') && !url.starts_with("//");
    (scheme_ok || relative_ok)
        && !url
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\')
}

fn push_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::render_inline as r;

    #[test]
    fn renders_the_inline_subset() {
        assert_eq!(
            r("**Unlimited** projects"),
            "<strong>Unlimited</strong> projects"
        );
        assert_eq!(r("*fast* and calm"), "<em>fast</em> and calm");
        assert_eq!(r("use `gpt-x`"), "use <code>gpt-x</code>");
        assert_eq!(
            r("see [docs](https://example.com/a?b=1&c=2)"),
            "see <a href=\"https://example.com/a?b=1&amp;c=2\" \
             rel=\"nofollow noopener noreferrer\">docs</a>"
        );
        assert_eq!(
            r("**bold [x](/y)**"),
            "<strong>bold <a href=\"/y\" rel=\"nofollow noopener noreferrer\">x</a></strong>"
        );
    }

    #[test]
    fn never_passes_html_or_script_urls_through() {
        assert_eq!(
            r("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(r("[x](javascript:alert(1))"), "[x](javascript:alert(1))");
        assert_eq!(r("[x](//evil.example)"), "[x](//evil.example)");
        assert_eq!(r("`<b>`"), "<code>&lt;b&gt;</code>");
        assert_eq!(
            r("\"quoted\" & 'single'"),
            "&quot;quoted&quot; &amp; &#39;single&#39;"
        );
    }

    #[test]
    fn descriptions_render_like_features_in_paragraphs() {
        let html =
            super::paragraphs("For **teams**\nof any size\r\n\r\n<b>x</b>", "d").into_string();
        assert_eq!(
            html,
            "<p class=\"d\">For <strong>teams</strong><br>of any size</p>\
             <p class=\"d\">&lt;b&gt;x&lt;/b&gt;</p>"
        );
        assert_eq!(super::paragraphs("  \n\n ", "d").into_string(), "");
        assert_eq!(super::inline("*a*").into_string(), "<em>a</em>");
    }

    #[test]
    fn leaves_unbalanced_markers_and_escapes_alone() {
        assert_eq!(r("2 * 3 = 6"), "2 * 3 = 6");
        assert_eq!(r("**open"), "**open");
        assert_eq!(r(r"\*not em\*"), "*not em*");
        assert_eq!(r("snake_case_name"), "snake_case_name");
        assert_eq!(r("中文 **粗体**"), "中文 <strong>粗体</strong>");
    }
}
