//! The content of a chat message as OpenAI sends it: a string, or an array of parts. Text
//! parts are joined; `image_url` parts of user messages become images ([`crate::images`]);
//! uploaded files and other part types are refused by name (docs/api.md, images).

use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::model::{ImageRef, Role};
use serde_json::Value;

use crate::openai::invalid;

/// The URL of an `image_url` part: `{"image_url": {"url": …}}`, or the bare string some
/// clients send.
fn image_url_of(i: usize, part: &Value) -> Result<&str, ApiError> {
    let v = part.get("image_url");
    v.and_then(|v| v.get("url"))
        .or(v)
        .and_then(Value::as_str)
        .ok_or_else(|| {
            invalid(format!(
                "messages[{i}]: an image_url part needs image_url.url"
            ))
        })
}

/// A message's content: its text (parts joined by newlines) and its images. Images are
/// taken in user messages; uploaded files and other parts are refused by name.
pub(crate) fn content(
    i: usize,
    role: Role,
    content: Option<Value>,
) -> Result<(Option<String>, Vec<ImageRef>), ApiError> {
    let parts = match content {
        None | Some(Value::Null) => return Ok((None, Vec::new())),
        Some(Value::String(s)) => return Ok((Some(s), Vec::new())),
        Some(Value::Array(parts)) => parts,
        Some(_) => {
            return Err(invalid(format!(
                "messages[{i}].content must be a string or an array of parts"
            )));
        }
    };
    let mut text = String::new();
    let mut images = Vec::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(t);
                }
            }
            Some("image_url") if role == Role::User => {
                images.push(crate::images::image_ref(image_url_of(i, &part)?)?);
            }
            Some("image_url") => {
                return Err(invalid(format!(
                    "messages[{i}]: images are taken in user messages only"
                )));
            }
            Some(kind @ ("file" | "input_file")) => {
                return Err(ApiError::bad_request(
                    ApiErrorCode::UnsupportedContentType,
                    format!(
                        "messages[{i}]: uploaded files ({kind:?} parts) are not supported; send images as image_url parts"
                    ),
                ));
            }
            Some(other) => {
                return Err(ApiError::bad_request(
                    ApiErrorCode::UnsupportedContentType,
                    format!("messages[{i}]: content parts of type {other:?} are not supported"),
                ));
            }
            None => {
                return Err(invalid(format!(
                    "messages[{i}]: every content part needs a type"
                )));
            }
        }
    }
    Ok((Some(text), images))
}
