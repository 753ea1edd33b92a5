//! Reading a whole webhook body as JSON, and why it could not be read: every parser of the
//! platform folders starts with [`decode`], so every platform refuses the same things the
//! same way (a 400, or a 413 for more items than [`crate::MAX_ITEMS`]).

use serde::de::DeserializeOwned;

use crate::limits::MAX_ITEMS;

/// Why a webhook body could not be parsed. Both variants are a 400 for the sender and the
/// `malformed` reason on the rejection metric.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not JSON at all (syntax error, truncated, nested too deep).
    #[error("body is not valid JSON: {0}")]
    Json(String),
    /// JSON, but not the shape this platform sends.
    #[error("{0}")]
    Shape(String),
    /// More items than [`MAX_ITEMS`]: refused whole (413), never truncated.
    #[error("{0} items in one body; at most {MAX_ITEMS} are accepted")]
    TooMany(usize),
}

impl ParseError {
    /// The metric label of this error.
    pub fn reason(&self) -> &'static str {
        match self {
            ParseError::Json(_) | ParseError::Shape(_) => "malformed",
            ParseError::TooMany(_) => "too_large",
        }
    }
}

impl From<serde_json::Error> for ParseError {
    fn from(e: serde_json::Error) -> Self {
        match e.classify() {
            serde_json::error::Category::Data => ParseError::Shape(e.to_string()),
            _ => ParseError::Json(e.to_string()),
        }
    }
}

/// Deserializes a whole body, which must be a JSON object, sorting serde's errors into
/// [`ParseError`]'s two kinds. serde_json's recursion limit (128) turns deeply nested input
/// into an error.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ParseError> {
    let value = serde_json::from_slice(body).map_err(ParseError::from)?;
    // serde lets a struct be read from an array too; webhooks are objects.
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(value),
        _ => Err(ParseError::Shape("expected a JSON object".into())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn errors_have_kinds_and_one_reason() {
        let e = decode::<Value>(b"{").unwrap_err();
        assert!(matches!(e, ParseError::Json(_)), "{e:?}");
        assert!(e.to_string().starts_with("body is not valid JSON: "));
        let e = decode::<Vec<u8>>(b"{}").unwrap_err();
        assert!(matches!(e, ParseError::Shape(_)), "{e:?}");
        // A struct may be read from an array; a webhook body may not.
        assert!(decode::<Value>(b" {} ").is_ok());
        let e = decode::<Value>(b" [] ").unwrap_err();
        assert!(matches!(e, ParseError::Shape(_)), "{e:?}");
        assert_eq!(e.reason(), "malformed");
        assert_eq!(ParseError::Json(String::new()).reason(), "malformed");
        assert_eq!(ParseError::TooMany(MAX_ITEMS + 1).reason(), "too_large");
        // Nesting beyond serde_json's recursion limit is an error, not a stack overflow.
        let deep = "[".repeat(10_000);
        assert!(decode::<Value>(deep.as_bytes()).is_err());
    }
}
