//! Logging in to the console (docs/console.md): the operator key, or a key with the
//! `operator` scope, typed once into a form; the login lives in PostgreSQL and the browser
//! holds only a random token in an `HttpOnly`, `Secure`, `SameSite=Strict` cookie scoped to
//! `/console`. Every state-changing form carries the login's CSRF token, and a POST that
//! comes from another site is refused before anything else.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use hermes_db::api_keys::KeyScope;
use hermes_db::console_sessions::{self, Login};
use subtle::ConstantTimeEq;

use super::html::{esc, page, see_other, unavailable};
use crate::AppState;
use crate::front_door::Client;
use crate::rest::Caller;

/// The cookie that holds a login's token.
const COOKIE: &str = "hermes_console";
/// The longest key, field or form read.
const MAX_FORM_BYTES: usize = 4096;

/// The login's token in the request's cookie.
fn token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The form's field `name`.
pub fn field(body: &[u8], name: &str) -> Option<String> {
    url::form_urlencoded::parse(body)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Every value of the form field `name`, in order (ticked boxes sharing a name).
pub fn fields(body: &[u8], name: &str) -> Vec<String> {
    url::form_urlencoded::parse(body)
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// Whether a POST came from another site (`Sec-Fetch-Site`, else `Origin` against `Host`):
/// such a request is refused whatever it carries.
fn cross_site(headers: &HeaderMap) -> bool {
    let get = |h: &str| headers.get(h).and_then(|v| v.to_str().ok());
    if let Some(site) = get("sec-fetch-site") {
        return !matches!(site, "same-origin" | "none");
    }
    match (get("origin"), get("host")) {
        (Some(origin), Some(host)) => {
            let origin_host = origin.split_once("://").map_or(origin, |(_, h)| h);
            origin_host != host
        }
        _ => false,
    }
}

/// Whether `sent` is the login's CSRF token, compared in constant time.
pub fn csrf_ok(login: &Login, sent: Option<&str>) -> bool {
    sent.is_some_and(|s| s.as_bytes().ct_eq(login.csrf.as_bytes()).into())
}

/// The refusal of a state-changing request without its login's CSRF token.
pub fn forbidden(login: Option<&Login>) -> Response {
    page(
        StatusCode::FORBIDDEN,
        "Refused",
        login,
        "<p class=\"error\">This form was not sent from this console page (its CSRF token is missing or wrong). Reload the page and try again.</p>",
    )
}

fn login_page(status: StatusCode, error: Option<&str>) -> Response {
    let error = error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", esc(e)))
        .unwrap_or_default();
    let body = format!(
        "{error}<form method=\"post\" action=\"/console/login\">\
         <label for=\"key\">Operator key</label>\
         <input id=\"key\" name=\"key\" type=\"password\" autocomplete=\"current-password\" required>\
         <p class=\"muted\">API_SERVER_KEY, or a key with the operator scope.</p>\
         <button type=\"submit\">Log in</button></form>"
    );
    page(status, "Log in", None, &body)
}

/// `GET /console/login`
pub async fn login_form() -> Response {
    login_page(StatusCode::OK, None)
}

/// `POST /console/login`: a key with the right to operate becomes a login. Keys that name
/// nothing count against the client's unknown keys (`HERMES_KEY_MISSES_PER_MINUTE`) as on
/// the API, so the form cannot be used to guess keys faster.
pub async fn login(
    State(app): State<AppState>,
    client: Option<Extension<Client>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if cross_site(&headers) || body.len() > MAX_FORM_BYTES {
        return forbidden(None);
    }
    let Some(key) = field(&body, "key").filter(|k| !k.is_empty()) else {
        return login_page(StatusCode::BAD_REQUEST, Some("Type the key."));
    };
    let address = client.and_then(|Extension(c)| c.0);
    let caller = match crate::rest::resolve(&app, &key, address).await {
        Ok(Some(caller)) => caller,
        Ok(None) => return login_page(StatusCode::UNAUTHORIZED, Some("No such key.")),
        Err(e) => return login_page(e.status, Some(&e.message)),
    };
    let key_id = match &caller {
        Caller::Operator => None,
        Caller::Key(k) if k.scopes.contains(&KeyScope::Operator) => Some(k.id),
        Caller::Key(_) => {
            return login_page(
                StatusCode::FORBIDDEN,
                Some("This key lacks the operator scope."),
            );
        }
    };
    let lasts = app.ctx.config.ingest.console_session;
    let until = chrono::Utc::now() + chrono::TimeDelta::from_std(lasts).unwrap_or_default();
    let started = async {
        let client = app.ctx.db.get().await?;
        console_sessions::start(&client, key_id, until).await
    }
    .await;
    let Ok(started) = started else {
        return login_page(
            StatusCode::SERVICE_UNAVAILABLE,
            Some("Cannot record the login right now; try again shortly."),
        );
    };
    tracing::info!(key = ?key_id, "console login");
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; Secure; SameSite=Strict; Path=/console; Max-Age={}",
        started.token,
        lasts.as_secs()
    );
    let mut resp = see_other("/console/overview");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// `POST /console/logout`
pub async fn logout(State(app): State<AppState>, req: Request) -> Response {
    let login = req.extensions().get::<Login>().cloned();
    let token = token(req.headers());
    let Ok(body) = axum::body::to_bytes(req.into_body(), MAX_FORM_BYTES).await else {
        return forbidden(login.as_ref());
    };
    let (Some(login), Some(token)) = (login, token) else {
        return see_other("/console/login");
    };
    if !csrf_ok(&login, field(&body, "csrf").as_deref()) {
        return forbidden(Some(&login));
    }
    if let Ok(client) = app.ctx.db.get().await {
        let _ = console_sessions::end(&client, &token).await;
    }
    let mut resp = see_other("/console/login");
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "hermes_console=; HttpOnly; Secure; SameSite=Strict; Path=/console; Max-Age=0",
        ),
    );
    resp
}

/// Middleware of every page but the login: the request's live [`Login`] in its extensions,
/// or a redirect to the login form. A POST from another site is refused outright.
pub async fn require_login(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    if req.method() == axum::http::Method::POST && cross_site(req.headers()) {
        return forbidden(None);
    }
    let Some(token) = token(req.headers()) else {
        return see_other("/console/login");
    };
    let found = async {
        let client = app.ctx.db.get().await?;
        console_sessions::find(&client, &token).await
    }
    .await;
    match found {
        Ok(Some(login)) => {
            req.extensions_mut().insert(login);
            next.run(req).await
        }
        Ok(None) => see_other("/console/login"),
        Err(_) => unavailable(None, "login"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_read_only_when_it_is_a_token() {
        let mut h = HeaderMap::new();
        let t = "a".repeat(64);
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("x=1; {COOKIE}={t}")).unwrap(),
        );
        assert_eq!(token(&h), Some(t));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("hermes_console=<script>"),
        );
        assert_eq!(token(&h), None);
    }

    #[test]
    fn a_post_from_another_site_is_cross_site() {
        let mut h = HeaderMap::new();
        assert!(
            !cross_site(&h),
            "a client that says nothing (curl) is not refused here"
        );
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(cross_site(&h));
        h.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(!cross_site(&h));
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("ops.example"));
        h.insert("origin", HeaderValue::from_static("https://evil.example"));
        assert!(cross_site(&h));
        h.insert("origin", HeaderValue::from_static("https://ops.example"));
        assert!(!cross_site(&h));
    }

    #[test]
    fn the_csrf_token_must_match_exactly() {
        let login = Login {
            api_key_id: None,
            csrf: "abc".into(),
            expires_at: chrono::Utc::now(),
        };
        assert!(csrf_ok(&login, Some("abc")));
        assert!(!csrf_ok(&login, Some("abd")));
        assert!(!csrf_ok(&login, Some("")));
        assert!(!csrf_ok(&login, None));
    }
}
