//! The OpenAI-compatible API surface: whether ingest serves it and where (the document's
//! `API_SERVER_ENABLED`, `API_SERVER_HOST`, `API_SERVER_PORT`, mapped onto
//! `HERMES_HTTP_ADDR`: docs/configuration.md, the API server), which browser origins may
//! call it (CORS), the model name it advertises, and what images a caller may send and the llm stage fetch for them
//! (`docs/api.md`, images; `docs/security.md`).

use std::net::IpAddr;
use std::time::Duration;

use super::Unset::{Means, Value};
use super::{kinds, settings};
use crate::AllowRule;

settings! {
    /// The API surface.
    SETTINGS = [
        API_SERVER_ENABLED: bool {
            kind: kinds::BOOL,
            unset: Value("true"),
            secret: false,
            help: "serve the API (`/v1/…` OpenAI-compatible routes, runs, jobs, the REST channel, `/openapi.json`); `false`: ingest serves only the channel and Forge webhooks and the MCP servers, and the API's routes answer 404. Default `true`, unlike the document's `false`: ingest is the API's own service",
        },
        API_SERVER_HOST: IpAddr {
            kind: kinds::IP_ADDR,
            unset: Means("(the host of HERMES_HTTP_ADDR)"),
            secret: false,
            help: "IP address ingest listens on: replaces the host of `HERMES_HTTP_ADDR` (one listener serves the API and the webhooks)",
        },
        API_SERVER_PORT: u16 {
            kind: kinds::PORT,
            unset: Means("(the port of HERMES_HTTP_ADDR)"),
            secret: false,
            help: "port ingest listens on: replaces the port of `HERMES_HTTP_ADDR`",
        },
        API_SERVER_CORS_ORIGINS: Vec<String> {
            kind: kinds::ORIGIN_LIST,
            unset: Means("(none: CORS off)"),
            secret: false,
            help: "comma-separated browser origins (exact `scheme://host[:port]`) allowed to call the API; unset, no CORS headers are sent",
        },
        API_SERVER_MODEL_NAME: String {
            kind: kinds::TEXT,
            unset: Means("(none: `[api] model_name`)"),
            secret: false,
            help: "model name advertised by `/v1/models` and `/v1/capabilities` and echoed in answers; wins over `[api] model_name`",
        },
        HERMES_IMAGE_MAX_BYTES: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("5242880"),
            secret: false,
            help: "largest image an API caller may send, decoded (`data:` URL, else 400 `image_too_large`) or fetched by the llm stage (http(s) URL, else the run fails `invalid`); also the largest chat platform photo downloaded (else its sender is told)",
        },
        HERMES_IMAGE_MAX_COUNT: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("10"),
            secret: false,
            help: "most images one API request may carry, counted over the whole conversation it sends (earlier responses it continues included); more is 400 `too_many_images`",
        },
        HERMES_IMAGE_INLINE_MAX_BYTES: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("20971520"),
            secret: false,
            help: "most image bytes (decoded) the llm stage inlines into one model call, `data:` images, fetched URLs and chat platform photos together; beyond, the run fails `invalid` and no model is asked",
        },
        HERMES_IMAGE_FETCH_DEADLINE_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("30"),
            secret: false,
            help: "how long the llm stage may take to fetch all the images of one model call (a few at a time); past it the run fails `invalid` and no model is asked",
        },
        HERMES_IMAGE_FETCH_ALLOW: Vec<AllowRule> {
            kind: kinds::ALLOW_LIST,
            unset: Means("(none)"),
            secret: false,
            help: "comma-separated host names or CIDR ranges an API caller's image URL may reach although not public (else refused)",
        },
    ]
}
