//! The built-in demo provider (DESIGN §7): answers `echo: <last user message>` and reports
//! usage as word counts. Chosen only explicitly (`HERMES_PROVIDER=mock`).

use hermes_shared::model::{Role, Usage};

use super::{CallSpec, Completion};

pub struct Mock;

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

impl Mock {
    pub fn complete(&self, call: &CallSpec<'_>) -> Completion {
        let last = call
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.as_deref())
            .unwrap_or("");
        let text = format!("echo: {last}");
        let input_tokens = call
            .messages
            .iter()
            .filter_map(|m| m.content.as_deref())
            .map(words)
            .sum();
        Completion {
            usage: Usage {
                input_tokens,
                output_tokens: words(&text),
                cost_micro_usd: 0,
            },
            text: Some(text),
            tool_calls: Vec::new(),
            finish_reason: "stop".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_shared::model::ChatMessage;
    use std::time::Duration;

    #[test]
    fn echoes_the_last_user_message_with_word_counts() {
        let messages = vec![
            ChatMessage::text(Role::System, "be brief"),
            ChatMessage::text(Role::User, "first question"),
            ChatMessage::text(Role::Assistant, "an answer"),
            ChatMessage::text(Role::User, "hello there world"),
        ];
        let c = Mock.complete(&CallSpec {
            model_id: "mock",
            max_tokens: 10,
            messages: &messages,
            tools: &[],
            timeout: Duration::from_secs(1),
        });
        assert_eq!(c.text.as_deref(), Some("echo: hello there world"));
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 9,
                output_tokens: 4,
                cost_micro_usd: 0,
            }
        );
        assert!(c.tool_calls.is_empty());
    }
}
