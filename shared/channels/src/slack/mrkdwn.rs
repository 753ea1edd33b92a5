//! A model's Markdown as Slack's `mrkdwn`
//! (<https://api.slack.com/reference/surfaces/formatting>). Models answer in standard
//! Markdown; Slack reads its own dialect, where `*x*` is bold, `_x_` italic, `~x~` struck
//! through, links are `<url|text>`, headings do not exist, and `&`, `<` and `>` must be
//! escaped (<https://api.slack.com/reference/surfaces/formatting#escaping>). Sent unchanged,
//! `**bold**` shows its asterisks, `[text](url)` shows its brackets, and a `<` may start a
//! control sequence. Code, in spans and fenced blocks, keeps its text (escaped only).
//! Markers without their closing half (a draft cut mid-stream) stay as they are.

/// `markdown` rewritten as Slack `mrkdwn`.
pub fn from_markdown(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + markdown.len() / 8);
    let mut fenced = false;
    for (i, line) in markdown.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push_str(&escape(line));
        } else if fenced {
            out.push_str(&escape(line));
        } else {
            out.push_str(&block(line));
        }
    }
    out
}

/// One line outside a fenced block: a heading, a quote, a list item, or plain text.
fn block(line: &str) -> String {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let hashes = body.bytes().take_while(|b| *b == b'#').count();
    if (1..=6).contains(&hashes) && body[hashes..].starts_with(' ') {
        // Slack has no headings: a bold line says the same. Emphasis inside would close the
        // bold early, so its markers go.
        let title = inline(body[hashes..].trim()).replace('*', "");
        return format!("{indent}*{title}*");
    }
    if let Some(rest) = body.strip_prefix('>') {
        // Slack reads a leading `>` as a quote, as Markdown does: the one `>` not escaped.
        return format!("{indent}>{}", block(rest));
    }
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = body.strip_prefix(bullet) {
            return format!("{indent}• {}", inline(rest));
        }
    }
    format!("{indent}{}", inline(body))
}

/// Inline Markdown (emphasis, strike-through, code spans, links) as `mrkdwn`, escaped.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '`' {
            if let Some(end) = rest[1..].find('`') {
                out.push_str(&escape(&rest[..end + 2]));
                rest = &rest[end + 2..];
                continue;
            }
        } else if c == '[' {
            if let Some((label, url, len)) = link(rest) {
                out.push_str(&format!(
                    "<{}|{}>",
                    escape(url),
                    escape(label).replace('|', "¦")
                ));
                rest = &rest[len..];
                continue;
            }
        } else if let Some((marker, slack)) = [("**", "*"), ("__", "*"), ("~~", "~"), ("*", "_")]
            .into_iter()
            .find(|(m, _)| rest.starts_with(m))
        {
            if let Some(inner) = enclosed(rest, marker) {
                out.push_str(slack);
                out.push_str(&inline(inner));
                out.push_str(slack);
                rest = &rest[inner.len() + 2 * marker.len()..];
                continue;
            }
            // An unclosed marker stays as it is, whole: `**` is not read as two `*`.
            out.push_str(marker);
            rest = &rest[marker.len()..];
            continue;
        }
        out.push_str(&escape(&rest[..c.len_utf8()]));
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The text between `marker` at the start of `text` and its closing twin, when there is one
/// and the text neither starts nor ends with a space (`2 * 3 * 4` is no emphasis).
fn enclosed<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let after = &text[marker.len()..];
    let end = after.find(marker)?;
    let inner = &after[..end];
    let spaced = inner.starts_with(char::is_whitespace) || inner.ends_with(char::is_whitespace);
    (!inner.is_empty() && !spaced).then_some(inner)
}

/// A Markdown link `[label](url)` at the start of `text`, to a web or mail address:
/// `(label, url, bytes taken)`.
fn link(text: &str) -> Option<(&str, &str, usize)> {
    let close = text.find("](")?;
    let label = &text[1..close];
    let after = &text[close + 2..];
    let end = after.find(')')?;
    let url = &after[..end];
    let web = ["https://", "http://", "mailto:"]
        .iter()
        .any(|scheme| url.starts_with(scheme));
    (web && !label.contains('[') && !url.contains(char::is_whitespace)).then_some((
        label,
        url,
        close + 2 + end + 1,
    ))
}

/// `text` with the three characters Slack reserves escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::from_markdown as m;

    #[test]
    fn emphasis_becomes_slacks() {
        assert_eq!(
            m("**bold** and *it* and ~~gone~~"),
            "*bold* and _it_ and ~gone~"
        );
        assert_eq!(m("__bold__ _it_"), "*bold* _it_");
        assert_eq!(m("**a *b* c**"), "*a _b_ c*");
    }

    #[test]
    fn links_headings_lists_and_quotes() {
        assert_eq!(
            m("see [the docs](https://example.com/a?b=1&c=2)"),
            "see <https://example.com/a?b=1&amp;c=2|the docs>"
        );
        assert_eq!(m("[x](javascript:alert(1))"), "[x](javascript:alert(1))");
        assert_eq!(m("## Plan **now**"), "*Plan now*");
        assert_eq!(m("- one\n  * two"), "• one\n  • two");
        assert_eq!(m("> quoted **bit**"), "> quoted *bit*");
    }

    #[test]
    fn reserved_characters_are_escaped_and_code_is_kept() {
        assert_eq!(m("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
        assert_eq!(m("run `a **b** <c>`"), "run `a **b** &lt;c&gt;`");
        assert_eq!(
            m("```\nlet x = **y**;\n```\n**after**"),
            "```\nlet x = **y**;\n```\n*after*"
        );
        assert_eq!(m("<!channel> ping"), "&lt;!channel&gt; ping");
    }

    #[test]
    fn unclosed_markers_and_arithmetic_stay() {
        assert_eq!(m("half **open"), "half **open");
        assert_eq!(m("2 * 3 * 4"), "2 * 3 * 4");
        assert_eq!(m("a `tick"), "a `tick");
        assert_eq!(m("[not a link]"), "[not a link]");
        assert_eq!(m("snake_case_name"), "snake_case_name");
        assert_eq!(m("ünï **çødé** ✓"), "ünï *çødé* ✓");
    }
}
