//! The ingest floor (docs/performance.md, Ingest): what the broker alone costs for what
//! ingest publishes per webhook. A raw publish-with-confirm of the same number of bytes (one
//! webhook's envelope) into a durable quorum queue of its own, persistent, with publisher
//! confirms and an in-flight window like the bus's, open loop at a fixed rate; each latency
//! runs from the publish's scheduled instant to its confirm (no coordinated omission). The
//! queue is consumed without acks as the bench drains ingest's router queue, and deleted by
//! [`Floor::close`].

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use tokio::sync::{Mutex, Semaphore};
use tokio_util::sync::CancellationToken;

use super::{Step, open_loop};

/// A throwaway quorum queue with a publisher-confirm channel and a consumer draining it.
pub(crate) struct Floor {
    connection: Connection,
    channel: Channel,
    queue: String,
    body: Arc<Vec<u8>>,
    window: Arc<Semaphore>,
    stop_drain: CancellationToken,
    drainer: tokio::task::JoinHandle<()>,
}

impl Floor {
    /// Declare `queue` (quorum, durable, expiring `expires` after its last use in case this
    /// process dies before [`Floor::close`]) and start draining it.
    pub(crate) async fn open(
        amqp_url: &str,
        queue: &str,
        body_len: usize,
        window: usize,
        expires: Duration,
    ) -> anyhow::Result<Self> {
        let connection = Connection::connect(
            amqp_url,
            ConnectionProperties::default()
                .with_connection_name("hermes-bench-ingest-floor".into()),
        )
        .await?;
        let channel = connection.create_channel().await?;
        let mut args = FieldTable::default();
        args.insert(
            ShortString::from("x-queue-type"),
            AMQPValue::LongString(LongString::from("quorum")),
        );
        args.insert(
            ShortString::from("x-expires"),
            AMQPValue::LongLongInt(expires.as_millis() as i64),
        );
        channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                args,
            )
            .await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        let consume = connection.create_channel().await?;
        let mut consumer = consume
            .basic_consume(
                queue.into(),
                "hermes-bench-floor-drain".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await?;
        let stop_drain = CancellationToken::new();
        let stop = stop_drain.clone();
        let drainer = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    next = consumer.next() => if next.is_none() { break },
                }
            }
            let _ = consume.close(200, "bench done".into()).await;
        });
        Ok(Self {
            connection,
            channel,
            queue: queue.to_string(),
            body: Arc::new(vec![b'x'; body_len.max(1)]),
            window: Arc::new(Semaphore::new(window.max(1))),
            stop_drain,
            drainer,
        })
    }

    /// Publish at `rate` a second for `secs` seconds, open loop; at most `max_in_flight`
    /// outstanding (beyond it a publish counts as dropped).
    pub(crate) async fn step(&self, rate: f64, secs: f64, max_in_flight: usize) -> Step {
        let total = (rate * secs).round().max(1.0) as u64;
        let latencies = Arc::new(Mutex::new(Vec::<u32>::with_capacity(total as usize)));
        let (dropped, send_secs) = open_loop(rate, total, max_in_flight, |_, due| {
            let (channel, queue, body, window, latencies) = (
                self.channel.clone(),
                self.queue.clone(),
                self.body.clone(),
                self.window.clone(),
                latencies.clone(),
            );
            async move {
                if publish(&channel, &queue, &body, &window).await {
                    let micros = due.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                    latencies.lock().await.push(micros);
                }
            }
        })
        .await;
        let mut lat = std::mem::take(&mut *latencies.lock().await);
        lat.sort_unstable();
        Step::of(total, dropped, lat, send_secs)
    }

    /// Stop draining and delete the queue (whatever it still holds).
    pub(crate) async fn close(self) -> anyhow::Result<()> {
        self.stop_drain.cancel();
        let _ = self.drainer.await;
        let deleted = self
            .channel
            .queue_delete(self.queue.as_str().into(), QueueDeleteOptions::default())
            .await;
        let _ = self.channel.close(200, "bench done".into()).await;
        let _ = self.connection.close(200, "bench done".into()).await;
        deleted?;
        Ok(())
    }
}

/// One persistent publish through the window, waiting for the broker's confirm, as the bus
/// publishes (docs/architecture.md#8-the-bus); `true` when confirmed.
async fn publish(channel: &Channel, queue: &str, body: &[u8], window: &Semaphore) -> bool {
    let Ok(_slot) = window.acquire().await else {
        return false;
    };
    let props = BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type("application/json".into())
        .with_message_id(uuid::Uuid::now_v7().to_string().into())
        .with_timestamp(chrono::Utc::now().timestamp() as u64);
    let Ok(confirm) = channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            body,
            props,
        )
        .await
    else {
        return false;
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(10), confirm).await,
        Ok(Ok(Confirmation::Ack(None)))
    )
}
