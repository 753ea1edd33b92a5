//! A TCP proxy that can cut every connection through it, to take a server away from the
//! fleet mid-test without touching the server other tests share.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A running proxy to `target`.
pub struct ChaosProxy {
    pub addr: SocketAddr,
    current: Arc<Mutex<CancellationToken>>,
    down: Arc<std::sync::atomic::AtomicBool>,
    stop: CancellationToken,
}

impl ChaosProxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let current = Arc::new(Mutex::new(CancellationToken::new()));
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = CancellationToken::new();
        let (cur, st, dn) = (current.clone(), stop.clone(), down.clone());
        tokio::spawn(async move {
            loop {
                let (mut inbound, _) = tokio::select! {
                    _ = st.cancelled() => return,
                    a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
                };
                if dn.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropping the socket refuses the connection
                }
                let cut = cur.lock().unwrap().clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = cut.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
        Self {
            addr,
            current,
            down,
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
