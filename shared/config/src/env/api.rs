//! The OpenAI-compatible API surface: which browser origins may call it (CORS), the model
//! name it advertises, and the largest image a caller may send (`docs/api.md`).

use super::Unset::{Means, Value};
use super::{kinds, settings};
use crate::AllowRule;

settings! {
    /// The API surface.
    SETTINGS = [
        API_SERVER_CORS_ORIGINS: Vec<String> {
            kind: kinds::ORIGIN_LIST,
            unset: Means("(none: CORS off)"),
            secret: false,
            help: "comma-separated browser origins (exact `scheme://host[:port]`) allowed to call the API; unset, no CORS headers are sent",
        },
        API_SERVER_MODEL_NAME: String {
            kind: kinds::TEXT,
            unset: Means("(none: `[api] model_name`)"),
            secret: false,
            help: "model name advertised by `/v1/models` and `/v1/capabilities` and echoed in answers; wins over `[api] model_name`",
        },
        HERMES_IMAGE_MAX_BYTES: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("5242880"),
            secret: false,
            help: "largest image an API caller may send, decoded (`data:` URL, else 400 `image_too_large`) or fetched by the llm stage (http(s) URL, else the run fails `invalid`); also the largest chat platform photo downloaded (else its sender is told)",
        },
        HERMES_IMAGE_FETCH_ALLOW: Vec<AllowRule> {
            kind: kinds::ALLOW_LIST,
            unset: Means("(none)"),
            secret: false,
            help: "comma-separated host names or CIDR ranges an API caller's image URL may reach although not public (else refused)",
        },
    ]
}
