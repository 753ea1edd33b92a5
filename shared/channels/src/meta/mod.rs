//! What WhatsApp and Instagram share as Meta platforms: the Graph API's error table
//! ([`errors`]) and how a send's answer names the message it accepted.

pub mod errors;

/// The id a Meta platform gave the message it accepted, at JSON `pointer` of its `answer`
/// (a string, or a number as Instagram may send); `None` when the answer names none.
pub(crate) async fn answer_id(answer: reqwest::Response, pointer: &str) -> Option<String> {
    let body: serde_json::Value = answer.json().await.ok()?;
    match body.pointer(pointer)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
