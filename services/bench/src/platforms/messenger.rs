//! Facebook Messenger: a message to the Page as Meta posts it (`object: page`), and a fake
//! Graph API whose Send API tells the sink ([`super::meta`]).

use super::Message;

/// The object, Page id and app secret of the fleet under test.
const APP: (&str, &str, &str) = ("page", "700000000000001", "bench-messenger-app-secret");
const PAGE_TOKEN: &str = "bench-page-token";
/// Where the members' page-scoped ids (the ledger's chat numbers) start.
pub const FROM: i64 = 30_000_000;

pub use super::meta::serve;

/// Member `n`'s page-scoped id.
pub fn member(n: i64) -> String {
    (FROM + n).to_string()
}

/// The fleet's Messenger settings, its Graph API at `api`.
pub fn env(api: &str) -> Vec<(&'static str, String)> {
    vec![
        ("MESSENGER_APP_SECRET", APP.2.to_string()),
        ("MESSENGER_PAGE_ACCESS_TOKEN", PAGE_TOKEN.to_string()),
        ("MESSENGER_API_BASE_URL", api.to_string()),
    ]
}

/// `m` as Meta posts it to `post`.
pub fn webhook(post: reqwest::RequestBuilder, m: Message<'_>) -> reqwest::RequestBuilder {
    let mid = format!("m_bench_{}", m.i);
    super::meta::webhook(post, APP, &member(m.n), &mid, m.text)
}
