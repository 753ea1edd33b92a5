//! HTTP plumbing shared by the public surfaces: the error type ([`ApiError`], in
//! `api_error.rs`), the request metrics middleware, and the server loop that
//! bounds slow clients (headers by [`serve`], bodies by [`bound_body`]; `docs/security.md`).

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use hermes_telemetry::Metrics;
use hermes_telemetry::trace::{TARGET, adopt};
use hermes_types::trace::TraceParent;
use prometheus::IntCounter;
use tracing::Instrument;

pub use crate::api_error::{ApiError, ApiErrorCode};
use crate::write_deadline::WriteDeadline;

/// Count and time every request by method, matched route (not raw path) and status.
pub async fn track(State(metrics): State<Metrics>, req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let started = Instant::now();
    let span = server_span(&method, &route, req.headers());
    let resp = next.run(req).instrument(span.clone()).await;
    span.record(
        "http.response.status_code",
        i64::from(resp.status().as_u16()),
    );
    if resp.status().is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    let status = resp.status().as_u16().to_string();
    metrics
        .http
        .requests
        .with_label_values(&[&method, &route, &status])
        .inc();
    metrics
        .http
        .duration
        .with_label_values(&[&method, &route])
        .observe(started.elapsed().as_secs_f64());
    resp
}

/// The server span of a request (HTTP conventions: named by its route template, never its
/// raw path), continuing the caller's `traceparent`; what ingest accepts during it carries
/// it as its parent (docs/tracing.md).
fn server_span(method: &str, route: &str, headers: &axum::http::HeaderMap) -> tracing::Span {
    let span = tracing::info_span!(
        target: TARGET,
        "request",
        otel.name = %format!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = method,
        http.route = route,
        url.scheme = "http",
        http.response.status_code = tracing::field::Empty,
    );
    let parent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceParent::parse);
    adopt(&span, parent.as_ref());
    span
}

/// What one connection of [`serve`] may take of the server.
#[derive(Clone, Debug)]
pub struct ConnLimits {
    /// A request's whole header block must arrive within this.
    pub header_timeout: Duration,
    /// A client must take what is written to it within this (`WriteDeadline`); one that
    /// stops reading is disconnected.
    pub write_timeout: Duration,
    /// Counts the connections cut by `write_timeout`.
    pub write_cuts: Option<IntCounter>,
}

/// Serve `app` on `listener` until `stop`, then wait for the open connections to finish
/// their requests. Unlike `axum::serve`, which runs hyper without a timer, a client that has
/// not sent a request's whole header block within `header_timeout` is disconnected, so slow
/// or idle clients cannot hold connections (and their memory) for ever; a client that
/// leaves what is written to it untaken for `write_timeout` is disconnected too. Every
/// request carries its connection's peer address as `ConnectInfo<SocketAddr>` (per-client
/// limits read it).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let connections = TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, say: back off rather than spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone().map_request(
            move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            },
        ));
        let stop = stop.clone();
        let limits = limits.clone();
        connections.spawn(async move {
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let stream = WriteDeadline::new(stream, limits.write_timeout, limits.write_cuts);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            let mut conn = pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stop.cancelled() => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
        });
    }
    connections.close();
    connections.wait().await;
    Ok(())
}

/// A request body that fails once its deadline passes (see [`bound_body`]); its size hint
/// stays the inner body's, so a `Content-Length` over the limit is still refused unread.
struct Deadline {
    inner: Body,
    expiry: Pin<Box<tokio::time::Sleep>>,
    cut: Arc<AtomicBool>,
    timeout: Duration,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        // What has arrived is taken first: a body complete at the deadline is not cut.
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.expiry.as_mut().poll(cx).is_ready() {
            this.cut.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut(this.timeout)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Why a body was cut: its client did not send it within the bound.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimedOut(Duration);

/// Middleware: the request body must arrive within `timeout` of its headers. A body still
/// incomplete then fails to read, and the request is answered 408 (`body_timeout`) with
/// `Connection: close`, whatever the handler made of the failure. A body read in time is
/// untouched, and a handler that never reads its body is never cut.
pub async fn bound_body(
    State((timeout, metrics)): State<(Duration, Metrics)>,
    req: Request,
    next: Next,
) -> Response {
    if HttpBody::is_end_stream(req.body()) {
        return next.run(req).await;
    }
    let cut = Arc::new(AtomicBool::new(false));
    let (parts, body) = req.into_parts();
    let body = Deadline {
        inner: body,
        expiry: Box::pin(tokio::time::sleep(timeout)),
        cut: cut.clone(),
        timeout,
    };
    let resp = next.run(Request::from_parts(parts, Body::new(body))).await;
    if !cut.load(Ordering::Relaxed) {
        return resp;
    }
    metrics.http.slow_clients.with_label_values(&["body"]).inc();
    let mut resp = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        ApiErrorCode::BodyTimeout,
        format!(
            "the request body did not arrive within {} s",
            timeout.as_secs()
        ),
    )
    .into_response();
    resp.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    resp
}
