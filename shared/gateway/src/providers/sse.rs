//! A server-sent-events reader over a streaming HTTP response, as all three providers stream
//! (`event:` / `data:` lines, blank-line separated). It enforces the first-event and idle
//! timeouts, so a provider that goes quiet fails instead of hanging the call.

use std::time::Duration;

use reqwest::Response;

use super::ProviderError;
use super::http::transport_error;

/// One event: its name (`event:` line, if any) and its data lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// Reads events from a response body as its chunks arrive.
pub struct SseReader {
    resp: Response,
    buf: Vec<u8>,
    seen_any: bool,
    first_timeout: Duration,
    idle_timeout: Duration,
}

impl SseReader {
    pub fn new(resp: Response, first_timeout: Duration, idle_timeout: Duration) -> Self {
        Self {
            resp,
            buf: Vec::new(),
            seen_any: false,
            first_timeout,
            idle_timeout,
        }
    }

    /// The next event; `None` when the body ended (a partial trailing event is dropped).
    pub async fn next(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        loop {
            if let Some(event) = take_event(&mut self.buf) {
                if event.data.is_empty() && event.event.is_none() {
                    continue; // a comment or keep-alive
                }
                return Ok(Some(event));
            }
            let wait = if self.seen_any {
                self.idle_timeout
            } else {
                self.first_timeout
            };
            match tokio::time::timeout(wait, self.resp.chunk()).await {
                Err(_) => return Err(ProviderError::Timeout(wait)),
                Ok(Err(e)) => {
                    return Err(match transport_error(e, wait) {
                        ProviderError::Connect(m) => ProviderError::Interrupted(m),
                        other => other,
                    });
                }
                Ok(Ok(None)) => return Ok(None),
                Ok(Ok(Some(bytes))) => {
                    self.seen_any = true;
                    self.buf.extend_from_slice(&bytes);
                }
            }
        }
    }
}

/// Cut the first complete event off `buf`, if one is there.
fn take_event(buf: &mut Vec<u8>) -> Option<SseEvent> {
    let (end, sep) = find_separator(buf)?;
    let raw: Vec<u8> = buf.drain(..end + sep).collect();
    let text = String::from_utf8_lossy(&raw[..end]);
    let mut event = None;
    let mut data: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => event = Some(value.to_string()),
            "data" => data.push(value),
            _ => {}
        }
    }
    Some(SseEvent {
        event,
        data: data.join("\n"),
    })
}

/// Position and length of the first blank-line separator (`\n\n`, `\r\n\r\n` or `\r\r`).
fn find_separator(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < buf.len() {
        if buf[i..].starts_with(b"\r\n\r\n") {
            return Some((i, 4));
        }
        if buf[i..].starts_with(b"\n\n") || buf[i..].starts_with(b"\r\r") {
            return Some((i, 2));
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_at_blank_lines_in_any_line_ending() {
        let mut buf =
            b"event: message_start\ndata: {\"a\":1}\n\n: keep-alive\n\ndata: x\r\ndata: y\r\n\r\ndata: partial"
                .to_vec();
        assert_eq!(
            take_event(&mut buf),
            Some(SseEvent {
                event: Some("message_start".into()),
                data: "{\"a\":1}".into()
            })
        );
        assert_eq!(
            take_event(&mut buf),
            Some(SseEvent {
                event: None,
                data: String::new()
            })
        );
        assert_eq!(
            take_event(&mut buf),
            Some(SseEvent {
                event: None,
                data: "x\ny".into()
            })
        );
        assert_eq!(take_event(&mut buf), None);
        assert_eq!(buf, b"data: partial");
    }
}
