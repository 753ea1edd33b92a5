//! hermes-types: what travels between the stages of the fleet — the envelope, the domain
//! payloads (messages, model requests, tool requests, replies), the typed ids, and the small
//! enums they use (platforms, tiers, backends, agents, intents, stages). No I/O lives here.

pub mod agent;
pub mod backend;
pub mod data_url;
pub mod duration;
pub mod envelope;
pub mod ids;
pub mod intent;
pub mod model;
pub mod model_ref;
pub mod openai_wire;
pub mod stage;
pub mod sync;
pub mod trace;
pub mod ttl_cache;
