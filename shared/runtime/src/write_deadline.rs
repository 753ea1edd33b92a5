//! A connection whose writes must make progress (docs/security.md, "The front door under
//! slow or hostile clients"): a client that stops reading leaves the server's writes
//! pending once the socket's buffers are full; past the write timeout the write fails, and
//! hyper closes the connection, dropping the answer (an event stream, its slot, its key's
//! stream slot) with it. A connection with nothing to write is never cut: an idle event
//! stream waits for its next event as long as it likes.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus::IntCounter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner` with its writes bounded by `timeout` of no progress.
pub(crate) struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    /// Armed when a write or flush is first left pending; disarmed by progress.
    stalled: Option<Pin<Box<Sleep>>>,
    /// Counts a connection cut (`hermes_http_slow_clients_total{phase="write"}`).
    cuts: Option<IntCounter>,
}

impl<S> WriteDeadline<S> {
    pub(crate) fn new(inner: S, timeout: Duration, cuts: Option<IntCounter>) -> Self {
        Self {
            inner,
            timeout,
            stalled: None,
            cuts,
        }
    }

    /// What a pending write becomes: still pending within the timeout, an error after.
    fn stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        if let Some(c) = &self.cuts {
            c.inc();
        }
        tracing::info!(
            timeout_secs = timeout.as_secs(),
            "client took nothing of its answer within the write timeout; connection closed"
        );
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client did not take its answer within the write timeout",
        )))
    }

    fn progressed<T>(&mut self, ready: io::Result<T>) -> Poll<io::Result<T>> {
        self.stalled = None;
        Poll::Ready(ready)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(r) => self.progressed(r),
            Poll::Pending => self.stalled(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => self.progressed(r),
            Poll::Pending => self.stalled(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(r) => self.progressed(r),
            Poll::Pending => self.stalled(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_shutdown(cx) {
            Poll::Ready(r) => self.progressed(r),
            Poll::Pending => self.stalled(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use axum::Router;
    use axum::body::{Body, Bytes};
    use axum::routing::get;
    use futures_util::StreamExt;
    use tokio::io::AsyncWriteExt;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::http::{ConnLimits, serve};

    /// Set when the answer's body is dropped: the server let go of it.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// A server whose one route answers an endless body; the flag is set once a body is
    /// dropped.
    async fn endless(
        write_timeout: Duration,
    ) -> (std::net::SocketAddr, Arc<AtomicBool>, IntCounter) {
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = dropped.clone();
        let app = Router::new().route(
            "/",
            get(move || {
                let guard = Dropped(flag.clone());
                let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
                let body = futures_util::stream::repeat(chunk).map(move |c| {
                    let _alive = &guard;
                    Ok::<_, std::convert::Infallible>(c)
                });
                async move { Body::from_stream(body) }
            }),
        );
        let cuts = IntCounter::new("cuts", "cuts").unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = ConnLimits {
            header_timeout: Duration::from_secs(10),
            write_timeout,
            write_cuts: Some(cuts.clone()),
        };
        tokio::spawn(serve(listener, app, limits, CancellationToken::new()));
        (addr, dropped, cuts)
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_is_cut_after_the_write_timeout() {
        let (addr, dropped, cuts) = endless(Duration::from_millis(500)).await;
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut client = socket.connect(addr).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        // The client never reads: the buffers fill, the writes stall, the server gives up.
        let cut = tokio::time::timeout(Duration::from_secs(30), async {
            while !dropped.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(
            cut.is_ok(),
            "the answer of a client that stopped reading was kept"
        );
        assert_eq!(cuts.get(), 1);
        drop(client);
    }

    #[tokio::test]
    async fn a_client_that_reads_is_never_cut() {
        use tokio::io::AsyncReadExt;
        let (addr, dropped, cuts) = endless(Duration::from_millis(200)).await;
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        // Megabytes of it, read as they come: progress, however long it takes.
        let mut buf = vec![0u8; 64 * 1024];
        let mut read = 0usize;
        while read < 8 * 1024 * 1024 {
            read += client.read(&mut buf).await.unwrap();
        }
        assert!(!dropped.load(Ordering::SeqCst));
        assert_eq!(cuts.get(), 0);
    }
}
