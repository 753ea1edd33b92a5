//! [`TestFleet`]: a test environment and the fleet started on it, set up in one expression
//! and removed together when dropped.
//!
//! ```no_run
//! # async fn example(provider: &wiremock::MockServer) {
//! use hermes::Service;
//! use hermes_testkit::TestFleet;
//!
//! let fleet = TestFleet::builder()
//!     .services([Service::Router, Service::Llm])
//!     .openai_mock(&provider.uri())
//!     .set("HERMES_COMMIT_GROUP", "1")
//!     .start()
//!     .await;
//! let resp = fleet.chat("hi").await;
//! # }
//! ```

use std::ops::Deref;

use hermes::Service;

use crate::{Fleet, TestEnv};

/// A fleet running in this process on its own [`TestEnv`]. Dereferences to the [`Fleet`];
/// the environment is [`TestFleet::env`].
pub struct TestFleet {
    // Field order is drop order: the fleet goes before the queues and database under it.
    fleet: Fleet,
    env: TestEnv,
}

impl TestFleet {
    /// A fleet of every service on a fresh environment, unless the builder says otherwise.
    pub fn builder() -> TestFleetBuilder {
        TestFleetBuilder {
            services: Service::ALL.to_vec(),
            openai: None,
            vars: Vec::new(),
        }
    }

    /// The environment the fleet runs on (its namespace, database, variables).
    pub fn env(&self) -> &TestEnv {
        &self.env
    }

    /// Stop the fleet the way SIGTERM does and return its result; the environment is then
    /// removed.
    pub async fn stop(self) -> anyhow::Result<()> {
        let Self { fleet, env } = self;
        let stopped = fleet.stop().await;
        drop(env);
        stopped
    }
}

impl Deref for TestFleet {
    type Target = Fleet;

    fn deref(&self) -> &Fleet {
        &self.fleet
    }
}

/// What a [`TestFleet`] runs and with which settings.
#[must_use = "a builder does nothing until `start`"]
pub struct TestFleetBuilder {
    services: Vec<Service>,
    openai: Option<String>,
    vars: Vec<(String, String)>,
}

impl TestFleetBuilder {
    /// Run these services (all five by default).
    pub fn services(mut self, services: impl IntoIterator<Item = Service>) -> Self {
        self.services = services.into_iter().collect();
        self
    }

    /// Call models through the OpenAI-compatible fake at `base_url`
    /// ([`TestEnv::openai_mock`]).
    pub fn openai_mock(mut self, base_url: &str) -> Self {
        self.openai = Some(base_url.to_string());
        self
    }

    /// Set an environment variable of the fleet; later settings win, also over the fake's.
    pub fn set(mut self, name: &str, value: &str) -> Self {
        self.vars.push((name.to_string(), value.to_string()));
        self
    }

    /// Make the environment and start the fleet on it; returns once the fleet is ready.
    pub async fn start(self) -> TestFleet {
        let mut env = TestEnv::new().await;
        if let Some(base_url) = &self.openai {
            env.openai_mock(base_url);
        }
        for (name, value) in &self.vars {
            env.set(name, value);
        }
        let fleet = env.start(&self.services).await;
        TestFleet { fleet, env }
    }
}
