//! A TCP proxy that can cut every connection through it, to take a server away from the
//! fleet mid-test without touching the server other tests share, or stall them (connections
//! stay open, nothing goes through: a server under a memory alarm, a black-holed network).
//! Over several servers it plays a Kubernetes Service: each new connection goes to the next
//! one that accepts (a load balancer in front of a broker cluster), and its servers can be
//! switched (a `-rw` Service moved to a promoted PostgreSQL).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    targets: Arc<Targets>,
}

/// The servers behind the proxy, tried in turn from the one after the last used.
struct Targets {
    addrs: Mutex<Vec<SocketAddr>>,
    next: AtomicUsize,
}

impl Targets {
    /// A connection to the next server that accepts one; none when every one refuses.
    async fn connect(&self) -> Option<TcpStream> {
        let addrs = self.addrs.lock().unwrap().clone();
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..addrs.len() {
            if let Ok(s) = TcpStream::connect(addrs[(first + k) % addrs.len()]).await {
                return Some(s);
            }
        }
        None
    }
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
        Self::balance(vec![target]).await
    }

    /// A proxy over several servers: each new connection goes to the next one that accepts
    /// (round robin, skipping a server that refuses), as a Service spreads connections over
    /// its pods.
    pub async fn balance(targets: Vec<SocketAddr>) -> Self {
        let targets = Arc::new(Targets {
            addrs: Mutex::new(targets),
            next: AtomicUsize::new(0),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let current = Arc::new(Mutex::new(CancellationToken::new()));
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = CancellationToken::new();
        let (stalled, _) = tokio::sync::watch::channel(false);
        let (cur, st, dn, stall) = (current.clone(), stop.clone(), down.clone(), stalled.clone());
        let to = targets.clone();
        tokio::spawn(async move {
            loop {
                let (inbound, _) = tokio::select! {
                    _ = st.cancelled() => return,
                    a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
                };
                if dn.load(Ordering::SeqCst) {
                    continue; // dropping the socket refuses the connection
                }
                let cut = cur.lock().unwrap().clone();
                let stall = stall.subscribe();
                let to = to.clone();
                tokio::spawn(async move {
                    let Some(outbound) = to.connect().await else {
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
            targets,
        }
    }

    /// Send new connections to `targets` from now on and cut the open ones, as a Service
    /// moved to a promoted server leaves nothing connected to the old one.
    pub fn switch(&self, targets: Vec<SocketAddr>) {
        *self.targets.addrs.lock().unwrap() = targets;
        self.cut();
    }

    /// Take the server away (cut and refuse connections) or bring it back.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers every connection with its one-byte name.
    async fn named(name: u8) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let _ = s.write_all(&[name]).await;
                tokio::spawn(async move {
                    let mut b = [0u8; 1];
                    let _ = s.read(&mut b).await;
                });
            }
        });
        (addr, task)
    }

    async fn who(proxy: &ChaosProxy) -> Option<u8> {
        let mut s = TcpStream::connect(proxy.addr).await.ok()?;
        let mut b = [0u8; 1];
        match s.read(&mut b).await {
            Ok(1) => Some(b[0]),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_balanced_proxy_spreads_connections_and_skips_a_server_that_refuses() {
        let (a, _ta) = named(b'a').await;
        let (b, tb) = named(b'b').await;
        let proxy = ChaosProxy::balance(vec![a, b]).await;
        let mut got = vec![who(&proxy).await, who(&proxy).await];
        got.sort();
        assert_eq!(got, vec![Some(b'a'), Some(b'b')]);
        tb.abort();
        // The listener closes once its task is gone; wait for b to refuse.
        while TcpStream::connect(b).await.is_ok() {
            tokio::task::yield_now().await;
        }
        for _ in 0..4 {
            assert_eq!(who(&proxy).await, Some(b'a'));
        }
    }

    #[tokio::test]
    async fn a_switched_proxy_sends_new_connections_to_the_new_server() {
        let (a, _ta) = named(b'a').await;
        let (b, _tb) = named(b'b').await;
        let proxy = ChaosProxy::start(a).await;
        assert_eq!(who(&proxy).await, Some(b'a'));
        proxy.switch(vec![b]);
        assert_eq!(who(&proxy).await, Some(b'b'));
        assert_eq!(who(&proxy).await, Some(b'b'));
    }
}
