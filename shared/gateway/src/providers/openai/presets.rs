//! What the OpenAI-compatible providers do differently on the wire, by backend
//! (docs/models-and-budgets.md, backends). A preset is its backend name, its key and base
//! URL variables (declared in the configuration) and these quirks; the request, the answer
//! and the stream are the one OpenAI-compatible code path.

use hermes_config::BackendKind;

/// How a stream's usage is obtained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamUsage {
    /// Asked for with `stream_options.include_usage`; it arrives on a last chunk.
    #[default]
    Requested,
    /// Always sent on the last chunk, and `stream_options` is refused (Mistral: 422
    /// `extra_forbidden`), so it is not sent.
    Unasked,
}

/// Where reasoning tokens are counted in a usage object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReasoningTokens {
    /// Inside `completion_tokens` (OpenAI's convention).
    #[default]
    InCompletion,
    /// Beside it, in `completion_tokens_details.reasoning_tokens` (xAI: its `total_tokens` is
    /// prompt + completion + reasoning); added to the output, which they are billed as.
    Separate,
}

/// Where a streamed chunk may carry its usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChunkUsage {
    /// `usage` at the top of the chunk.
    #[default]
    TopLevel,
    /// Also `x_groq.usage` on the finishing chunk (Groq), read when the top level has none.
    AlsoXGroq,
}

/// The differences of one OpenAI-compatible backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quirks {
    pub stream_usage: StreamUsage,
    pub reasoning: ReasoningTokens,
    pub chunk_usage: ChunkUsage,
}

/// The quirks of `kind` (the standard ones for every backend without any).
pub fn quirks(kind: BackendKind) -> Quirks {
    let standard = Quirks::default();
    match kind {
        BackendKind::Mistral => Quirks {
            stream_usage: StreamUsage::Unasked,
            ..standard
        },
        BackendKind::Xai => Quirks {
            reasoning: ReasoningTokens::Separate,
            ..standard
        },
        BackendKind::Groq => Quirks {
            chunk_usage: ChunkUsage::AlsoXGroq,
            ..standard
        },
        _ => standard,
    }
}
