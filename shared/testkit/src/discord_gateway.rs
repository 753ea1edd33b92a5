//! A fake of Discord's WebSocket Gateway for the tests (docs/channels.md, "Discord"), beside
//! the REST fake ([`crate::discord_fake`]): a test takes each connection the connector makes
//! ([`FakeGateway::connection`]) and scripts it as the spec describes Discord doing: Hello,
//! READY, dispatches with sequence numbers, RESUMED, op 7 Reconnect, op 9 Invalid Session,
//! close codes, or the connection dropped without a close. What the client sends (Identify,
//! Resume) is read back ([`GatewayConn::expect`]); its heartbeats are acknowledged (op 11)
//! unless the test stops that, to make the connection look zombied.
//! A client that asks for `compress=zlib-stream` gets every payload deflated as Discord
//! deflates it ([`GatewayConn::compressed`]). [`discord_gateway_bot`] answers
//! `GET /gateway/bot` on the REST fake.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use flate2::{Compress, Compression, FlushCompress};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Mutex, mpsc};
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// How long a test waits for the connector's next connection or frame.
const WAIT: Duration = Duration::from_secs(30);

/// The fake Gateway: a WebSocket server on a free local port.
pub struct FakeGateway {
    url: String,
    connections: Mutex<mpsc::UnboundedReceiver<GatewayConn>>,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeGateway {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeGateway {
    /// Start the fake; pass [`FakeGateway::url`] as `DISCORD_GATEWAY_URL`.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::unbounded_channel();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                // The client asks for transport compression in the URL's query. The callback's
                // error type is tungstenite's (an HTTP response), large as it is.
                let mut compressed = false;
                #[allow(clippy::result_large_err)]
                let asked = |req: &Request, resp: Response| {
                    compressed = req
                        .uri()
                        .query()
                        .unwrap_or("")
                        .split('&')
                        .any(|p| p == "compress=zlib-stream");
                    Ok(resp)
                };
                let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, asked).await else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                if tx.send(GatewayConn::serve(ws, compressed)).is_err() {
                    return;
                }
            }
        });
        Self {
            url,
            connections: Mutex::new(rx),
            accepted,
            task,
        }
    }

    /// The Gateway's URL (`ws://127.0.0.1:<port>`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many WebSocket connections were opened so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// The connector's next connection (panics after 30 s without one).
    pub async fn connection(&self) -> GatewayConn {
        let mut rx = self.connections.lock().await;
        tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("the connector connects to the Gateway")
            .expect("the fake Gateway runs")
    }

    /// Whether a connection was made that no test took yet.
    pub async fn has_connection(&self) -> bool {
        !self.connections.lock().await.is_empty()
    }
}

/// What the test asks of one connection.
enum Command {
    Send(String),
    Close(u16),
    Drop,
}

/// One connection of the connector to the fake, scripted by the test.
pub struct GatewayConn {
    /// Whether the client asked for `compress=zlib-stream`: every payload is then deflated
    /// through one zlib context and sent as two binary frames, so that the client must join
    /// them.
    pub compressed: bool,
    commands: mpsc::UnboundedSender<Command>,
    received: mpsc::UnboundedReceiver<Received>,
    heartbeats: Arc<AtomicUsize>,
    acks: Arc<AtomicBool>,
    seq: u64,
}

/// What the client did on the connection.
enum Received {
    /// A payload other than a heartbeat.
    Payload(Value),
    /// It closed, with this code (1005 for none), or the connection ended (`None`).
    Closed(Option<u16>),
}

impl GatewayConn {
    fn serve(
        ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
        compressed: bool,
    ) -> GatewayConn {
        let (commands, mut todo) = mpsc::unbounded_channel::<Command>();
        let (tell, received) = mpsc::unbounded_channel();
        let heartbeats = Arc::new(AtomicUsize::new(0));
        let acks = Arc::new(AtomicBool::new(true));
        let (beats, ack) = (heartbeats.clone(), acks.clone());
        tokio::spawn(async move {
            let mut ws = ws;
            let mut zlib = compressed.then(|| Compress::new(Compression::default(), true));
            loop {
                tokio::select! {
                    command = todo.recv() => match command {
                        Some(Command::Send(text)) => {
                            if send_payload(&mut ws, zlib.as_mut(), &text).await.is_err() {
                                let _ = tell.send(Received::Closed(None));
                                return;
                            }
                        }
                        Some(Command::Close(code)) => {
                            let frame = CloseFrame { code: CloseCode::from(code), reason: "".into() };
                            let _ = ws.close(Some(frame)).await;
                            // Read on until the client answers the close.
                        }
                        Some(Command::Drop) | None => return,
                    },
                    frame = ws.next() => match frame {
                        Some(Ok(Frame::Text(t))) => {
                            let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                            if v["op"] == 1 {
                                beats.fetch_add(1, Ordering::SeqCst);
                                let ack_text = json!({"op": 11}).to_string();
                                if ack.load(Ordering::SeqCst)
                                    && send_payload(&mut ws, zlib.as_mut(), &ack_text).await.is_err()
                                {
                                    let _ = tell.send(Received::Closed(None));
                                    return;
                                }
                            } else {
                                let _ = tell.send(Received::Payload(v));
                            }
                        }
                        Some(Ok(Frame::Close(frame))) => {
                            let code = frame.map_or(1005, |f| u16::from(f.code));
                            let _ = tell.send(Received::Closed(Some(code)));
                            return;
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => {
                            let _ = tell.send(Received::Closed(None));
                            return;
                        }
                    },
                }
            }
        });
        GatewayConn {
            compressed,
            commands,
            received,
            heartbeats,
            acks,
            seq: 0,
        }
    }

    fn send(&self, v: Value) {
        let _ = self.commands.send(Command::Send(v.to_string()));
    }

    /// Hello (op 10) with `heartbeat_interval` milliseconds.
    pub fn hello(&self, heartbeat_interval_ms: u64) {
        self.send(json!({"op": 10, "d": {"heartbeat_interval": heartbeat_interval_ms}}));
    }

    /// The client's next payload other than a heartbeat, which must have opcode `op`
    /// (panics after 30 s, or when the client closed instead).
    pub async fn expect(&mut self, op: u8) -> Value {
        match tokio::time::timeout(WAIT, self.received.recv()).await {
            Ok(Some(Received::Payload(v))) => {
                assert_eq!(v["op"], op, "the client sent {v} instead of op {op}");
                v
            }
            Ok(Some(Received::Closed(code))) => {
                panic!("the client closed ({code:?}) instead of sending op {op}")
            }
            Ok(None) => panic!("the connection ended instead of op {op}"),
            Err(_) => panic!("no op {op} from the client within {WAIT:?}"),
        }
    }

    /// Hello, then the client's Identify (op 2), whose `d` is returned.
    pub async fn hello_and_identify(&mut self) -> Value {
        self.hello(45_000);
        self.expect(2).await["d"].take()
    }

    /// READY for the bot `bot_id`, as session `session_id`, resumable at `resume_url`.
    pub fn ready(&mut self, session_id: &str, resume_url: &str, bot_id: &str) {
        self.seq += 1;
        self.send(json!({
            "op": 0, "t": "READY", "s": self.seq,
            "d": {"v": 10, "session_id": session_id, "resume_gateway_url": resume_url,
                  "user": {"id": bot_id, "username": "hermes", "bot": true},
                  "guilds": [], "application": {"id": bot_id}}
        }));
    }

    /// Dispatch event `t` with data `d` as the next sequence number; that number.
    pub fn dispatch(&mut self, t: &str, d: Value) -> u64 {
        self.seq += 1;
        self.dispatch_at(self.seq, t, d);
        self.seq
    }

    /// Dispatch event `t` with data `d` as sequence number `seq` (a replay after a Resume).
    pub fn dispatch_at(&mut self, seq: u64, t: &str, d: Value) {
        self.seq = self.seq.max(seq);
        self.send(json!({"op": 0, "t": t, "s": seq, "d": d}));
    }

    /// RESUMED, after a replay, as the next sequence number.
    pub fn resumed(&mut self) {
        self.seq += 1;
        self.send(json!({"op": 0, "t": "RESUMED", "s": self.seq, "d": null}));
    }

    /// Continue a resumed session's numbering from `seq`.
    pub fn continue_from(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// Op 7: reconnect and resume.
    pub fn reconnect(&self) {
        self.send(json!({"op": 7, "d": null}));
    }

    /// Op 9: the session is invalid; `resumable` as `d`.
    pub fn invalid_session(&self, resumable: bool) {
        self.send(json!({"op": 9, "d": resumable}));
    }

    /// Op 1 from the server: heartbeat now.
    pub fn ask_heartbeat(&self) {
        self.send(json!({"op": 1, "d": null}));
    }

    /// Close the connection with `code`, as Discord does.
    pub fn close(&self, code: u16) {
        let _ = self.commands.send(Command::Close(code));
    }

    /// Drop the connection without a close frame (a network failure).
    pub fn drop_connection(self) {
        let _ = self.commands.send(Command::Drop);
    }

    /// Stop acknowledging heartbeats: the connection looks zombied to the client.
    pub fn stop_acks(&self) {
        self.acks.store(false, Ordering::SeqCst);
    }

    /// Heartbeats the client sent on this connection.
    pub fn heartbeats(&self) -> usize {
        self.heartbeats.load(Ordering::SeqCst)
    }

    /// Wait for the client to close the connection; its close code (`None`: it just ended).
    /// Payloads it sends meanwhile are skipped.
    pub async fn closed(&mut self) -> Option<u16> {
        loop {
            match tokio::time::timeout(WAIT, self.received.recv()).await {
                Ok(Some(Received::Payload(_))) => {}
                Ok(Some(Received::Closed(code))) => return code,
                Ok(None) => return None,
                Err(_) => panic!("the client did not close within {WAIT:?}"),
            }
        }
    }
}

/// Send one payload: a text frame, or with `zlib` deflated on the connection's context,
/// flushed as Discord flushes (`Z_SYNC_FLUSH`) and split over two binary frames.
async fn send_payload(
    ws: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    zlib: Option<&mut Compress>,
    text: &str,
) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    let Some(zlib) = zlib else {
        return ws.send(Frame::text(text)).await;
    };
    let mut out = Vec::with_capacity(text.len() + 64);
    let start = zlib.total_in();
    loop {
        let at = usize::try_from(zlib.total_in() - start).unwrap_or(usize::MAX);
        let rest = text.as_bytes().get(at..).unwrap_or_default();
        if zlib
            .compress_vec(rest, &mut out, FlushCompress::Sync)
            .is_err()
        {
            return Err(tokio_tungstenite::tungstenite::Error::ConnectionClosed);
        }
        let taken = usize::try_from(zlib.total_in() - start).unwrap_or(usize::MAX);
        if taken >= text.len() && out.len() < out.capacity() {
            break;
        }
        out.reserve(out.capacity());
    }
    let (head, tail) = out.split_at(out.len() / 2);
    ws.send(Frame::binary(head.to_vec())).await?;
    ws.send(Frame::binary(tail.to_vec())).await
}

/// Answer `GET /gateway/bot` on the Discord REST fake `api` with `gateway` and `shards`.
pub async fn discord_gateway_bot(api: &MockServer, gateway: &str, shards: u32) {
    gateway_bot(api, gateway, shards, 1, 5).await;
}

/// From now on, answer `GET /gateway/bot` with `shards` and `max_concurrency`, as Discord does
/// once a bot has grown: it recommends more shards.
pub async fn discord_recommends(
    api: &MockServer,
    gateway: &str,
    shards: u32,
    max_concurrency: u32,
) {
    gateway_bot(api, gateway, shards, max_concurrency, 1).await;
}

/// Mount the answer to `GET /gateway/bot` at wiremock's `priority` (1 goes before 5).
async fn gateway_bot(
    api: &MockServer,
    gateway: &str,
    shards: u32,
    max_concurrency: u32,
    priority: u8,
) {
    Mock::given(method("GET"))
        .and(path("/api/v10/gateway/bot"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "url": gateway, "shards": shards,
            "session_start_limit": {"total": 1000, "remaining": 999,
                                    "reset_after": 14_400_000, "max_concurrency": max_concurrency}
        })))
        .with_priority(priority)
        .mount(api)
        .await;
}
