//! End-to-end tests of the fleet through its public surfaces, against the real servers.

mod agent_webhooks;
mod bus;
mod channels;
mod delivery;
mod delivery_copies;
mod deploy;
mod docs;
mod failures_told;
mod faults;
mod ingest;
mod key_budgets;
mod lifecycle;
mod llm;
mod outage;
mod outbox;
mod rest;
mod router;
mod runs_closed;
mod shutdown;
mod streaming;
mod tenants;
mod testkit;
mod thin_path;
mod tools;
mod topology;
