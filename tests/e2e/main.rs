//! End-to-end tests of the fleet through its public surfaces, against the real servers.

mod agent_webhooks;
mod bus;
mod channels;
mod delivery;
mod delivery_copies;
mod dependencies;
mod deploy;
mod docs;
mod faults;
mod ingest;
mod lifecycle;
mod llm;
mod outage;
mod outbox;
mod rest;
mod retention;
mod router;
mod runs_closed;
mod shutdown;
mod slow_clients;
mod streaming;
mod testkit;
mod thin_path;
mod tls;
mod tools;
mod topology;
