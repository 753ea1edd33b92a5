//! The console's killswitch (docs/console.md): whether every model call of the fleet is
//! blocked, and today's spend against `LLM_GLOBAL_DAILY_BUDGET_USD`; turned on or off with a
//! confirmation ticked on the form. It is the same switch as `hermes killswitch`, kept in
//! PostgreSQL and Redis by the gateway's budgets; turning it on pages ops as the command does,
//! and each change is written to the activity log with who made it.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use hermes_alerts::AlertKind;
use hermes_db::console_sessions::Login;
use hermes_gateway::budget::{Budgets, SpendStatus};

use super::html::{esc, log_action, page, refusal, see_other};
use super::session::{csrf_ok, field, forbidden};
use crate::AppState;

/// The longest reason kept.
const MAX_REASON: usize = 200;

pub(super) fn budgets(app: &AppState) -> Budgets {
    let ctx = &app.ctx;
    Budgets::new(
        ctx.cache.clone(),
        Some(ctx.db.clone()),
        ctx.metrics.clone(),
        &ctx.config,
    )
}

/// `GET /console/killswitch`
pub async fn show(State(app): State<AppState>, Extension(login): Extension<Login>) -> Response {
    let Ok(status) = budgets(&app).status().await else {
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Unavailable",
            Some(&login),
            "<p class=\"error\">Neither Redis nor PostgreSQL answered; reload shortly.</p>",
        );
    };
    let body = panel(&status, &login);
    page(StatusCode::OK, "Killswitch", Some(&login), &body)
}

/// The killswitch's state, today's spend against the cap, and the confirmed form that turns
/// it on or off: this page's body, and a section of the overview.
pub(super) fn panel(status: &SpendStatus, login: &Login) -> String {
    let state = match &status.killswitch {
        Some(k) => format!(
            "<p class=\"error\"><strong>On</strong> since {} ({}): every model call is blocked.</p>",
            esc(&k.on_since.to_rfc3339()),
            esc(&k.reason)
        ),
        None => "<p class=\"completed\"><strong>Off</strong>: model calls go through.</p>".into(),
    };
    let spend = match status.cap_micro_usd {
        Some(cap) => format!(
            "<p>Spent today (UTC): ${:.6} of ${:.2}.</p>",
            status.spent_today_usd,
            cap as f64 / 1_000_000.0
        ),
        None => format!(
            "<p>Spent today (UTC): ${:.6}; no daily cap (LLM_GLOBAL_DAILY_BUDGET_USD).</p>",
            status.spent_today_usd
        ),
    };
    let (action, label, warning) = if status.killswitch.is_some() {
        (
            "off",
            "Turn the killswitch off",
            "Model calls go through again",
        )
    } else {
        (
            "on",
            "Turn the killswitch on",
            "Every model call of the fleet stops now; users get a paused reply and their credit back",
        )
    };
    let reason = if action == "on" {
        format!(
            "<label for=\"reason\">Reason</label><input id=\"reason\" name=\"reason\" maxlength=\"{MAX_REASON}\" required>"
        )
    } else {
        String::new()
    };
    format!(
        "{state}{spend}<form method=\"post\" action=\"/console/killswitch\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <input type=\"hidden\" name=\"action\" value=\"{action}\">{reason}\
         <p><input type=\"checkbox\" id=\"confirm\" name=\"confirm\" value=\"yes\" required> \
         <label for=\"confirm\" class=\"inline\">{warning}</label></p>\
         <button type=\"submit\">{label}</button></form>",
        esc(&login.csrf),
    )
}

/// `POST /console/killswitch`: on or off, with the login's CSRF token and the confirmation.
pub async fn toggle(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    body: Bytes,
) -> Response {
    if !csrf_ok(&login, field(&body, "csrf").as_deref()) {
        return forbidden(Some(&login));
    }
    let refused =
        |status, why: &str| refusal(status, "Not changed", &login, why, "/console/killswitch");
    if field(&body, "confirm").as_deref() != Some("yes") {
        return refused(
            StatusCode::BAD_REQUEST,
            "Tick the confirmation to change the killswitch.",
        );
    }
    let by = super::approvals::answered_by(&login);
    let budgets = budgets(&app);
    let (kind, reason) = match field(&body, "action").as_deref() {
        Some("on") => {
            let reason = field(&body, "reason")
                .map(|r| r.trim().chars().take(MAX_REASON).collect::<String>())
                .filter(|r| !r.is_empty());
            let Some(reason) = reason else {
                return refused(StatusCode::BAD_REQUEST, "Say why.");
            };
            if budgets.killswitch_on(&reason).await.is_err() {
                return refused(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The killswitch is not on everywhere (PostgreSQL or Redis did not answer); try again.",
                );
            }
            app.ctx
                .alerts
                .send(
                    AlertKind::KillswitchOn,
                    "",
                    &format!("killswitch turned on from the console by {by} ({reason}): every model call is blocked"),
                )
                .await;
            ("killswitch_on", Some(reason))
        }
        Some("off") => {
            if budgets.killswitch_off().await.is_err() {
                return refused(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The killswitch is not off everywhere (PostgreSQL or Redis did not answer); try again.",
                );
            }
            ("killswitch_off", None)
        }
        _ => return refused(StatusCode::BAD_REQUEST, "Choose on or off."),
    };
    tracing::warn!(%by, kind, "killswitch changed from the console");
    log_action(
        &app,
        kind,
        serde_json::json!({ "by": by, "reason": reason, "from": "console" }),
    )
    .await;
    see_other("/console/killswitch")
}
