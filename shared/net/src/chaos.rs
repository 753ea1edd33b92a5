//! A TCP proxy that can cut every connection through it, to take a server away from the
//! fleet mid-test without touching the server other tests share, or stall them (connections
//! stay open, nothing goes through: a server under a memory alarm, a black-holed network).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A running proxy to `target`.
pub struct ChaosProxy {
    pub addr: SocketAddr,
    current: Arc<Mutex<CancellationToken>>,
    down: Arc<std::sync::atomic::AtomicBool>,
    stalled: tokio::sync::watch::Sender<bool>,
    stop: CancellationToken,
}

/// Copy `from` to `to`, holding every byte while the proxy is stalled.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl ChaosProxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let current = Arc::new(Mutex::new(CancellationToken::new()));
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = CancellationToken::new();
        let (stalled, _) = tokio::sync::watch::channel(false);
        let (cur, st, dn, stall) = (current.clone(), stop.clone(), down.clone(), stalled.clone());
        tokio::spawn(async move {
            loop {
                let (inbound, _) = tokio::select! {
                    _ = st.cancelled() => return,
                    a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
                };
                if dn.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropping the socket refuses the connection
                }
                let cut = cur.lock().unwrap().clone();
                let stall = stall.subscribe();
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (in_r, in_w) = inbound.into_split();
                    let (out_r, out_w) = outbound.into_split();
                    tokio::select! {
                        _ = cut.cancelled() => {}
                        _ = forward(in_r, out_w, stall.clone()) => {}
                        _ = forward(out_r, in_w, stall) => {}
                    }
                });
            }
        });
        Self {
            addr,
            current,
            down,
            stalled,
            stop,
        }
    }

    /// Take the server away (cut and refuse connections) or bring it back.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, std::sync::atomic::Ordering::SeqCst);
        if down {
            self.cut();
        }
    }

    /// Hold every byte in both directions without closing anything, or let them flow again.
    pub fn set_stalled(&self, stalled: bool) {
        self.stalled.send_replace(stalled);
    }

    /// Drop every connection open through the proxy; new ones go through again.
    pub fn cut(&self) {
        let mut cur = self.current.lock().unwrap();
        cur.cancel();
        *cur = CancellationToken::new();
    }
}

impl Drop for ChaosProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.current.lock().unwrap().cancel();
    }
}
