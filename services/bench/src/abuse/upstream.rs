//! What the fleet under `hermes bench abuse` calls, on loopback: an OpenAI-compatible model
//! that echoes at once (or holds a request whose text asks for it until the attack ends),
//! a slow image host that sends a few bytes and then nothing until the attack ends, and a
//! channel API that answers every send (Telegram's and WhatsApp's shapes at once), counting
//! the sends so the Redis measurement knows when its runs were answered.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A user text containing `[hold:<token>]` with the current round's token (and an image URL
/// with `?hold=<token>`) is held until [`Upstream::release`]; one of an earlier round (a run
/// still queued when its round ended) is answered at once, so it never holds a quiet phase.
pub fn hold_marker(token: u64) -> String {
    format!("[hold:{token}]")
}

/// The fake upstream's shared state.
pub struct Upstream {
    /// `http://127.0.0.1:port`.
    pub base: String,
    /// Channel sends received (Telegram `sendMessage`, WhatsApp `messages`, any other POST).
    pub sends: AtomicUsize,
    /// The round whose requests are held (`None`: nothing is).
    holding: watch::Sender<Option<u64>>,
}

impl Upstream {
    /// Serve on a free loopback port until the process ends.
    pub async fn start() -> anyhow::Result<Arc<Self>> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let (holding, _) = watch::channel(None);
        let up = Arc::new(Self {
            base: format!("http://{}", listener.local_addr()?),
            sends: AtomicUsize::new(0),
            holding,
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .route("/img/slow.png", get(slow_image))
            .fallback(send)
            .with_state(up.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(up)
    }

    /// Let every held request and slow image finish.
    pub fn release(&self) {
        self.holding.send_replace(None);
    }

    /// Hold what carries `token` from now on, until [`Upstream::release`].
    pub fn hold(&self, token: u64) {
        self.holding.send_replace(Some(token));
    }

    /// The token of the round being held (0 when none is).
    pub fn token(&self) -> u64 {
        self.holding.borrow().unwrap_or(0)
    }

    /// Wait while `token`'s round is held.
    async fn while_held(&self, token: u64) {
        let mut rx = self.holding.subscribe();
        let _ = rx.wait_for(|holding| *holding != Some(token)).await;
    }
}

/// The last user message's text (a string, or the text parts of an array).
fn last_user_text(request: &Value) -> String {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let Some(last) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

async fn complete(State(up): State<Arc<Upstream>>, Json(request): Json<Value>) -> Json<Value> {
    let text = last_user_text(&request);
    let token = up.token();
    if token != 0 && text.contains(&hold_marker(token)) {
        up.while_held(token).await;
    }
    let words = text.split_whitespace().count() as u64;
    Json(json!({
        "id": "chatcmpl-abuse",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": request["model"],
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": format!("echo: {text}")}}],
        "usage": {"prompt_tokens": words, "completion_tokens": words + 1,
                  "total_tokens": 2 * words + 1}
    }))
}

/// A PNG's first bytes at once, then nothing until released: a host that never finishes.
async fn slow_image(
    State(up): State<Arc<Upstream>>,
    Query(q): Query<HashMap<String, String>>,
) -> axum::response::Response {
    let head: &'static [u8] = b"\x89PNG\r\n\x1a\n";
    let token: u64 = q.get("hold").and_then(|t| t.parse().ok()).unwrap_or(0);
    let rest = futures_util::stream::once(async move {
        if token != 0 {
            up.while_held(token).await;
        }
        Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"IEND"))
    });
    let first = futures_util::stream::once(async move { Ok(bytes::Bytes::from_static(head)) });
    let body = Body::from_stream(futures_util::StreamExt::chain(first, rest));
    axum::response::Response::builder()
        .header("content-type", "image/png")
        .body(body)
        .unwrap_or_default()
}

/// Any channel send: answered in Telegram's and WhatsApp's shapes at once.
async fn send(State(up): State<Arc<Upstream>>) -> Json<Value> {
    let n = up.sends.fetch_add(1, Ordering::SeqCst) + 1;
    Json(json!({
        "ok": true,
        "result": {"message_id": n, "date": 1_760_000_000, "chat": {"id": 1}},
        "messaging_product": "whatsapp",
        "messages": [{"id": format!("wamid.abuse{n}")}]
    }))
}
