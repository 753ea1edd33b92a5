//! The built-in demo provider (docs/models-and-budgets.md, choosing the provider): answers `echo: <last user message>` and reports
//! usage as word counts. Chosen only explicitly (`HERMES_PROVIDER=mock`).

use hermes_config::BackendKind;
use hermes_types::model::{Role, Usage};

use super::{Adapter, CallSpec, Completion, DeltaSink, ProviderError};

/// The demo backend: accepts tools, never calls them.
pub struct Mock;

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

impl Adapter for Mock {
    fn kind(&self) -> BackendKind {
        BackendKind::Mock
    }

    /// It takes tool definitions (and never calls them), so the chain never skips it.
    fn supports_tools(&self) -> bool {
        true
    }

    async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        Ok(self.answer(call))
    }

    async fn stream(
        &self,
        call: &CallSpec<'_>,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, ProviderError> {
        let answer = self.answer(call);
        // Word by word, the way a model streams.
        let text = answer.text.as_deref().unwrap_or_default();
        for (i, word) in text.split(' ').enumerate() {
            if i == 0 {
                sink.delta(word);
            } else {
                sink.delta(&format!(" {word}"));
            }
        }
        Ok(answer)
    }

    async fn health_check(&self) -> Result<(), ProviderError> {
        Ok(())
    }
}

impl Mock {
    fn answer(&self, call: &CallSpec<'_>) -> Completion {
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
            finish_reason: hermes_types::model::FinishReason::Stop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::testing::{Collect, call};
    use hermes_types::model::{CallParams, ChatMessage};

    #[tokio::test]
    async fn echoes_the_last_user_message_with_word_counts() {
        let messages = vec![
            ChatMessage::text(Role::System, "be brief"),
            ChatMessage::text(Role::User, "first question"),
            ChatMessage::text(Role::Assistant, "an answer"),
            ChatMessage::text(Role::User, "hello there world"),
        ];
        let params = CallParams::default();
        let spec = call("mock", &messages, &[], &params);
        let c = Mock.complete(&spec).await.unwrap();
        let sink = Collect::default();
        let streamed = Mock.stream(&spec, &sink).await.unwrap();
        assert_eq!(streamed, c);
        assert_eq!(sink.joined(), "echo: hello there world");
        assert_eq!(sink.0.lock().unwrap().len(), 4);
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
