//! The bus (docs/architecture.md#8-the-bus): RabbitMQ with quorum queues, publisher confirms and manual acks.
//!
//! Separate connections publish and consume. A supervisor watches both; when either is
//! lost it reconnects with backoff, re-declares the topology, and bumps a generation that
//! wakes every consumer loop to re-subscribe. If the broker stays away longer than
//! `HERMES_BUS_RECONNECT_SECS` it reports a fatal error so the orchestrator restarts the pod.
//! We reconnect ourselves rather than rely on lapin's auto-recovery because in-flight
//! deliveries of a lost channel can no longer be acked and consumers must be re-spawned
//! with their own prefetch either way.

mod connect;
mod produce;
mod sampler;
mod topology;

use connect::open;
pub use connect::probe;

pub use hermes_types::stage::{Outgoing, Stage};
pub use topology::{
    Names, PARKING_MAX_LENGTH, PARKING_TTL, delay_label, parking_queue_args, wait_queue_args,
    work_queue_args,
};

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicCancelOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::{RwLock, Semaphore, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use hermes_config::BusSettings;
use hermes_telemetry::Metrics;
use hermes_types::envelope::Envelope;
use hermes_types::ids::MessageId;

/// What can go wrong talking to the broker.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("RabbitMQ is not connected")]
    NotConnected,
    #[error("RabbitMQ error: {0}")]
    Amqp(#[from] lapin::Error),
    #[error("the broker refused the message for {queue} (nack: queue full or unavailable)")]
    Nacked { queue: String },
    #[error("no queue is bound for {queue}: the message was returned")]
    Unroutable { queue: String },
    #[error(
        "the broker did not take and confirm the message within {0:?} (HERMES_PUBLISH_TIMEOUT_SECS)"
    )]
    PublishTimeout(Duration),
    /// The URL itself is never in the message: it carries the broker's password.
    #[error("AMQP_URL is not a valid amqp:// or amqps:// URL")]
    InvalidUrl,
    /// A broker that accepts and then never answers (hung, black-holed) must not hold a
    /// caller for ever: every exchange outside a publish is bounded by the publish timeout.
    #[error("the broker did not answer {what} within {after:?} (HERMES_PUBLISH_TIMEOUT_SECS)")]
    NoAnswer { what: &'static str, after: Duration },
}

struct Inner {
    url: SecretString,
    names: Names,
    settings: BusSettings,
    // Behind `Arc`s so that a caller clones one out and lets go of the lock before it talks
    // to the broker: a lock held across a broker round trip on a dead connection kept the
    // supervisor from ever dropping it, and the process from exiting past its bound.
    publish_conn: RwLock<Option<Arc<Connection>>>,
    publish_channel: RwLock<Option<Channel>>,
    consume_conn: RwLock<Option<Arc<Connection>>>,
    generation: watch::Sender<u64>,
    connected: AtomicBool,
    window: Semaphore,
    metrics: Metrics,
}

/// A handle on the broker, cheap to clone.
#[derive(Clone)]
pub struct Bus {
    inner: Arc<Inner>,
}

impl Bus {
    /// Connect both sides and declare the topology. Fails if the broker cannot be reached.
    pub async fn connect(
        url: SecretString,
        names: Names,
        settings: BusSettings,
        metrics: Metrics,
    ) -> Result<Self, BusError> {
        let bus = Self::unconnected(url, names, settings, metrics);
        bus.establish().await?;
        Ok(bus)
    }

    /// A handle that has not connected: every publish fails with [`BusError::NotConnected`]
    /// until a supervisor connects it. For driving a stage's handler without a broker.
    pub fn unconnected(
        url: SecretString,
        names: Names,
        settings: BusSettings,
        metrics: Metrics,
    ) -> Self {
        let window = Semaphore::new(settings.publish_window);
        Bus {
            inner: Arc::new(Inner {
                url,
                names,
                settings,
                publish_conn: RwLock::new(None),
                publish_channel: RwLock::new(None),
                consume_conn: RwLock::new(None),
                generation: watch::channel(0).0,
                connected: AtomicBool::new(false),
                window,
                metrics,
            }),
        }
    }

    /// One connection attempt: both connections, the confirm channel, the topology.
    async fn establish(&self) -> Result<(), BusError> {
        let i = &self.inner;
        let url = i.url.expose_secret();
        let ns = i.names.namespace().to_string();
        let frame_max = Some(i.settings.frame_max);
        let publish_conn = open(url, &format!("hermes-{ns}-publish"), frame_max).await?;
        let consume_conn = open(url, &format!("hermes-{ns}-consume"), frame_max).await?;
        topology::declare(&publish_conn, &i.names, &i.settings).await?;
        let channel = publish_conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        *i.publish_channel.write().await = Some(channel);
        *i.publish_conn.write().await = Some(Arc::new(publish_conn));
        *i.consume_conn.write().await = Some(Arc::new(consume_conn));
        i.connected.store(true, Ordering::SeqCst);
        i.metrics.bus.connected.set(1);
        i.generation.send_modify(|g| *g += 1);
        Ok(())
    }

    async fn healthy(&self) -> bool {
        let i = &self.inner;
        let p = i
            .publish_conn
            .read()
            .await
            .as_ref()
            .is_some_and(|c| c.status().connected());
        let c = i
            .consume_conn
            .read()
            .await
            .as_ref()
            .is_some_and(|c| c.status().connected());
        let ch = i
            .publish_channel
            .read()
            .await
            .as_ref()
            .is_some_and(|c| c.status().connected());
        p && c && ch
    }

    async fn drop_connections(&self) {
        let i = &self.inner;
        i.connected.store(false, Ordering::SeqCst);
        i.metrics.bus.connected.set(0);
        if let Some(ch) = i.publish_channel.write().await.take() {
            let _ =
                tokio::time::timeout(Duration::from_secs(1), ch.close(200, "closing".into())).await;
        }
        for slot in [&i.publish_conn, &i.consume_conn] {
            if let Some(conn) = slot.write().await.take() {
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    conn.close(200, "reconnecting".into()),
                )
                .await;
            }
        }
    }

    /// Watch the connections; reconnect when lost; call `fatal` with the reason if that
    /// takes longer than `HERMES_BUS_RECONNECT_SECS` (the process should then exit).
    pub fn spawn_supervisor(
        &self,
        stop: CancellationToken,
        fatal: impl FnOnce(String) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let bus = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                }
                if bus.healthy().await {
                    continue;
                }
                tracing::warn!("RabbitMQ connection lost; reconnecting");
                bus.drop_connections().await;
                let started = Instant::now();
                let mut delay = Duration::from_millis(100);
                loop {
                    if stop.is_cancelled() {
                        return;
                    }
                    // An attempt is bounded by what is left of the bound: a connect that hangs
                    // (a broker that accepts and never answers) must not keep the process
                    // from exiting for its orchestrator to restart it.
                    let left = bus
                        .inner
                        .settings
                        .reconnect_timeout
                        .saturating_sub(started.elapsed())
                        .max(Duration::from_millis(100));
                    let attempt = match tokio::time::timeout(left, bus.establish()).await {
                        Ok(result) => result.map_err(|e| e.to_string()),
                        Err(_) => Err(format!("no answer within {} ms", left.as_millis())),
                    };
                    match attempt {
                        Ok(()) => {
                            bus.inner.metrics.bus.reconnects.inc();
                            tracing::info!(
                                after_ms = started.elapsed().as_millis() as u64,
                                "RabbitMQ reconnected"
                            );
                            break;
                        }
                        Err(e) => {
                            bus.drop_connections().await;
                            if started.elapsed() >= bus.inner.settings.reconnect_timeout {
                                fatal(format!(
                                    "RabbitMQ unreachable for {}s: {e}",
                                    bus.inner.settings.reconnect_timeout.as_secs()
                                ));
                                return;
                            }
                            tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "RabbitMQ reconnect failed");
                            tokio::select! {
                                _ = stop.cancelled() => return,
                                _ = tokio::time::sleep(delay) => {}
                            }
                            delay = (delay * 2).min(Duration::from_secs(5));
                        }
                    }
                }
            }
        })
    }

    pub fn is_connected(&self) -> bool {
        self.inner.connected.load(Ordering::SeqCst)
    }

    pub fn names(&self) -> &Names {
        &self.inner.names
    }

    /// The frame size the broker agreed to on the publishing connection (`None` while
    /// disconnected): the lower of `HERMES_AMQP_FRAME_MAX` (or the URL's `frame_max`) and
    /// the broker's own limit.
    pub async fn frame_max(&self) -> Option<u32> {
        let conn = self.inner.publish_conn.read().await;
        conn.as_ref().map(|c| c.configuration().frame_max())
    }

    /// Publish an envelope to the queue of its kind and wait for the broker's confirm.
    pub async fn publish(&self, env: &Envelope) -> Result<(), BusError> {
        self.publish_outgoing(&Outgoing::from_envelope(env)).await
    }

    /// Publish an encoded message and wait for the broker's confirm.
    pub async fn publish_outgoing(&self, msg: &Outgoing) -> Result<(), BusError> {
        let queue = self.inner.names.queue(msg.stage);
        let exchange = self.inner.names.work_exchange();
        self.publish_to(&exchange, msg.stage.as_str(), &queue, msg)
            .await
    }

    /// Publish to an explicit exchange and routing key (used by DLQ replay).
    pub async fn publish_to(
        &self,
        exchange: &str,
        routing_key: &str,
        label: &str,
        msg: &Outgoing,
    ) -> Result<(), BusError> {
        self.publish_with_headers(exchange, routing_key, label, msg, &[])
            .await
    }

    /// Publish with extra AMQP headers (a parked message's failure reason) and wait for the
    /// broker's confirm. `label` names the target queue in metrics and errors.
    pub async fn publish_with_headers(
        &self,
        exchange: &str,
        routing_key: &str,
        label: &str,
        msg: &Outgoing,
        extra: &[(&str, &str)],
    ) -> Result<(), BusError> {
        let span = produce::span(exchange, routing_key, label, msg);
        self.publish_confirmed(exchange, routing_key, label, msg, extra)
            .instrument(span)
            .await
    }

    /// [`Bus::publish_with_headers`] inside its producer span.
    async fn publish_confirmed(
        &self,
        exchange: &str,
        routing_key: &str,
        label: &str,
        msg: &Outgoing,
        extra: &[(&str, &str)],
    ) -> Result<(), BusError> {
        let _permit = self
            .inner
            .window
            .acquire()
            .await
            .expect("window semaphore is never closed");
        let channel = self
            .inner
            .publish_channel
            .read()
            .await
            .clone()
            .ok_or(BusError::NotConnected)?;
        let mut headers = FieldTable::default();
        if let Some(tp) = &msg.traceparent {
            headers.insert(
                ShortString::from("traceparent".to_string()),
                AMQPValue::LongString(tp.as_bytes().to_vec().into()),
            );
        }
        for (name, value) in extra {
            headers.insert(
                ShortString::from(name.to_string()),
                AMQPValue::LongString(value.as_bytes().to_vec().into()),
            );
        }
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type("application/json".to_string().into())
            .with_message_id(msg.message_id.to_string().into())
            .with_timestamp(chrono::Utc::now().timestamp() as u64)
            .with_headers(headers);
        let started = Instant::now();
        let timeout = self.inner.settings.publish_timeout;
        let publish = async {
            let confirm = channel
                .basic_publish(
                    exchange.to_string().into(),
                    routing_key.to_string().into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    &msg.body,
                    props,
                )
                .await?;
            match confirm.await {
                Err(e) => Err(BusError::Amqp(e)),
                Ok(Confirmation::Ack(None)) => Ok(()),
                Ok(Confirmation::Ack(Some(_))) => Err(BusError::Unroutable {
                    queue: label.to_string(),
                }),
                Ok(Confirmation::Nack(_)) => Err(BusError::Nacked {
                    queue: label.to_string(),
                }),
                Ok(Confirmation::NotRequested) => Ok(()),
            }
        };
        // The whole publish is bounded, not only the confirm: a broker that blocks
        // publishers (a memory or disk alarm) holds `basic_publish` itself.
        let result = match tokio::time::timeout(timeout, publish).await {
            Ok(r) => r,
            Err(_) => Err(BusError::PublishTimeout(timeout)),
        };
        let m = &self.inner.metrics;
        m.bus
            .publish_duration
            .observe(started.elapsed().as_secs_f64());
        let outcome = match &result {
            Ok(()) => "confirmed",
            Err(BusError::Nacked { .. }) => "nacked",
            Err(BusError::Unroutable { .. }) => "unroutable",
            Err(BusError::PublishTimeout(_)) => "timeout",
            Err(_) => "error",
        };
        m.bus.published.with_label_values(&[label, outcome]).inc();
        produce::finish(&tracing::Span::current(), &result, outcome);
        result
    }

    /// Open a fresh channel on the consuming connection (for consumers and inspections).
    pub async fn channel(&self) -> Result<Channel, BusError> {
        let conn = self
            .inner
            .consume_conn
            .read()
            .await
            .clone()
            .ok_or(BusError::NotConnected)?;
        self.bounded("opening a channel", conn.create_channel())
            .await
    }

    /// `call` to the broker, failed with [`BusError::NoAnswer`] past the publish timeout.
    pub(crate) async fn bounded<T>(
        &self,
        what: &'static str,
        call: impl Future<Output = Result<T, lapin::Error>>,
    ) -> Result<T, BusError> {
        let after = self.inner.settings.publish_timeout;
        match tokio::time::timeout(after, call).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(BusError::NoAnswer { what, after }),
        }
    }

    /// Consume `stage`'s queue until `stop`, running `handle` for each delivery with at most
    /// `prefetch` in flight. The handler acks or nacks. On stop the consumer is cancelled and
    /// in-flight handlers finish before this returns; after a reconnect it re-subscribes.
    pub async fn consume<F, Fut>(
        &self,
        stage: Stage,
        prefetch: u16,
        stop: CancellationToken,
        handle: F,
    ) where
        F: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let handle = Arc::new(handle);
        let queue = self.inner.names.queue(stage);
        let mut generation = self.inner.generation.subscribe();
        let mut in_flight = JoinSet::new();
        let permits = Arc::new(Semaphore::new(usize::from(prefetch)));
        // The channel the in-flight deliveries came on. It must outlive them: dropping it
        // closes it, and the broker would hand their messages to another replica while they
        // still run here (a second model call, a second send). Kept until they finished.
        let mut current: Option<Channel> = None;
        'outer: loop {
            if stop.is_cancelled() {
                break;
            }
            let subscribed = async {
                let channel = self.channel().await?;
                let qos = channel.basic_qos(prefetch, BasicQosOptions::default());
                self.bounded("setting the prefetch", qos).await?;
                let tag = format!("{}-{}", queue, MessageId::new());
                let consume = channel.basic_consume(
                    queue.clone().into(),
                    tag.clone().into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                );
                let consumer = self.bounded("a subscription", consume).await?;
                Ok::<_, BusError>((channel, consumer, tag))
            }
            .await;
            let (channel, mut consumer, tag) = match subscribed {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(queue, error = %e, "cannot subscribe; waiting for the bus");
                    generation.borrow_and_update();
                    tokio::select! {
                        _ = stop.cancelled() => break 'outer,
                        _ = generation.changed() => {}
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                    continue;
                }
            };
            tracing::info!(queue, prefetch, "consuming");
            generation.borrow_and_update();
            // A re-subscription replaces a channel that is already gone with its connection.
            current = Some(channel.clone());
            loop {
                tokio::select! {
                    _ = stop.cancelled() => {
                        let _ = channel.basic_cancel(tag.clone().into(), BasicCancelOptions::default()).await;
                        break 'outer;
                    }
                    _ = generation.changed() => {
                        tracing::info!(queue, "bus reconnected; re-subscribing");
                        continue 'outer;
                    }
                    next = consumer.next() => match next {
                        Some(Ok(delivery)) => {
                            let permit = permits.clone().acquire_owned().await.expect("never closed");
                            let handle = handle.clone();
                            in_flight.spawn(async move {
                                handle(delivery).await;
                                drop(permit);
                            });
                            while in_flight.try_join_next().is_some() {}
                        }
                        Some(Err(e)) => {
                            tracing::warn!(queue, error = %e, "consumer error; re-subscribing");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue 'outer;
                        }
                        None => {
                            tracing::warn!(queue, "consumer stream ended; re-subscribing");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue 'outer;
                        }
                    }
                }
            }
        }
        while in_flight.try_join_next().is_some() {}
        let pending = in_flight.len();
        if pending > 0 {
            tracing::info!(queue, pending, "stopping: finishing in-flight messages");
        }
        while in_flight.join_next().await.is_some() {}
        if let Some(channel) = current.take() {
            let _ = channel.close(200, "consumer stopped".into()).await;
        }
        tracing::info!(queue, "consumer stopped");
    }

    /// Delete every queue and exchange of this namespace (a bench's or a harness's own, once
    /// done: each quorum queue costs the broker files and CPU).
    pub async fn delete_topology(&self) -> Result<(), BusError> {
        use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
        let ch = self.channel().await?;
        let names = &self.inner.names;
        let mut queues: Vec<String> = Stage::ALL
            .into_iter()
            .flat_map(|s| [names.queue(s), names.parking(s)])
            .collect();
        queues.extend(names.wait_queues(&self.inner.settings));
        for q in queues {
            ch.queue_delete(q.into(), QueueDeleteOptions::default())
                .await?;
        }
        for e in [names.work_exchange(), names.dead_exchange()] {
            ch.exchange_delete(e.into(), ExchangeDeleteOptions::default())
                .await?;
        }
        let _ = ch.close(200, "deleted".into()).await;
        Ok(())
    }

    /// Close both connections (after consumers have stopped).
    pub async fn close(&self) {
        self.drop_connections().await;
    }
}

/// How many times the broker has delivered this message before (quorum queues count it).
pub fn delivery_count(d: &Delivery) -> u32 {
    d.properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get("x-delivery-count").cloned())
        .and_then(|v| match v {
            AMQPValue::LongLongInt(n) => u32::try_from(n).ok(),
            AMQPValue::LongInt(n) => u32::try_from(n).ok(),
            AMQPValue::ShortInt(n) => u32::try_from(n).ok(),
            _ => None,
        })
        .unwrap_or(0)
}
