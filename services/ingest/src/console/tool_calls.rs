//! The tool calls of a run's tool rounds as its page lists them (docs/console.md, "A run's
//! page"): each call's tool, its arguments and what it returned, read from the transcript
//! kept with the run. The model wrote the arguments and the tools the outputs, so both are
//! escaped, and an output is cut to a bound the page can hold.

use hermes_types::model::{ChatMessage, Role};

use super::html::esc;

/// The most of one call's output a page shows.
const MAX_OUTPUT_CHARS: usize = 2_000;

/// The run's tool calls as a table, each beside its result; nothing for a run without any.
pub fn html(transcript: &[ChatMessage]) -> String {
    let mut rows = String::new();
    for call in transcript.iter().flat_map(|m| &m.tool_calls) {
        let output = transcript
            .iter()
            .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&call.id))
            .and_then(|m| m.content.as_deref());
        let output = match output {
            None => "(no result kept)".to_string(),
            Some(o) if o.chars().count() > MAX_OUTPUT_CHARS => {
                let cut: String = o.chars().take(MAX_OUTPUT_CHARS).collect();
                format!("{cut}… (cut at {MAX_OUTPUT_CHARS} characters)")
            }
            Some(o) => o.to_string(),
        };
        rows.push_str(&format!(
            "<tr><td>{}</td><td><pre>{}</pre></td><td><pre>{}</pre></td></tr>",
            esc(&call.name),
            esc(&call.arguments.to_string()),
            esc(&output),
        ));
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<table><caption>Tool calls</caption><thead><tr><th scope=\"col\">Tool</th>\
         <th scope=\"col\">Arguments</th><th scope=\"col\">Output</th></tr></thead><tbody>{rows}</tbody></table>"
    )
}

#[cfg(test)]
mod tests {
    use hermes_types::model::ToolCall;

    use super::*;

    fn asked(id: &str, name: &str) -> ChatMessage {
        ChatMessage {
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: serde_json::json!({"q": "<img src=x onerror=alert(1)>"}),
                signature: None,
            }],
            ..ChatMessage::text(Role::Assistant, "")
        }
    }

    #[test]
    fn each_call_sits_beside_its_own_result_escaped_and_bounded() {
        let long = "y".repeat(MAX_OUTPUT_CHARS + 5);
        let transcript = vec![
            asked("a", "web_search"),
            ChatMessage::tool_result("b", &long),
            asked("b", "<b>fetch</b>"),
            ChatMessage::tool_result("a", "<script>found</script>"),
            asked("c", "current_time"),
        ];
        let page = html(&transcript);
        let rows: Vec<&str> = page.split("<tr>").skip(2).collect();
        assert_eq!(rows.len(), 3, "{page}");
        assert!(rows[0].contains("web_search") && rows[0].contains("&lt;script&gt;found"));
        assert!(rows[1].contains("&lt;b&gt;fetch") && rows[1].contains("(cut at 2000 characters)"));
        assert!(rows[2].contains("current_time") && rows[2].contains("(no result kept)"));
        assert!(
            !page.contains("<img") && !page.contains("<script>"),
            "{page}"
        );
        assert_eq!(html(&[ChatMessage::text(Role::User, "hi")]), "");
    }
}
