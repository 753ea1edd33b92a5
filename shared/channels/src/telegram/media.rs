//! Where Telegram keeps a file (<https://core.telegram.org/bots/api#getfile>):
//! `GET {base}/bot<token>/getFile?file_id=…` gives `result.file_path`; the file is
//! `GET {base}/file/bot<token>/<file_path>`. Both URLs hold the bot token, so neither is ever
//! shown: errors name only the platform.

use hermes_config::TelegramSender;
use hermes_net::http::describe;
use secrecy::ExposeSecret;
use serde::Deserialize;
use url::Url;

use crate::media::{LocateError, Located, Lookup};

const PLATFORM: &str = "telegram";

/// Telegram's `getFile` answer.
#[derive(Deserialize)]
struct TelegramFile {
    ok: bool,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    result: Option<TelegramFileResult>,
}

#[derive(Deserialize)]
struct TelegramFileResult {
    #[serde(default)]
    file_path: Option<String>,
    #[serde(default)]
    file_size: Option<u64>,
}

/// Where the file `file_id` of the bot `tg` is, asked through `lookup`.
pub(crate) async fn locate<L: Lookup>(
    tg: &TelegramSender,
    file_id: &str,
    lookup: &L,
) -> Result<Located, L::Error> {
    let token = tg.bot_token.expose_secret();
    let base = tg.base_url.as_str().trim_end_matches('/');
    let mut url = Url::parse(&format!("{base}/bot{token}/getFile"))
        .map_err(|e| LocateError::bad_url(PLATFORM, e))?;
    url.query_pairs_mut().append_pair("file_id", file_id);
    let resp = lookup.get(PLATFORM, url, None).await?;
    let status = resp.status();
    // Telegram answers a bad file id with 400 and `ok: false`, its body naming why.
    let body: TelegramFile = resp.json().await.map_err(|e| LocateError::Unavailable {
        platform: PLATFORM,
        why: format!(
            "getFile answered {status} with no readable body: {}",
            describe(e)
        ),
    })?;
    let found = body.result.filter(|_| body.ok);
    let Some(TelegramFileResult {
        file_path: Some(path),
        file_size,
    }) = found
    else {
        let why = body.description.unwrap_or_else(|| status.to_string());
        return Err(if status.is_server_error() {
            LocateError::Unavailable {
                platform: PLATFORM,
                why,
            }
        } else {
            LocateError::Refused {
                platform: PLATFORM,
                why,
            }
        }
        .into());
    };
    let url = Url::parse(&format!(
        "{base}/file/bot{token}/{}",
        path.trim_start_matches('/')
    ))
    .map_err(|e| LocateError::bad_url(PLATFORM, e))?;
    Ok(Located {
        url,
        auth: None,
        size: file_size,
    })
}
