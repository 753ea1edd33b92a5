//! The console's HTML, server-rendered (docs/console.md): every string a person or a model
//! wrote goes through [`esc`], and every page carries the headers that keep it inert
//! (a Content-Security-Policy without `unsafe-inline`, no framing, no caching).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hermes_db::console_sessions::Login;

/// What every console page may load: its own stylesheet and its one script (`live.js`),
/// the event streams of its own origin, nothing inline, no frames.
pub const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; \
    connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; \
    base-uri 'none'";

/// `s` safe inside HTML text and double-quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: the navigation (and the logout form, with its CSRF token) when logged in,
/// then `body`, which the caller built with [`esc`].
pub fn page(status: StatusCode, title: &str, login: Option<&Login>, body: &str) -> Response {
    let nav = match login {
        Some(l) => format!(
            "<header><nav aria-label=\"Console\"><a href=\"/console/overview\">Overview</a> \
             <a href=\"/console/runs\">Runs</a> \
             <a href=\"/console/approvals\">Approvals</a> \
             <a href=\"/console/parked\">Parked</a> \
             <a href=\"/console/conversations\">Conversations</a> \
             <a href=\"/console/agents\">Agents</a> \
             <a href=\"/console/jobs\">Jobs</a> \
             <a href=\"/console/users\">Users</a> \
             <a href=\"/console/killswitch\">Killswitch</a></nav>\
             <form method=\"post\" action=\"/console/logout\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button type=\"submit\">Log out</button></form></header>",
            esc(&l.csrf)
        ),
        None => "<header><span>Hermes console</span></header>".to_string(),
    };
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · Hermes</title><link rel=\"stylesheet\" href=\"/console/static/console.css\">\
         </head><body>{nav}<main><h1>{}</h1>{body}</main></body></html>",
        esc(title),
        esc(title)
    );
    with_headers((status, html).into_response(), "text/html; charset=utf-8")
}

/// A form's refusal titled `title`: why (an alert), and a link `back` to the page it came
/// from.
pub fn refusal(status: StatusCode, title: &str, login: &Login, why: &str, back: &str) -> Response {
    page(
        status,
        title,
        Some(login),
        &format!(
            "<p class=\"error\" role=\"alert\">{}</p><p><a href=\"{}\">Back</a></p>",
            esc(why),
            esc(back)
        ),
    )
}

/// The page of a read that PostgreSQL did not answer: `what` could not be read.
pub fn unavailable(login: Option<&Login>, what: &str) -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Unavailable",
        login,
        &format!(
            "<p class=\"error\">Cannot read the {} right now; reload shortly.</p>",
            esc(what)
        ),
    )
}

/// Write a console action to the activity log with who did it (`data` names them); a log
/// that cannot be written is only warned about, since the action itself is done.
pub async fn log_action(app: &crate::AppState, kind: &str, data: serde_json::Value) {
    let logged = async {
        let client = app.ctx.db.get().await?;
        hermes_db::console_sessions::record_action(&client, kind, &data).await
    }
    .await;
    if let Err(e) = logged {
        tracing::warn!(kind, error = %e, "a console action is not in the activity log");
    }
}

/// The console's headers on `resp`.
pub fn with_headers(mut resp: Response, content_type: &'static str) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// A `303 See Other` to `to` (after a form's POST, so a reload does not post again).
pub fn see_other(to: &str) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    with_headers(resp, "text/html; charset=utf-8")
}

/// The one script (`/console/static/live.js`), vendored in the binary like the stylesheet.
pub fn script() -> Response {
    let js = include_str!("../../console/live.js");
    let mut resp = with_headers(js.into_response(), "text/javascript; charset=utf-8");
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=3600"),
    );
    resp
}

/// The stylesheet, vendored with the binary.
pub fn stylesheet() -> Response {
    let css = include_str!("../../console/console.css");
    let mut resp = with_headers(css.into_response(), "text/css; charset=utf-8");
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=3600"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_is_escaped_whole() {
        assert_eq!(
            esc(r#"<script>alert("x")</script><img src=x onerror='y'>&"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;"
        );
        assert_eq!(esc("plain text"), "plain text");
    }

    #[test]
    fn the_policy_allows_no_inline_script_or_framing() {
        assert!(!CSP.contains("unsafe-inline") && !CSP.contains("unsafe-eval"));
        assert!(CSP.contains("script-src 'self';"));
        assert!(CSP.contains("frame-ancestors 'none'"));
    }
}
