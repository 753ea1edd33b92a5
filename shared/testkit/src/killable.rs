//! [`KillableFleet`]: services in this process on a runtime of their own, so a test can kill
//! them the way `kill -9` kills a pod: every task stops at once where it is, every socket
//! closes, nothing runs its shutdown path. The broker then redelivers what they held unacked
//! and PostgreSQL rolls back their open transactions, which is what a fault test must survive.

use std::ops::Deref;
use std::time::Duration;

use hermes::{Listeners, Service};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::{App, TestEnv};

/// A fleet on its own runtime; what a test sends it is on the [`App`] it dereferences to.
pub struct KillableFleet {
    app: App,
    runtime: Option<tokio::runtime::Runtime>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestEnv {
    /// Start `services` on a runtime of their own (two worker threads), ready when this
    /// returns; see [`KillableFleet`].
    pub async fn start_killable(&self, services: &[Service]) -> KillableFleet {
        hermes_net::install_crypto_provider();
        hermes_telemetry::init_tracing(hermes_config::LogFormat::Text);
        // Bound here and handed over as std sockets: a tokio socket belongs to the runtime
        // that made it.
        let bind = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.set_nonblocking(true).expect("non-blocking socket");
            l
        };
        let (http, admin) = (bind(), bind());
        let http_addr = http.local_addr().unwrap();
        let admin_addr = admin.local_addr().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("killable-fleet")
            .enable_all()
            .build()
            .expect("a runtime for the fleet");
        let (tx, rx) = oneshot::channel::<()>();
        let config = self.config();
        let services = services.to_vec();
        let handle = runtime.spawn(async move {
            let listeners = Listeners {
                http: Some(tokio::net::TcpListener::from_std(http)?),
                admin: Some(tokio::net::TcpListener::from_std(admin)?),
            };
            hermes::run(config, &services, listeners, async {
                let _ = rx.await;
            })
            .await
        });
        let fleet = KillableFleet {
            app: App {
                http: http_addr,
                admin: admin_addr,
            },
            runtime: Some(runtime),
            stop: Some(tx),
            handle: Some(handle),
        };
        crate::eventually(
            Duration::from_secs(30),
            "the killable fleet is ready",
            || async {
                if fleet.handle.as_ref().is_some_and(|h| h.is_finished()) {
                    panic!("killable fleet stopped during start");
                }
                fleet.app.ready().await.then_some(())
            },
        )
        .await;
        fleet
    }
}

impl KillableFleet {
    /// Kill every task of the fleet at once, as `kill -9` would.
    pub fn kill(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }

    /// Stop the fleet the way SIGTERM does and return its result.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let result = self
            .handle
            .take()
            .expect("running")
            .await
            .expect("fleet task did not panic");
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        result
    }
}

impl Deref for KillableFleet {
    type Target = App;

    fn deref(&self) -> &App {
        &self.app
    }
}

impl Drop for KillableFleet {
    fn drop(&mut self) {
        // A runtime cannot be dropped from async code by blocking on its tasks.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
