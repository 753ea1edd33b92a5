//! [`StageHarness`]: a stage's [`Handler`] driven directly, `prepare` then `commit`, against
//! this test's database, with no consumer loop and no message through the broker.
//!
//! What the stage loop adds around the two calls (the idempotency record, the outbox rows,
//! acks, retries: docs/architecture.md, "How a message travels") is the e2e tests' subject;
//! a harness test looks at one message's decision: what the commit wrote, and which
//! messages it would emit, returned instead of written to the outbox.

use hermes_runtime::Ctx;
use hermes_runtime::stage::{Handler, StageError};
use hermes_telemetry::Metrics;
use hermes_types::envelope::Envelope;

use crate::TestEnv;

/// One stage's handler on its own [`TestEnv`].
pub struct StageHarness<H> {
    handler: H,
    ctx: Ctx,
    // Last: the handler and its connections go before the database under them.
    env: TestEnv,
}

impl<H: Handler> StageHarness<H> {
    /// A context on `env`'s database and Redis whose bus never connects (the harness
    /// publishes nothing, so no broker is needed), and the handler built from it.
    pub async fn new(env: TestEnv, handler: impl FnOnce(Ctx) -> H) -> Self {
        let ctx = Ctx::without_broker(env.config(), Metrics::new())
            .await
            .expect("PostgreSQL is reachable");
        Self {
            handler: handler(ctx.clone()),
            ctx,
            env,
        }
    }

    /// The context the handler was built with (its metrics, cache, database).
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// The environment under the harness.
    pub fn env(&self) -> &TestEnv {
        &self.env
    }

    /// The handler's `prepare`, outside any transaction.
    pub async fn prepare(&self, msg: &Envelope) -> Result<H::Prepared, StageError> {
        self.handler.prepare(msg).await
    }

    /// The handler's `commit` in a transaction of its own, committed when it succeeds and
    /// rolled back otherwise; returns the messages it would emit.
    pub async fn commit(
        &self,
        msg: &Envelope,
        prepared: H::Prepared,
    ) -> Result<(Vec<Envelope>, H::After), StageError> {
        let mut client = self.ctx.db.get().await?;
        let tx = client
            .transaction()
            .await
            .map_err(hermes_db::DbError::from)?;
        let out = self.handler.commit(msg, prepared, &tx).await?;
        tx.commit().await.map_err(hermes_db::DbError::from)?;
        Ok(out)
    }

    /// `prepare` then `commit`, as the stage loop runs them for one delivery.
    pub async fn handle(&self, msg: &Envelope) -> Result<(Vec<Envelope>, H::After), StageError> {
        let prepared = self.prepare(msg).await?;
        self.commit(msg, prepared).await
    }
}
