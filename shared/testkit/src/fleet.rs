//! [`Fleet`]: services started in this process on free ports ([`crate::TestEnv::start`]);
//! what a test sends them is on the [`App`] it dereferences to.

use std::ops::Deref;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::App;

/// A fleet started in-process: the handle a test talks to it through.
pub struct Fleet {
    pub(crate) app: App,
    pub(crate) stop: Option<oneshot::Sender<()>>,
    pub(crate) handle: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Fleet {
    /// Wait until the fleet reports ready; a fleet that ends while starting fails the test.
    pub(crate) async fn wait_ready(&self) {
        crate::eventually(Duration::from_secs(30), "the fleet is ready", || async {
            if let Some(h) = &self.handle {
                assert!(!h.is_finished(), "fleet stopped during start");
            }
            self.app.ready().await.then_some(())
        })
        .await;
    }

    /// Stop the fleet the way SIGTERM does and return its result.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.handle
            .take()
            .expect("running")
            .await
            .expect("fleet task did not panic")
    }
}

impl Deref for Fleet {
    type Target = App;

    fn deref(&self) -> &App {
        &self.app
    }
}
