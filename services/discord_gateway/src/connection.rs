//! One WebSocket connection of a shard's session, from the connect to its end: Hello, then
//! Identify (through the process's identify gate) or Resume, heartbeats on Discord's
//! interval (the first after a random part of it, as the spec asks, so that shards
//! reconnecting together do not beat together), and every payload read through the
//! [`Session`], inflated first when the connection is compressed ([`crate::compression`]).
//! A `MESSAGE_CREATE` is published before the next payload is read, so the
//! sequence number a Resume carries is always that of the last event the broker confirmed.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hermes_config::GatewayCompression;
use rand::Rng;
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

use crate::Shared;
use crate::compression::ZlibStream;
use crate::events::{self, Unconfirmed};
use crate::protocol::{self, Payload};
use crate::session::{Opening, Session, Step, Zombie};

/// The largest message and frame taken from the Gateway: far above any payload Discord
/// sends a bot with these intents (a big guild's `GUILD_CREATE` is the largest), so only a
/// peer that is not Discord meets it.
pub const MAX_MESSAGE_BYTES: usize = 8 << 20;
/// How long connecting (TCP, TLS, upgrade) may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(15);
/// How long Hello may take after the upgrade.
const HELLO_WITHIN: Duration = Duration::from_secs(15);
/// How long one frame may take to be written; a peer that stops reading is a dead one.
const SEND_WITHIN: Duration = Duration::from_secs(10);
/// The close code of a close this client starts while meaning to resume: anything but
/// 1000 and 1001, which end the session on Discord's side.
const CLOSE_TO_RESUME: u16 = 4000;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How a connection ended, and what comes next.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Reconnect: resume when the session is held, identify otherwise.
    Reconnect(String),
    /// Reconnect after this wait with a new session (Invalid Session, not resumable).
    IdentifyAfter(Duration),
    /// The broker did not confirm a message: reconnect and resume from the event before it,
    /// after a backoff (the broker may stay away a while).
    Unconfirmed,
    /// Discord closed with a code after which a client must not reconnect.
    Fatal(u16),
    /// The shard's lease was lost or the process stops: the connection was closed.
    Stopped,
}

/// Run one connection of `session` until it ends; `established` is set once READY or
/// RESUMED arrived on it.
pub async fn run(
    shared: &Shared,
    session: &mut Session,
    stop: &CancellationToken,
    established: &mut bool,
) -> Ended {
    // A new session waits for the process's turn before connecting, not once connected:
    // Discord expects heartbeats from Hello on, and the wait may be long with many shards.
    if session.opening() == Opening::Identify {
        tokio::select! {
            _ = stop.cancelled() => return Ended::Stopped,
            () = shared.identify.wait(session.shard()) => {}
        }
    }
    let mut url = session.connect_url(&shared.gateway);
    let mut inflate = match shared.compression {
        GatewayCompression::ZlibStream => {
            url.query_pairs_mut().append_pair("compress", "zlib-stream");
            Some(ZlibStream::new(MAX_MESSAGE_BYTES))
        }
        GatewayCompression::None => None,
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES));
    let connect = tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), true);
    let mut ws = tokio::select! {
        _ = stop.cancelled() => return Ended::Stopped,
        r = timeout(CONNECT_WITHIN, connect) => match r {
            Ok(Ok((ws, _))) => ws,
            Ok(Err(e)) => return Ended::Reconnect(format!("cannot connect: {e}")),
            Err(_) => return Ended::Reconnect("connecting timed out".into()),
        },
    };
    session.connected();
    let interval = tokio::select! {
        _ = stop.cancelled() => return close(&mut ws, 1000, Ended::Stopped).await,
        hello = hello(&mut ws, &mut inflate, session) => match hello {
            Ok(interval) => interval,
            Err(ended) => return ended,
        },
    };
    let opening = match session.opening() {
        Opening::Identify => {
            shared.count(&shared.metrics.identifies, session);
            protocol::identify(&shared.token, session.shard())
        }
        Opening::Resume(id, seq) => protocol::resume(&shared.token, &id, seq),
    };
    if let Err(e) = send(&mut ws, opening).await {
        return e;
    }
    let jitter = interval.mul_f64(rand::rng().random_range(0.0..1.0));
    let mut next_beat = Instant::now() + jitter;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return close(&mut ws, 1000, Ended::Stopped).await,
            () = sleep_until(next_beat) => {
                next_beat += interval;
                match session.heartbeat_due() {
                    Ok(seq) => {
                        if let Err(e) = send(&mut ws, protocol::heartbeat(seq)).await {
                            return e;
                        }
                    }
                    Err(Zombie) => {
                        shared.count(&shared.metrics.heartbeat_ack_misses, session);
                        tracing::warn!(
                            shard = %session.shard(),
                            "Discord did not acknowledge the last heartbeat: reconnecting to resume"
                        );
                        let ended = Ended::Reconnect("heartbeat not acknowledged".into());
                        return close(&mut ws, CLOSE_TO_RESUME, ended).await;
                    }
                }
            }
            frame = ws.next() => {
                let text = match read(frame, &mut inflate) {
                    Read::Payload(text) => text,
                    Read::Partial => continue,
                    Read::Closed(frame) => return closed(session, frame.as_ref()),
                    Read::Failed(why) => return Ended::Reconnect(why),
                };
                let payload = match Payload::parse(&text) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(
                            shard = %session.shard(),
                            error = %e,
                            "a Gateway payload that is not one: skipped"
                        );
                        continue;
                    }
                };
                match step(shared, session, &payload, established).await {
                    Next::Read => {}
                    Next::Send(frame) => {
                        if let Err(e) = send(&mut ws, frame).await {
                            return e;
                        }
                    }
                    Next::End(code, ended) => return close(&mut ws, code, ended).await,
                }
            }
        }
    }
}

/// What one frame from the Gateway gave.
enum Read {
    /// A whole payload's JSON.
    Payload(String),
    /// Part of a compressed payload, or a frame that carries none (ping, pong).
    Partial,
    /// Discord closed the connection, with this frame.
    Closed(Option<CloseFrame>),
    /// The connection failed or ended, or a payload did not inflate: why.
    Failed(String),
}

/// Read `frame`, inflating it through the connection's zlib stream when it has one.
fn read(
    frame: Option<Result<Frame, tokio_tungstenite::tungstenite::Error>>,
    inflate: &mut Option<ZlibStream>,
) -> Read {
    match (frame, inflate) {
        (Some(Ok(Frame::Text(t))), _) => Read::Payload(t.as_str().to_owned()),
        (Some(Ok(Frame::Binary(b))), Some(z)) => match z.push(&b) {
            Ok(Some(text)) => Read::Payload(text),
            Ok(None) => Read::Partial,
            Err(e) => Read::Failed(e.to_string()),
        },
        (Some(Ok(Frame::Close(frame))), _) => Read::Closed(frame),
        (Some(Ok(_)), _) => Read::Partial,
        (Some(Err(e)), _) => Read::Failed(format!("the connection failed: {e}")),
        (None, _) => Read::Failed("the connection ended".into()),
    }
}

/// Wait for Hello, the first payload: the heartbeat interval, or how the connection ended.
async fn hello(
    ws: &mut Socket,
    inflate: &mut Option<ZlibStream>,
    session: &mut Session,
) -> Result<Duration, Ended> {
    let within = Instant::now() + HELLO_WITHIN;
    let text = loop {
        match timeout_at(within, ws.next())
            .await
            .map(|f| read(f, inflate))
        {
            Ok(Read::Payload(text)) => break text,
            Ok(Read::Partial) => continue,
            Ok(Read::Closed(frame)) => return Err(closed(session, frame.as_ref())),
            Ok(Read::Failed(_)) | Err(_) => return Err(Ended::Reconnect("no Hello".into())),
        }
    };
    match Payload::parse(&text).map(|p| session.on_payload(&p)) {
        Ok(Step::Hello(interval)) => Ok(interval),
        _ => {
            let ended = Ended::Reconnect("the first payload was not a Hello".into());
            Err(close(ws, CLOSE_TO_RESUME, ended).await)
        }
    }
}

/// What the connection does after a payload.
enum Next {
    /// Read the next one.
    Read,
    /// Send this frame, then read on.
    Send(String),
    /// Close with this code and end so.
    End(u16, Ended),
}

/// Act on one payload.
async fn step(
    shared: &Shared,
    session: &mut Session,
    payload: &Payload,
    established: &mut bool,
) -> Next {
    let shard = session.shard();
    match session.on_payload(payload) {
        Step::HeartbeatNow => Next::Send(protocol::heartbeat(session.seq())),
        Step::Hello(_) | Step::Ack | Step::Ignored => Next::Read,
        Step::Ready(bot) => {
            *established = true;
            shared.set_session(shard, true);
            tracing::info!(%shard, bot = bot.as_str(), "Discord Gateway session ready");
            Next::Read
        }
        Step::Resumed => {
            *established = true;
            shared.set_session(shard, true);
            shared.count(&shared.metrics.resumes, session);
            tracing::info!(%shard, "Discord Gateway session resumed");
            Next::Read
        }
        Step::Dispatch { event, seq } => {
            if event == "MESSAGE_CREATE" {
                let handled = events::message(shared, session.bot(), payload.data()).await;
                if let Err(Unconfirmed) = handled {
                    // Not handled: the Resume asks for it again once the broker is back.
                    return Next::End(CLOSE_TO_RESUME, Ended::Unconfirmed);
                }
            }
            session.handled(seq);
            Next::Read
        }
        Step::Reconnect => Next::End(
            CLOSE_TO_RESUME,
            Ended::Reconnect("Discord asked for a reconnect".into()),
        ),
        Step::InvalidSession { resumable: true } => Next::End(
            CLOSE_TO_RESUME,
            Ended::Reconnect("invalid session, resumable".into()),
        ),
        Step::InvalidSession { resumable: false } => {
            // The spec: wait between 1 and 5 seconds, then identify anew.
            let wait = Duration::from_millis(rand::rng().random_range(1000..=5000));
            tracing::info!(%shard, ?wait, "Discord invalidated the session: identifying anew");
            Next::End(1000, Ended::IdentifyAfter(wait))
        }
        Step::Malformed(why) => {
            tracing::warn!(%shard, why, "a Gateway payload of the wrong shape: skipped");
            Next::Read
        }
    }
}

/// Send one text frame, bounded in time.
async fn send(ws: &mut Socket, text: String) -> Result<(), Ended> {
    match timeout(SEND_WITHIN, ws.send(Frame::text(text))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Ended::Reconnect(format!("cannot send: {e}"))),
        Err(_) => Err(Ended::Reconnect("sending timed out".into())),
    }
}

/// Close the connection with `code` (bounded in time: a dead peer is not waited for) and
/// end as `ended`.
async fn close(ws: &mut Socket, code: u16, ended: Ended) -> Ended {
    let frame = CloseFrame {
        code: CloseCode::from(code),
        reason: "".into(),
    };
    let _ = timeout(SEND_WITHIN, ws.close(Some(frame))).await;
    ended
}

/// Discord closed the connection with `frame`.
fn closed(session: &mut Session, frame: Option<&CloseFrame>) -> Ended {
    // No close frame is 1005, "no status": resumable.
    let code = frame.map_or(1005, |f| u16::from(f.code));
    match session.on_close(code) {
        protocol::CloseKind::Fatal => Ended::Fatal(code),
        _ => Ended::Reconnect(format!("Discord closed the connection ({code})")),
    }
}
