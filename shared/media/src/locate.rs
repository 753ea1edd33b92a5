//! Where each platform keeps a file and which credential fetches it (docs/channels.md,
//! media):
//!
//! - Telegram: `GET {base}/bot<token>/getFile?file_id=…` gives `result.file_path`; the file
//!   is `GET {base}/file/bot<token>/<file_path>`. Both URLs hold the bot token, so neither is
//!   ever shown: errors name only the platform.
//! - WhatsApp, Cloud API: `GET {base}/<media id>` with the Bearer access token gives a JSON
//!   `url`, downloaded with the same token.
//! - WhatsApp, 360dialog: `GET {base}/<media id>` with `D360-API-KEY` gives Meta's `url`;
//!   360dialog serves it under its own host, so its path and query are requested from
//!   `{base}` with the same key.
//! - Instagram (and any item that carries a URL, like a WhatsApp `link`): the URL as is, no
//!   credential.

use std::sync::Arc;

use hermes_config::{DeliverySettings, WhatsappSender};
use hermes_net::http::describe;
use hermes_types::model::{MediaRef, Platform};
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use secrecy::ExposeSecret;
use serde::Deserialize;
use url::Url;

use crate::error::MediaError;

/// A download: the URL and the header that authorizes it. Never `Debug`: the URL may hold
/// a bot token.
pub(crate) struct Located {
    pub url: Url,
    pub auth: Option<(HeaderName, HeaderValue)>,
    /// The size the platform reported, when it did: refused before any byte is read.
    pub size: Option<u64>,
}

/// How a look-up request is made: the fetcher's guarded GET, whose errors carry no URL.
pub(crate) trait Lookup {
    async fn get(
        &self,
        platform: &'static str,
        url: Url,
        auth: Option<(HeaderName, HeaderValue)>,
    ) -> Result<reqwest::Response, MediaError>;
}

/// The credentials of every platform, read from the same configuration as the senders
/// (shared: a fetcher is cloned into every stage that needs one).
#[derive(Clone)]
pub(crate) struct Platforms {
    delivery: Arc<DeliverySettings>,
}

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

/// Meta's media API answer (Cloud API and 360dialog alike).
#[derive(Deserialize)]
struct MetaMedia {
    url: String,
    #[serde(default)]
    file_size: Option<u64>,
}

impl Platforms {
    pub fn new(delivery: &DeliverySettings) -> Self {
        Self {
            delivery: Arc::new(delivery.clone()),
        }
    }

    /// Where `item` is and how to ask for it. `lookup` makes the platform's look-up
    /// request (through the caller's guarded client); the caller's deadline bounds it.
    pub async fn locate(
        &self,
        item: &MediaRef,
        lookup: &impl Lookup,
    ) -> Result<Located, MediaError> {
        let platform = item.platform.as_str();
        if let Some(url) = &item.media.url {
            let url = Url::parse(url).map_err(|e| MediaError::Refused {
                platform,
                why: format!("the file URL is not valid: {e}"),
            })?;
            return Ok(Located {
                url,
                auth: None,
                size: None,
            });
        }
        let Some(id) = item.media.platform_id.as_deref() else {
            return Err(MediaError::Refused {
                platform,
                why: "the message names no file".into(),
            });
        };
        match item.platform {
            Platform::Telegram => {
                let Some(tg) = &self.delivery.telegram else {
                    return Err(MediaError::NoCredentials { platform });
                };
                self.telegram(tg, id, lookup).await
            }
            Platform::Whatsapp => match &self.delivery.whatsapp {
                Some(sender) => self.meta(sender, id, lookup).await,
                None => Err(MediaError::NoCredentials { platform }),
            },
            _ => Err(MediaError::NoCredentials { platform }),
        }
    }

    async fn telegram(
        &self,
        tg: &hermes_config::TelegramSender,
        file_id: &str,
        lookup: &impl Lookup,
    ) -> Result<Located, MediaError> {
        let platform = "telegram";
        let token = tg.bot_token.expose_secret();
        let base = tg.base_url.as_str().trim_end_matches('/');
        let mut url = bad_base(Url::parse(&format!("{base}/bot{token}/getFile")), platform)?;
        url.query_pairs_mut().append_pair("file_id", file_id);
        let resp = lookup.get(platform, url, None).await?;
        let status = resp.status();
        // Telegram answers a bad file id with 400 and `ok: false`, its body naming why.
        let body: TelegramFile = resp.json().await.map_err(|e| MediaError::Unavailable {
            platform,
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
                MediaError::Unavailable { platform, why }
            } else {
                MediaError::Refused { platform, why }
            });
        };
        let url = bad_base(
            Url::parse(&format!(
                "{base}/file/bot{token}/{}",
                path.trim_start_matches('/')
            )),
            platform,
        )?;
        Ok(Located {
            url,
            auth: None,
            size: file_size,
        })
    }

    async fn meta(
        &self,
        sender: &WhatsappSender,
        media_id: &str,
        lookup: &impl Lookup,
    ) -> Result<Located, MediaError> {
        let platform = "whatsapp";
        let (base, auth) = match sender {
            WhatsappSender::Cloud {
                access_token,
                base_url,
                ..
            } => (
                base_url,
                header(
                    AUTHORIZATION,
                    &format!("Bearer {}", access_token.expose_secret()),
                )?,
            ),
            WhatsappSender::Dialog360 { api_key, base_url } => (
                base_url,
                header(
                    HeaderName::from_static("d360-api-key"),
                    api_key.expose_secret(),
                )?,
            ),
        };
        let mut url = base.clone();
        // The id is one path segment, escaped: it cannot reach another path of the API.
        url.path_segments_mut()
            .map_err(|()| MediaError::NoCredentials { platform })?
            .pop_if_empty()
            .push(media_id);
        let resp = lookup.get(platform, url, Some(auth.clone())).await?;
        MediaError::check_status(platform, "the media API", resp.status())?;
        let media: MetaMedia = resp.json().await.map_err(|e| MediaError::Refused {
            platform,
            why: format!("the media API's answer has no URL: {}", describe(e)),
        })?;
        let mut url = Url::parse(&media.url).map_err(|e| MediaError::Refused {
            platform,
            why: format!("the media URL is not valid: {e}"),
        })?;
        if let WhatsappSender::Dialog360 { .. } = sender {
            // 360dialog proxies Meta's media host: same path and query, its own host.
            let mut proxied = base.clone();
            proxied.set_path(url.path());
            proxied.set_query(url.query());
            url = proxied;
        }
        Ok(Located {
            url,
            auth: Some(auth),
            size: media.file_size,
        })
    }
}

/// A header carrying a credential, marked sensitive so that no debug output shows it.
fn header(name: HeaderName, value: &str) -> Result<(HeaderName, HeaderValue), MediaError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| MediaError::NoCredentials {
        platform: "whatsapp",
    })?;
    value.set_sensitive(true);
    Ok((name, value))
}

/// A URL built from a configured base; the parse error never quotes the URL (it may hold
/// the token).
fn bad_base(url: Result<Url, url::ParseError>, platform: &'static str) -> Result<Url, MediaError> {
    url.map_err(|e| MediaError::Refused {
        platform,
        why: format!("the file URL could not be built: {e}"),
    })
}
