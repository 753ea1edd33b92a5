//! Instagram: a direct message as Meta posts it (`object: instagram`), and a fake Graph API
//! whose Send API tells the sink ([`super::meta`]).

use super::Message;

/// The object, account id and app secret of the fleet under test.
const APP: (&str, &str, &str) = (
    "instagram",
    "17840000000000001",
    "bench-instagram-app-secret",
);
const ACCESS_TOKEN: &str = "bench-instagram-token";
/// Where the members' Instagram-scoped ids (the ledger's chat numbers) start.
pub const FROM: i64 = 60_000_000;

pub use super::meta::serve;

/// Member `n`'s Instagram-scoped id.
pub fn member(n: i64) -> String {
    (FROM + n).to_string()
}

/// The fleet's Instagram settings, its Graph API at `api`.
pub fn env(api: &str) -> Vec<(&'static str, String)> {
    vec![
        ("INSTAGRAM_APP_SECRET", APP.2.to_string()),
        ("INSTAGRAM_ACCESS_TOKEN", ACCESS_TOKEN.to_string()),
        ("INSTAGRAM_API_BASE_URL", api.to_string()),
    ]
}

/// `m` as Meta posts it to `post`.
pub fn webhook(post: reqwest::RequestBuilder, m: Message<'_>) -> reqwest::RequestBuilder {
    let mid = format!("ig_bench_{}", m.i);
    super::meta::webhook(post, APP, &member(m.n), &mid, m.text)
}
