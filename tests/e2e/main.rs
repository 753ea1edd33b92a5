//! End-to-end tests of the fleet through its public surfaces, against the real servers.

mod agent_webhooks;
mod bus;
mod channels;
mod conversations;
mod delivery;
mod delivery_copies;
mod deploy;
mod docs;
mod faults;
mod ingest;
mod lifecycle;
mod llm;
mod outage;
mod outbox;
mod rest;
mod router;
mod runs_closed;
mod shutdown;
mod streaming;
mod testkit;
mod thin_path;
mod tool_grants;
mod tools;
mod topology;
