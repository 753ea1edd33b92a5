//! The operator console (docs/console.md), served by ingest at `/console` when
//! `HERMES_CONSOLE=true`: server-rendered HTML over the same PostgreSQL rows the CLI and the
//! operator MCP server read, with no second source of truth; one small script follows a run in
//! flight, and every page reads without it.
//!
//! - `session`: logging in with an operator key, the cookie, CSRF, refusing other sites;
//! - `html`: escaping, the page frame and the headers that keep a page inert;
//! - `overview`: the fleet at a glance (`charts` draws its SVG);
//! - `runs`: the runs list and a run's page (`history` orders its events and model calls,
//!   `tool_calls` lists its tool rounds);
//! - `agents`: a workspace's agents, their presence, capacity and recent runs;
//! - `approvals`: the tool calls waiting for an operator, allowed or denied;
//! - `conversations`: a user's or chat's history, each message linked to its run;
//! - `jobs`: the scheduled jobs, paused, resumed or run now;
//! - `users`: the users, their credits, budgets and channels, and erasing a person;
//! - `parked`: the parking queues, a message's failure, replayed or purged when ticked;
//! - `killswitch`: every model call stopped or let through again, with a confirmation.

mod agents;
mod approvals;
mod charts;
mod conversations;
mod history;
mod html;
mod jobs;
mod killswitch;
mod overview;
mod parked;
mod runs;
mod session;
mod tool_calls;
mod users;

use axum::Router;
use axum::middleware;
use axum::routing::{get, post};

use crate::AppState;

/// The console's routes: the login form and the stylesheet open, every other page behind a
/// login.
pub fn routes(state: &AppState) -> Router<AppState> {
    let pages = Router::new()
        .route(
            "/console",
            get(|| async { html::see_other("/console/overview") }),
        )
        .route("/console/overview", get(overview::show))
        .route("/console/runs", get(runs::list))
        .route("/console/runs/{id}", get(runs::show))
        .route("/console/runs/{id}/events", get(runs::events))
        .route("/console/approvals", get(approvals::list))
        .route("/console/approvals/{id}", post(approvals::answer))
        .route("/console/agents", get(agents::list))
        .route("/console/conversations", get(conversations::list))
        .route("/console/conversations/{id}", get(conversations::show))
        .route("/console/parked", get(parked::list).post(parked::act))
        .route("/console/parked/{stage}/{id}", get(parked::show))
        .route("/console/jobs", get(jobs::list))
        .route("/console/jobs/{id}", post(jobs::act))
        .route("/console/users", get(users::list))
        .route("/console/users/{id}", get(users::show))
        .route("/console/users/{id}/erase", post(users::erase))
        .route(
            "/console/killswitch",
            get(killswitch::show).post(killswitch::toggle),
        )
        .route("/console/logout", post(session::logout))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            session::require_login,
        ));
    Router::new()
        .route(
            "/console/login",
            get(session::login_form).post(session::login),
        )
        .route(
            "/console/static/console.css",
            get(|| async { html::stylesheet() }),
        )
        .route("/console/static/live.js", get(|| async { html::script() }))
        .merge(pages)
}
