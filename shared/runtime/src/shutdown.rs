//! Process lifecycle: the stop signal each service watches, and the fatal flag a component
//! raises when the process must exit non-zero (e.g. the broker stayed unreachable).

use std::sync::{Arc, Mutex};

use hermes_types::sync;
use tokio_util::sync::CancellationToken;

/// Raised by a component that cannot go on; the binary exits non-zero with the reason.
#[derive(Clone, Default)]
pub struct Fatal {
    reason: Arc<Mutex<Option<String>>>,
    token: CancellationToken,
}

impl Fatal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record the first fatal reason and wake whoever waits on [`Fatal::raised`].
    pub fn raise(&self, reason: impl Into<String>) {
        let mut slot = sync::lock(&self.reason);
        if slot.is_none() {
            *slot = Some(reason.into());
        }
        self.token.cancel();
    }

    pub fn reason(&self) -> Option<String> {
        sync::lock(&self.reason).clone()
    }

    pub async fn raised(&self) {
        self.token.cancelled().await
    }
}

/// Resolves on the first SIGTERM or SIGINT.
pub async fn signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("SIGINT received: shutting down"),
        _ = term => tracing::info!("SIGTERM received: shutting down"),
    }
}
