//! hermes-runtime: what a running service stands on — the context it is given (config and
//! handles on PostgreSQL, RabbitMQ and Redis), the stage loop (prepare → commit → ack, with
//! group commit), the outbox relay, the admin server (`/metrics`, `/healthz`, `/readyz`),
//! the HTTP error type of the public surfaces, accepting an inbound message (dedupe, rate
//! limit, confirmed publish), and shutdown.

pub mod accept;
pub mod admin;
mod api_error;
pub mod context;
pub mod http;
pub mod outages;
pub mod relay;
pub mod shutdown;
pub mod stage;
mod write_deadline;

pub use context::Ctx;
