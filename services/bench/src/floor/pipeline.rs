//! The floor's pipeline: what the infrastructure must do for one API chat completion with
//! today's design, and nothing else (docs/performance.md, "The floor").
//!
//! Per message, as the fleet does it: a publish with confirm to `{ns}.router`; the router's
//! transaction (the run's row, then the idempotency record with the outbox row, committed
//! in groups as the router commits them), its row published right after the commit and
//! marked by the process's marker (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox); the llm stage's
//! duplicate check folded into its `running` update, the run's `running` event in Redis,
//! then its idempotency record with the outbox row, published the same way; delivery's
//! duplicate check, then the run's final update with its idempotency record, and the run's
//! final event in Redis. Every statement is the very function the stages call
//! (`hermes_db::runs`, `hermes_db::outbox`, `hermes_runtime::relay::eager`), and the relay
//! that sweeps is the fleet's own, so the floor follows the stages when their statements
//! change. What it leaves out is Hermes: HTTP, parsing and validation, the routing pipeline,
//! budgets, the model call, serialisation of real envelopes (the bodies are opaque bytes of
//! the same sizes).

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use hermes_bus::{Bus, Names, Outgoing, Stage};
use hermes_cache::Cache;
use hermes_cache::run_events::{RunEvent, RunEvents};
use hermes_config::{Config, Namespace};
use hermes_db::runs::{self, NewRun};
use hermes_db::{Db, DbError, outbox};
use hermes_runtime::relay::{Relay, eager};
use hermes_telemetry::Metrics;
use hermes_types::ids::{MessageId, RunId};
use hermes_types::model::{FinishReason, Outcome, Platform, Tier, Usage};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::fleet::load::{Ending, Requests};

/// Body sizes of one warm chat completion's messages (ingest → router, router → llm,
/// llm → delivery), read from the broker and the outbox.
const BODY_BYTES: [usize; 3] = [640, 1310, 513];

/// Attempts of one hop's work before its message is handed back to the broker.
const RETRIES: u32 = 30;

/// The floor running in this process: its consumers, its relay and its waiting requests.
pub struct Floor {
    bus: Bus,
    metrics: Metrics,
    waiters: Arc<Mutex<HashMap<RunId, oneshot::Sender<String>>>>,
    stop: CancellationToken,
    tasks: Mutex<JoinSet<()>>,
}

/// What every hop needs.
#[derive(Clone)]
struct Hop {
    db: Db,
    bus: Bus,
    metrics: Metrics,
    events: RunEvents,
    waiters: Arc<Mutex<HashMap<RunId, oneshot::Sender<String>>>>,
    commits: mpsc::Sender<RouterJob>,
}

/// One router message waiting for its group's commit.
struct RouterJob {
    message: Message,
    done: oneshot::Sender<Result<(), DbError>>,
}

/// What a floor body carries: the run, the message's own id and the request's token.
#[derive(Clone, Debug, PartialEq)]
struct Message {
    run: RunId,
    id: MessageId,
    token: String,
}

impl Message {
    /// The body: three lines, padded with spaces to `size` bytes.
    fn encode(&self, size: usize) -> Vec<u8> {
        let mut body = format!("{}\n{}\n{}\n", self.run, self.id, self.token).into_bytes();
        if body.len() < size {
            body.resize(size, b' ');
        }
        body
    }

    fn decode(body: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(body).ok()?;
        let mut lines = text.lines();
        let run = RunId::from(uuid::Uuid::parse_str(lines.next()?).ok()?);
        let id = MessageId::from(uuid::Uuid::parse_str(lines.next()?).ok()?);
        let token = lines.next()?.to_string();
        Some(Self { run, id, token })
    }

    /// The answer the request waits for: the echo of its token, as the fake model gives it.
    fn echo(&self) -> String {
        format!("echo: {}", self.token)
    }

    /// The next hop's message: the same run and token under a new id.
    fn next(&self) -> Self {
        Self {
            run: self.run,
            id: MessageId::new(),
            token: self.token.clone(),
        }
    }

    fn outgoing(&self, stage: Stage, size: usize) -> Outgoing {
        Outgoing {
            stage,
            message_id: self.id,
            traceparent: None,
            body: self.encode(size),
        }
    }
}

impl Floor {
    /// Connect to the broker and Redis under `ns`, declare its queues and start the three
    /// consumers, the router's committers and the relay, all on `db` (a migrated database).
    pub async fn start(config: &Config, db: Db, ns: Namespace) -> anyhow::Result<Arc<Self>> {
        let metrics = Metrics::new();
        let bus = Bus::connect(
            config.amqp_url.clone(),
            Names::new(ns.clone()),
            config.bus.clone(),
            metrics.clone(),
        )
        .await?;
        let cache = Cache::new(&config.redis_url, ns, metrics.clone())?;
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let relay = Relay::new(db.clone(), bus.clone(), metrics.clone());
        tasks.spawn(relay.run(stop.clone()));
        let (commits, queue) = mpsc::channel(1024);
        let queue = Arc::new(Mutex::new(queue));
        // As the router: a quarter of the pool commits, up to the commit group each time.
        for _ in 0..(config.db_pool_size / 4).max(1) {
            tasks.spawn(committer(
                Publisher {
                    db: db.clone(),
                    bus: bus.clone(),
                    metrics: metrics.clone(),
                },
                queue.clone(),
                config.bus.commit_group,
            ));
        }
        let waiters = Arc::new(Mutex::new(HashMap::new()));
        let hop = Hop {
            db: db.clone(),
            bus: bus.clone(),
            metrics: metrics.clone(),
            events: RunEvents::new(cache, config),
            waiters: waiters.clone(),
            commits,
        };
        let prefetch = config.bus.prefetch;
        for stage in [Stage::Router, Stage::Llm, Stage::Delivery] {
            let (hop, bus, stop) = (hop.clone(), bus.clone(), stop.clone());
            tasks.spawn(async move {
                bus.consume(stage, prefetch, stop, move |delivery| {
                    let hop = hop.clone();
                    async move { hop.handle(stage, delivery).await }
                })
                .await;
            });
        }
        Ok(Arc::new(Self {
            bus,
            metrics,
            waiters,
            stop,
            tasks: Mutex::new(tasks),
        }))
    }

    /// The floor's own broker publishes so far.
    pub fn published(&self) -> f64 {
        use prometheus::core::Collector;
        self.metrics
            .bus
            .published
            .collect()
            .iter()
            .flat_map(|family| family.get_metric())
            .map(|m| m.get_counter().get_value())
            .sum()
    }

    /// Stop the consumers and the relay, then delete the floor's queues.
    pub async fn stop(&self) {
        self.stop.cancel();
        let mut tasks = self.tasks.lock().await;
        while tasks.join_next().await.is_some() {}
        if let Err(e) = self.bus.delete_topology().await {
            eprintln!("bench floor: cannot delete the floor's queues (they expire): {e}");
        }
        self.bus.close().await;
    }
}

impl Requests for Floor {
    fn one<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Ending> {
        Box::pin(async move {
            let message = Message {
                run: RunId::new(),
                id: MessageId::new(),
                token: token.to_string(),
            };
            let (tx, rx) = oneshot::channel();
            self.waiters.lock().await.insert(message.run, tx);
            let sent = self
                .bus
                .publish_outgoing(&message.outgoing(Stage::Router, BODY_BYTES[0]))
                .await;
            if sent.is_err() {
                self.waiters.lock().await.remove(&message.run);
                return Ending::Refused;
            }
            match rx.await {
                Ok(answer) if answer == format!("echo: {token}") => Ending::Answered,
                Ok(_) => Ending::Wrong,
                Err(_) => Ending::Lost,
            }
        })
    }
}

impl Hop {
    /// One delivery of `stage`'s queue: its work, then the ack. A failure (the database out
    /// of connections, say) is retried here, as a stage pauses on a dependency that is down
    /// instead of spending the message's delivery budget; only a lasting one nacks it.
    async fn handle(&self, stage: Stage, delivery: Delivery) {
        let Some(message) = Message::decode(&delivery.data) else {
            let _ = delivery.acker.ack(BasicAckOptions::default()).await;
            return;
        };
        let mut backoff = std::time::Duration::from_millis(20);
        let mut tries = 0;
        let done = loop {
            let done = match stage {
                Stage::Router => self.router(message.clone()).await,
                Stage::Llm => self.llm(message.clone()).await,
                _ => self.delivery(message.clone()).await,
            };
            tries += 1;
            match done {
                Err(e) if tries < RETRIES => {
                    eprintln!("bench floor: {stage:?} hop failed, trying again: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
                }
                done => break done,
            }
        };
        let _ = match done {
            Ok(()) => delivery.acker.ack(BasicAckOptions::default()).await,
            Err(e) => {
                eprintln!("bench floor: {stage:?} hop failed {tries} times, redelivering: {e}");
                let requeue = BasicNackOptions {
                    requeue: true,
                    ..Default::default()
                };
                delivery.acker.nack(requeue).await
            }
        };
    }

    /// The router: its transaction is committed by a committer, with whatever other
    /// messages are waiting.
    async fn router(&self, message: Message) -> Result<(), DbError> {
        let (done, rx) = oneshot::channel();
        self.commits
            .send(RouterJob { message, done })
            .await
            .map_err(|_| DbError::Invalid("the floor's committers stopped".into()))?;
        rx.await
            .map_err(|_| DbError::Invalid("the floor's committer ended".into()))?
    }

    /// The llm stage without the model: the duplicate check folded into `running`, the run's
    /// `running` event, then the idempotency record with the outbox row, published eagerly.
    async fn llm(&self, message: Message) -> Result<(), DbError> {
        let mut client = self.db.get().await?;
        if !matches!(
            runs::begin_call(&client, message.run, "llm", message.id).await?,
            runs::Begin::Call { .. }
        ) {
            return Ok(());
        }
        self.events
            .append(message.run, Platform::Api, &RunEvent::Running { round: 0 })
            .await
            .map_err(|e| DbError::Invalid(e.to_string()))?;
        let next = message.next().outgoing(Stage::Delivery, BODY_BYTES[2]);
        let tx = client.transaction().await?;
        let hold = eager::hold(&self.db);
        let ids =
            outbox::record_processed(&tx, "llm", message.id, std::slice::from_ref(&next), hold)
                .await?;
        tx.commit().await?;
        if let (Some(ids), Some(_)) = (ids, hold) {
            let rows = ids.into_iter().zip([next]).collect();
            eager::publish(&self.db, &self.bus, &self.metrics, rows).await;
        }
        Ok(())
    }

    /// Delivery to an API caller: pre-check, the run's final update with the idempotency
    /// record, then the final event on the run's stream and the waiting request answered.
    async fn delivery(&self, message: Message) -> Result<(), DbError> {
        let mut client = self.db.get().await?;
        if hermes_db::already_processed(&client, "delivery", message.id).await? {
            // Committed before, its event perhaps not appended: the caller reads the run.
            self.answer(message.run, message.echo()).await;
            return Ok(());
        }
        let text = message.echo();
        let outcome = Outcome::Answered {
            text: text.clone(),
            model: "floor".into(),
            usage: Usage::default(),
            finish_reason: FinishReason::Stop,
            tools_used: Vec::new(),
            transcript: Vec::new(),
        };
        let tx = client.transaction().await?;
        runs::close::with_outcome(&tx, message.run, &outcome, None, &[]).await?;
        outbox::record_processed(&tx, "delivery", message.id, &[], eager::hold(&self.db)).await?;
        tx.commit().await?;
        self.events
            .append(message.run, Platform::Api, &RunEvent::Final { outcome })
            .await
            .map_err(|e| DbError::Invalid(e.to_string()))?;
        self.answer(message.run, text).await;
        Ok(())
    }

    /// Hand `text` to the request waiting for `run`, if it still waits.
    async fn answer(&self, run: RunId, text: String) {
        if let Some(waiter) = self.waiters.lock().await.remove(&run) {
            let _ = waiter.send(text);
        }
    }
}

/// What publishes a commit's outbox rows right after it, as a stage does.
struct Publisher {
    db: Db,
    bus: Bus,
    metrics: Metrics,
}

/// Commit the router's transactions: take whatever messages are waiting (up to `group`,
/// never waiting for more), write each one's run and its idempotency record with the
/// outbox row in one transaction, commit once, publish the rows, answer each.
async fn committer(p: Publisher, queue: Arc<Mutex<mpsc::Receiver<RouterJob>>>, group: usize) {
    loop {
        let mut jobs = Vec::with_capacity(group);
        {
            let mut queue = queue.lock().await;
            let Some(first) = queue.recv().await else {
                return;
            };
            jobs.push(first);
            while jobs.len() < group {
                match queue.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
        }
        let messages: Vec<Message> = jobs.iter().map(|j| j.message.clone()).collect();
        let outcome = commit_group(&p.db, &messages).await;
        if let Ok(rows) = &outcome {
            eager::publish(&p.db, &p.bus, &p.metrics, rows.clone()).await;
        }
        for job in jobs {
            let _ = job.done.send(match &outcome {
                Ok(_) => Ok(()),
                Err(e) => Err(DbError::Invalid(e.to_string())),
            });
        }
    }
}

/// The group's transaction; the outbox rows it wrote, with their ids, when they are this
/// process's to publish.
async fn commit_group(db: &Db, messages: &[Message]) -> Result<Vec<(i64, Outgoing)>, DbError> {
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    let hold = eager::hold(db);
    let mut rows = Vec::new();
    for m in messages {
        let chat = m.run.to_string();
        runs::create(
            &tx,
            &NewRun {
                id: m.run,
                platform: Platform::Api,
                sender_id: "api",
                chat_id: &chat,
                external_message_id: None,
                tier: Tier::Free,
                input_text: Some(&m.token),
                metadata: None,
                api_key_id: None,
                traceparent: None,
            },
        )
        .await?;
        let next = m.next().outgoing(Stage::Llm, BODY_BYTES[1]);
        let ids = outbox::record_processed(&tx, "router", m.id, std::slice::from_ref(&next), hold)
            .await?;
        if let (Some(ids), Some(_)) = (ids, hold) {
            rows.extend(ids.into_iter().zip([next]));
        }
    }
    tx.commit().await?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_carries_its_message_and_is_padded_to_its_size() {
        let m = Message {
            run: RunId::new(),
            id: MessageId::new(),
            token: "bench f-1".into(),
        };
        let body = m.encode(600);
        assert_eq!(body.len(), 600);
        assert_eq!(Message::decode(&body), Some(m.clone()));
        let next = m.next();
        assert_eq!((next.run, &next.token), (m.run, &m.token));
        assert_ne!(next.id, m.id);
    }
}
