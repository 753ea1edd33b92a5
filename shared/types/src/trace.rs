//! W3C trace context: the `traceparent` that travels from ingest through every stage
//! (in the envelope and the AMQP headers) so one request can be followed across services.

use std::fmt;

use rand::RngCore;
use serde::{Deserialize, Serialize};

/// The `tracing` target of spans made for traces only (never logged): every crate that
/// adds a span to a message's trace uses it (docs/tracing.md).
pub const TARGET: &str = "hermes::trace";

/// A validated W3C `traceparent` value: `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TraceParent(String);

impl TraceParent {
    /// Start a new trace (sampled).
    pub fn generate() -> Self {
        let mut rng = rand::rng();
        let mut trace = [0u8; 16];
        let mut span = [0u8; 8];
        rng.fill_bytes(&mut trace);
        rng.fill_bytes(&mut span);
        Self(format!(
            "00-{}-{}-01",
            hex::encode(trace),
            hex::encode(span)
        ))
    }

    /// Parse an incoming header; `None` when it is not a valid version-00 traceparent.
    pub fn parse(value: &str) -> Option<Self> {
        let parts: Vec<&str> = value.trim().split('-').collect();
        let [version, trace, span, flags] = parts.as_slice() else {
            return None;
        };
        let hex_of =
            |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
        let valid = *version == "00"
            && hex_of(trace, 32)
            && hex_of(span, 16)
            && hex_of(flags, 2)
            && trace.bytes().any(|b| b != b'0')
            && span.bytes().any(|b| b != b'0');
        valid.then(|| Self(value.trim().to_ascii_lowercase()))
    }

    /// The same trace with a new span id: what a stage passes on to the next.
    pub fn child(&self) -> Self {
        let mut span = [0u8; 8];
        rand::rng().fill_bytes(&mut span);
        let trace = self.trace_id();
        let flags = &self.0[53..55];
        Self(format!("00-{trace}-{}-{flags}", hex::encode(span)))
    }

    /// The 32-hex trace id, logged on every line of the run.
    pub fn trace_id(&self) -> &str {
        &self.0[3..35]
    }

    /// The 16-hex id of the span this one continues (W3C's `parent-id`).
    pub fn parent_id(&self) -> &str {
        &self.0[36..52]
    }

    /// Whether the caller sampled this trace (the `sampled` bit of the flags).
    pub fn sampled(&self) -> bool {
        u8::from_str_radix(&self.0[53..55], 16).is_ok_and(|f| f & 1 == 1)
    }

    /// A traceparent from its parts (lowercase hex, as OpenTelemetry prints ids); `None`
    /// when they do not make a valid one (an all-zero id of a span that is not recorded).
    pub fn from_parts(trace_id: &str, span_id: &str, sampled: bool) -> Option<Self> {
        let flags = if sampled { "01" } else { "00" };
        Self::parse(&format!("00-{trace_id}-{span_id}-{flags}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for TraceParent {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value).ok_or_else(|| format!("invalid traceparent {value:?}"))
    }
}

impl From<TraceParent> for String {
    fn from(t: TraceParent) -> String {
        t.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_values_parse_and_children_keep_the_trace() {
        let t = TraceParent::generate();
        assert_eq!(TraceParent::parse(t.as_str()), Some(t.clone()));
        let c = t.child();
        assert_eq!(c.trace_id(), t.trace_id());
        assert!(t.sampled());
        let again = TraceParent::from_parts(t.trace_id(), t.parent_id(), false).unwrap();
        assert_eq!(again.parent_id(), t.parent_id());
        assert!(!again.sampled());
        assert_ne!(c, t);
    }

    #[test]
    fn invalid_values_are_refused() {
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c8031zz-b7ad6b7169203331-01",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad}");
        }
        assert!(
            TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").is_some()
        );
    }
}
