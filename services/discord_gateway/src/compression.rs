//! Transport compression, `compress=zlib-stream`
//! (<https://discord.com/developers/docs/events/gateway#transport-compression>): every payload
//! of a connection is deflated through one zlib context and flushed with `Z_SYNC_FLUSH`, so a
//! payload ends where the bytes received end in `00 00 FF FF`, possibly after several binary
//! frames. The context lives as long as the connection; a new connection starts a new one.
//!
//! A Gateway that is not Discord could send a small payload that inflates without end: both
//! what is buffered and what one payload inflates to are bounded by the connection's message
//! limit.

use flate2::{Decompress, FlushDecompress};

/// The four bytes a `Z_SYNC_FLUSH` ends with: a payload is complete after them.
const SYNC_FLUSH: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Why a compressed payload could not be read: the connection is no longer usable.
#[derive(Debug, PartialEq, Eq)]
pub enum Inflate {
    /// More than the limit buffered, or inflated from one payload.
    TooLarge,
    /// Not a zlib stream, or a payload that is not UTF-8.
    Corrupt(String),
}

impl std::fmt::Display for Inflate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inflate::TooLarge => write!(f, "a compressed payload past the size limit"),
            Inflate::Corrupt(why) => write!(f, "a compressed payload that does not inflate: {why}"),
        }
    }
}

/// One connection's zlib stream.
pub struct ZlibStream {
    inflater: Decompress,
    /// Frames of a payload whose end has not come yet.
    pending: Vec<u8>,
    /// The most bytes buffered, and inflated from one payload.
    limit: usize,
}

impl ZlibStream {
    /// A new connection's stream, its payloads at most `limit` bytes either way.
    pub fn new(limit: usize) -> Self {
        Self {
            inflater: Decompress::new(true),
            pending: Vec::new(),
            limit,
        }
    }

    /// Take one binary frame: the payload it completes, if it does.
    pub fn push(&mut self, frame: &[u8]) -> Result<Option<String>, Inflate> {
        if self.pending.len() + frame.len() > self.limit {
            return Err(Inflate::TooLarge);
        }
        self.pending.extend_from_slice(frame);
        if !self.pending.ends_with(&SYNC_FLUSH) {
            return Ok(None);
        }
        let input = std::mem::take(&mut self.pending);
        let mut out = Vec::with_capacity((input.len() * 4).min(self.limit));
        let mut read = 0;
        loop {
            if out.len() == out.capacity() {
                if out.len() >= self.limit {
                    return Err(Inflate::TooLarge);
                }
                out.reserve((out.len().max(1024)).min(self.limit - out.len()));
            }
            let before = self.inflater.total_in();
            self.inflater
                .decompress_vec(&input[read..], &mut out, FlushDecompress::Sync)
                .map_err(|e| Inflate::Corrupt(e.to_string()))?;
            read += usize::try_from(self.inflater.total_in() - before).unwrap_or(usize::MAX);
            // Done when every byte was taken and the output had room to spare: nothing of
            // this payload is held back in the context.
            if read >= input.len() && out.len() < out.capacity() {
                break;
            }
        }
        String::from_utf8(out)
            .map(Some)
            .map_err(|e| Inflate::Corrupt(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use flate2::{Compress, Compression, FlushCompress};

    use super::*;

    /// Deflate `payload` on `context` and flush, as Discord does for each payload.
    fn deflate(context: &mut Compress, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(payload.len() + 64);
        let start = context.total_in();
        loop {
            let at = usize::try_from(context.total_in() - start).unwrap();
            context
                .compress_vec(&payload[at..], &mut out, FlushCompress::Sync)
                .unwrap();
            let taken = usize::try_from(context.total_in() - start).unwrap();
            if taken == payload.len() && out.len() < out.capacity() {
                return out;
            }
            out.reserve(out.capacity());
        }
    }

    #[test]
    fn payloads_share_one_context_and_may_span_frames() {
        let mut context = Compress::new(Compression::default(), true);
        let mut stream = ZlibStream::new(1 << 20);
        let first = deflate(
            &mut context,
            br#"{"op":10,"d":{"heartbeat_interval":45000}}"#,
        );
        assert!(first.ends_with(&SYNC_FLUSH));
        assert_eq!(
            stream.push(&first).unwrap().as_deref(),
            Some(r#"{"op":10,"d":{"heartbeat_interval":45000}}"#)
        );
        // The second payload leans on the first's dictionary, and comes in two frames.
        let second = deflate(
            &mut context,
            br#"{"op":11,"d":{"heartbeat_interval":45000}}"#,
        );
        let (a, b) = second.split_at(second.len() / 2);
        assert_eq!(stream.push(a).unwrap(), None);
        assert_eq!(
            stream.push(b).unwrap().as_deref(),
            Some(r#"{"op":11,"d":{"heartbeat_interval":45000}}"#)
        );
    }

    #[test]
    fn a_payload_larger_than_the_limit_or_not_zlib_is_refused() {
        let mut context = Compress::new(Compression::best(), true);
        let bomb = deflate(&mut context, &vec![b' '; 64 * 1024]);
        assert!(bomb.len() < 1024);
        assert_eq!(ZlibStream::new(4096).push(&bomb), Err(Inflate::TooLarge));
        let mut stream = ZlibStream::new(16);
        assert_eq!(stream.push(&[0; 17]), Err(Inflate::TooLarge));
        let garbage = [1, 2, 3, 4, 0x00, 0x00, 0xff, 0xff];
        assert!(matches!(
            ZlibStream::new(1024).push(&garbage),
            Err(Inflate::Corrupt(_))
        ));
    }
}
