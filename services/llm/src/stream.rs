//! Streaming to API callers: text deltas of a run go onto its event stream in Redis as they
//! arrive, where the waiting ingest replica reads them. The provider adapter pushes into an
//! unbounded channel (it must never wait on Redis); one task per run appends in order.

use hermes_cache::run_events::{Appended, RunEvent, RunEvents};
use hermes_runtime::Ctx;
use hermes_types::ids::RunId;
use hermes_types::model::Platform;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use hermes_gateway::providers::DeltaSink;

/// The delta sink of one streamed run.
pub struct RunStream {
    tx: mpsc::UnboundedSender<String>,
    task: JoinHandle<()>,
}

impl RunStream {
    /// Start appending the deltas of `run`'s model call of `round` to its event stream,
    /// tagged with a token of this processing: a redelivery of the same call streams under
    /// another, and readers keep to the first.
    pub fn start(ctx: &Ctx, run: RunId, platform: Platform, round: u8) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let events = RunEvents::new(ctx.cache.clone(), &ctx.config);
        let attempt = uuid::Uuid::now_v7().simple().to_string();
        let task = tokio::spawn(async move {
            let mut failed = false;
            while let Some(text) = rx.recv().await {
                if failed {
                    continue;
                }
                let delta = RunEvent::Delta {
                    text,
                    round,
                    attempt: Some(attempt.clone()),
                };
                match events.append(run, platform, &delta).await {
                    Ok(Appended::Written(_) | Appended::ByReference(_)) => {}
                    // Nobody reads it, or the stream is at its byte bound: the caller gets
                    // the rest of the answer in the final event.
                    Ok(Appended::Unread | Appended::Full) => failed = true,
                    Err(e) => {
                        // The caller still gets the whole answer in the final event.
                        tracing::warn!(%run, error = %e, "stream delta not delivered; the rest is sent at the end");
                        failed = true;
                    }
                }
            }
        });
        Self { tx, task }
    }

    /// Wait until every delta sent so far is appended.
    pub async fn finish(self) {
        drop(self.tx);
        let _ = self.task.await;
    }
}

impl DeltaSink for RunStream {
    fn delta(&self, text: &str) {
        let _ = self.tx.send(text.to_string());
    }
}
