//! How full each queue is: one queue's depth and consumers, and the sampler that puts every
//! queue's into the metrics (docs/architecture.md#12-observability).

use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use tokio_util::sync::CancellationToken;

use crate::{Bus, BusError, Stage};

impl Bus {
    /// Messages ready and consumers attached, by passive declaration (no side effects).
    pub async fn queue_stats(&self, queue: &str) -> Result<(u32, u32), BusError> {
        let channel = self.channel().await?;
        let declare = channel.queue_declare(
            queue.to_string().into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        );
        let q = self.bounded("a passive queue declaration", declare).await;
        let _ = self
            .bounded("closing a channel", channel.close(200, "done".into()))
            .await;
        let q = q?;
        Ok((q.message_count(), q.consumer_count()))
    }

    /// Sample every queue's depth (work, parking and retry wait queues) and the work queues'
    /// consumer counts into the metrics, every `every`.
    pub fn spawn_queue_sampler(
        &self,
        every: Duration,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let bus = self.clone();
        tokio::spawn(async move {
            loop {
                let waiting = bus
                    .names()
                    .wait_queues(&bus.inner.settings)
                    .into_iter()
                    .map(|q| (q, false));
                let queues: Vec<(String, bool)> = Stage::ALL
                    .into_iter()
                    .flat_map(|stage| {
                        [
                            (bus.names().queue(stage), true),
                            (bus.names().parking(stage), false),
                        ]
                    })
                    .chain(waiting)
                    .collect();
                for (queue, with_consumers) in queues {
                    if let Ok((messages, consumers)) = bus.queue_stats(&queue).await {
                        let m = &bus.inner.metrics;
                        m.bus
                            .queue_messages
                            .with_label_values(&[&queue])
                            .set(i64::from(messages));
                        if with_consumers {
                            m.bus
                                .queue_consumers
                                .with_label_values(&[&queue])
                                .set(i64::from(consumers));
                        }
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
            }
        })
    }
}
