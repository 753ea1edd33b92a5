//! The response cache of tool-free calls (docs/models-and-budgets.md: "keyed by backend + system prompt +
//! messages, tool-free calls only"). The key is a SHA-256 over everything that changes the
//! answer: every hop's backend, model and output cap, the whole conversation (system
//! blocks included) and the sampling and response-format parameters. A hit costs nothing
//! and spends no budget. Redis trouble only means a miss.

use std::time::Duration;

use hermes_cache::Cache;
use hermes_types::model::{CallParams, ChatMessage};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::chain::{Hop, Unusable};
use crate::providers::{Adapter, Completion};

/// A cached answer and the hop that gave it.
#[derive(Serialize, Deserialize)]
pub struct Cached {
    pub completion: Completion,
    pub backend: String,
}

/// The cache of one process.
#[derive(Clone)]
pub struct ResponseCache {
    cache: Cache,
    ttl: Duration,
}

impl ResponseCache {
    pub fn new(cache: Cache, ttl: Duration) -> Self {
        Self { cache, ttl }
    }

    fn redis_key(&self, key: &str) -> String {
        self.cache.key(format_args!("llm:cache:{key}"))
    }

    pub async fn get(&self, key: &str) -> Option<Cached> {
        let mut c = self.cache.conn();
        let raw: Option<String> = match c.get(self.redis_key(key)).await {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(error = %self.cache.failed("llm_cache_get", e), "response cache unreadable; a miss");
                return None;
            }
        };
        raw.and_then(|r| serde_json::from_str(&r).ok())
    }

    pub async fn put(&self, key: &str, value: &Cached) {
        let Ok(raw) = serde_json::to_string(value) else {
            return;
        };
        let mut c = self.cache.conn();
        let done: Result<(), _> = c
            .set_ex(self.redis_key(key), raw, self.ttl.as_secs().max(1))
            .await;
        if let Err(e) = done {
            tracing::debug!(error = %self.cache.failed("llm_cache_put", e), "answer not cached");
        }
    }
}

#[derive(Serialize)]
struct KeyParts<'a> {
    hops: Vec<(String, String, String, u32)>,
    messages: &'a [ChatMessage],
    params: &'a CallParams,
}

/// The cache key of a call, or `None` when it must not be cached (it offers tools).
pub fn key(
    hops: &[Result<Hop, Unusable>],
    messages: &[ChatMessage],
    params: &CallParams,
    has_tools: bool,
) -> Option<String> {
    if has_tools {
        return None;
    }
    let parts = KeyParts {
        hops: hops
            .iter()
            .filter_map(|h| h.as_ref().ok())
            .map(|h| {
                (
                    h.label.clone(),
                    h.backend.kind().to_string(),
                    h.model_id.clone(),
                    h.max_tokens,
                )
            })
            .collect(),
        messages,
        params,
    };
    let json = serde_json::to_vec(&parts).ok()?;
    Some(hex::encode(Sha256::digest(&json)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{Backend, Mock};
    use hermes_types::model::{JsonSchemaFormat, Role};

    fn hop(model: &str, max: u32) -> Result<Hop, Unusable> {
        Ok(Hop {
            label: "claude-haiku".into(),
            backend: Backend::Mock(Mock),
            model_id: model.into(),
            max_tokens: max,
            prices: None,
        })
    }

    #[test]
    fn every_answer_changing_input_changes_the_key() {
        let msgs = vec![
            ChatMessage::text(Role::System, "be brief"),
            ChatMessage::text(Role::User, "hi"),
        ];
        let p = CallParams::default();
        let base = key(&[hop("m", 100)], &msgs, &p, false).unwrap();
        assert_eq!(base, key(&[hop("m", 100)], &msgs, &p, false).unwrap());
        assert_ne!(base, key(&[hop("m2", 100)], &msgs, &p, false).unwrap());
        assert_ne!(base, key(&[hop("m", 200)], &msgs, &p, false).unwrap());
        let mut other_system = msgs.clone();
        other_system[0] = ChatMessage::text(Role::System, "be long");
        assert_ne!(
            base,
            key(&[hop("m", 100)], &other_system, &p, false).unwrap()
        );
        let hot = CallParams {
            temperature: Some(0.9),
            ..CallParams::default()
        };
        assert_ne!(base, key(&[hop("m", 100)], &msgs, &hot, false).unwrap());
        let json = CallParams {
            response_format: Some(JsonSchemaFormat {
                name: "x".into(),
                schema: serde_json::json!({"type": "object"}),
                strict: true,
            }),
            ..CallParams::default()
        };
        assert_ne!(base, key(&[hop("m", 100)], &msgs, &json, false).unwrap());
        assert_eq!(key(&[hop("m", 100)], &msgs, &p, true), None);
    }
}
