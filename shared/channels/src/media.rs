//! Where a platform keeps a file and which credential fetches it (docs/channels.md,
//! "Media"): each platform's `media.rs` turns a [`MediaRef`] into a [`Located`] download, and
//! [`Locator`] finds the platform. The fetch itself (the SSRF guard, the size limit, the
//! deadline, the type check) is `hermes-media`'s: it makes the look-up requests through its
//! guarded client, the [`Lookup`] this module calls.
//!
//! An item that carries a URL (an Instagram attachment, a WhatsApp `link`) is fetched as it
//! is, with no credential; a Slack file's URL only with the bot token, and only on Slack's
//! files host. Credentials stay out of every error: a Telegram file URL holds the
//! bot token, so errors name only the platform (docs/security.md).

use std::future::Future;
use std::sync::Arc;

use hermes_config::DeliverySettings;
use hermes_types::model::{MediaKind, MediaRef, Platform};
use reqwest::StatusCode;
use reqwest::header::{HeaderName, HeaderValue};
use url::Url;

use crate::{slack, teams, telegram, twilio, whatsapp};

/// A download: the URL and the header that authorizes it. Never `Debug`: the URL may hold
/// a bot token.
pub struct Located {
    /// Where the file's bytes are.
    pub url: Url,
    /// The credential header the download carries, if any (marked sensitive).
    pub auth: Option<(HeaderName, HeaderValue)>,
    /// The size the platform reported, when it did: refused before any byte is read.
    pub size: Option<u64>,
}

/// Why a file could not be located. No variant holds a URL.
#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    /// The platform's credentials are not configured, so its files cannot be fetched.
    #[error("{platform} credentials are not configured")]
    NoCredentials { platform: &'static str },
    /// The platform refused the file id (a 4xx, or Telegram's `ok: false`).
    #[error("{platform} refused the file: {why}")]
    Refused { platform: &'static str, why: String },
    /// The platform failed or could not be reached (5xx, 429, network).
    #[error("{platform} could not be reached: {why}")]
    Unavailable { platform: &'static str, why: String },
}

impl LocateError {
    /// A platform's answer `status` as a failure of `what` (`the download`, …): a 5xx or
    /// 429 as the platform unavailable, any other non-2xx as the file refused.
    pub fn check_status(
        platform: &'static str,
        what: &str,
        status: StatusCode,
    ) -> Result<(), LocateError> {
        let why = || format!("{what} answered {status}");
        if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            return Err(LocateError::Unavailable {
                platform,
                why: why(),
            });
        }
        if !status.is_success() {
            return Err(LocateError::Refused {
                platform,
                why: why(),
            });
        }
        Ok(())
    }

    /// A URL built from a configured base; the parse error never quotes the URL (it may
    /// hold a token).
    pub(crate) fn bad_url(platform: &'static str, e: url::ParseError) -> Self {
        LocateError::Refused {
            platform,
            why: format!("the file URL could not be built: {e}"),
        }
    }
}

/// How a look-up request is made: the fetcher's guarded GET, whose errors carry no URL.
pub trait Lookup: Sync {
    /// The fetcher's error, which a failure to locate becomes.
    type Error: From<LocateError> + Send;

    /// GET `url` for `platform`, with the credential header `auth`.
    fn get(
        &self,
        platform: &'static str,
        url: Url,
        auth: Option<(HeaderName, HeaderValue)>,
    ) -> impl Future<Output = Result<reqwest::Response, Self::Error>> + Send;
}

/// The credentials of every platform, read from the same configuration as the senders
/// (shared: a fetcher is cloned into every stage that needs one).
#[derive(Clone)]
pub struct Locator {
    delivery: Arc<DeliverySettings>,
    /// The Teams bot's token, for images on its Connector service.
    teams: Option<Arc<teams::token::Token>>,
}

impl Locator {
    /// The platforms `delivery` has credentials for.
    pub fn new(delivery: &DeliverySettings) -> Self {
        Self {
            delivery: Arc::new(delivery.clone()),
            teams: (delivery.teams.as_ref())
                .map(|s| Arc::new(teams::token::Token::new(s, teams::token::client()))),
        }
    }

    /// Where `item` is and how to ask for it. `lookup` makes the platform's look-up
    /// request (through the caller's guarded client); the caller's deadline bounds it.
    pub async fn locate<L: Lookup>(
        &self,
        item: &MediaRef,
        lookup: &L,
    ) -> Result<Located, L::Error> {
        let platform = item.platform.as_str();
        // Slack's files come as URLs that need the bot token.
        if item.platform == Platform::Slack {
            return match &self.delivery.slack {
                Some(slack) => slack::media::locate(slack, &item.media).map_err(Into::into),
                None => Err(LocateError::NoCredentials { platform }.into()),
            };
        }
        // Teams' inline images need the bot's token; its files are pre-authorized.
        if item.platform == Platform::Teams {
            let sender = self.delivery.teams.as_ref().zip(self.teams.as_deref());
            return teams::media::locate(sender, &item.media)
                .await
                .map_err(Into::into);
        }
        if let Some(url) = &item.media.url {
            let url = Url::parse(url).map_err(|e| LocateError::Refused {
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
            return Err(LocateError::Refused {
                platform,
                why: "the message names no file".into(),
            }
            .into());
        };
        let no_credentials = || LocateError::NoCredentials { platform }.into();
        match item.platform {
            Platform::Telegram => match &self.delivery.telegram {
                Some(tg) => telegram::media::locate(tg, id, lookup).await,
                None => Err(no_credentials()),
            },
            Platform::Whatsapp => match &self.delivery.whatsapp {
                Some(wa) => whatsapp::media::locate(wa, id, lookup).await,
                None => Err(no_credentials()),
            },
            Platform::Sms => match &self.delivery.sms {
                Some(sms) => twilio::media::locate(sms, id, lookup).await,
                None => Err(no_credentials()),
            },
            _ => Err(no_credentials()),
        }
    }
}

/// A shared file's kind by its MIME type (`image/png`, …): images go to the vision model,
/// audio (voice clips, voice messages) to transcription, the rest as what it is.
pub(crate) fn kind_of_mime(mime: Option<&str>) -> MediaKind {
    match mime.and_then(|m| m.split('/').next()) {
        Some("image") => MediaKind::Image,
        Some("audio") => MediaKind::Voice,
        Some("video") => MediaKind::Video,
        _ => MediaKind::Document,
    }
}
