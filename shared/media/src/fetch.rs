//! Fetching one platform file: located with the platform's credentials, downloaded through
//! the SSRF guard (`HERMES_MEDIA_FETCH_ALLOW` names the non-public hosts it may reach), no
//! redirect followed, within its size limit and one deadline for the whole fetch
//! (`HERMES_MEDIA_DEADLINE_SECS`: a download that never ends is cut), its bytes checked
//! against the type declared. Each fetch is counted in `hermes_media_fetch_total`.

use std::time::Duration;

use base64::Engine;
use hermes_config::Config;
use hermes_net::guard::{AddressPolicy, GuardError};
use hermes_net::http::describe;
use hermes_types::model::{ImageRef, MediaRef};
use prometheus::IntCounterVec;
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use url::Url;

use crate::error::{MediaError, Outcome};
use crate::sniff;
use hermes_channels::media::{Located, Locator, Lookup};

const USER_AGENT: &str = concat!("hermes-media/", env!("CARGO_PKG_VERSION"));

/// What a fetch accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// An image a provider takes (PNG, JPEG, GIF, WebP), within `HERMES_IMAGE_MAX_BYTES`.
    Image,
    /// An audio file a transcription endpoint takes, within `HERMES_AUDIO_MAX_BYTES`.
    Audio,
}

/// A file's bytes and the type they were found to be.
pub struct Fetched {
    pub bytes: Vec<u8>,
    pub mime: &'static str,
}

impl Fetched {
    /// The file as an inline image block (`data:` URL) for the providers.
    pub fn image_block(&self) -> ImageRef {
        let data = base64::engine::general_purpose::STANDARD.encode(&self.bytes);
        ImageRef {
            url: format!("data:{};base64,{data}", self.mime),
            mime_type: Some(self.mime.to_string()),
        }
    }
}

/// Fetches platform files for the stage that needs their bytes.
#[derive(Clone)]
pub struct MediaFetcher {
    platforms: Locator,
    policy: AddressPolicy,
    deadline: Duration,
    image_max_bytes: usize,
    audio_max_bytes: usize,
    counted: IntCounterVec,
}

impl MediaFetcher {
    /// A fetcher with the platforms' credentials and the limits of `config`, counting in
    /// `counted` (`hermes_media_fetch_total`).
    pub fn new(config: &Config, counted: IntCounterVec) -> Self {
        Self {
            platforms: Locator::new(&config.delivery),
            policy: AddressPolicy::new(
                config.media.fetch_allow.clone(),
                "HERMES_MEDIA_FETCH_ALLOW",
            ),
            deadline: config.media.deadline,
            image_max_bytes: config.ingest.api.image_max_bytes,
            audio_max_bytes: config.media.audio_max_bytes,
            counted,
        }
    }

    /// Count `outcome` for `item` in `hermes_media_fetch_total`.
    pub fn count(&self, item: &MediaRef, outcome: Outcome) {
        self.counted
            .with_label_values(&[
                item.platform.as_str(),
                item.media.kind.as_str(),
                outcome.as_str(),
            ])
            .inc();
    }

    /// `item`'s bytes, of the kind `want` takes, within the deadline. A failure is counted
    /// and logged (by platform, never by URL) here; a success is counted by the caller,
    /// which knows what became of the bytes.
    pub async fn fetch(&self, item: &MediaRef, want: Want) -> Result<Fetched, MediaError> {
        let result = match tokio::time::timeout(self.deadline, self.fetch_within(item, want)).await
        {
            Ok(result) => result,
            Err(_) => Err(MediaError::Timeout {
                secs: self.deadline.as_secs(),
            }),
        };
        if let Err(e) = &result {
            self.count(item, e.outcome());
            tracing::warn!(
                platform = item.platform.as_str(),
                kind = item.media.kind.as_str(),
                outcome = e.outcome().as_str(),
                error = %e,
                "a platform file could not be used"
            );
        }
        result
    }

    async fn fetch_within(&self, item: &MediaRef, want: Want) -> Result<Fetched, MediaError> {
        let platform = item.platform.as_str();
        let max = match want {
            Want::Image => self.image_max_bytes,
            Want::Audio => self.audio_max_bytes,
        };
        let located = self.platforms.locate(item, self).await?;
        if located.size.is_some_and(|n| n > max as u64) {
            return Err(MediaError::TooLarge { limit: max });
        }
        let Located { url, auth, .. } = located;
        let mut resp = self.get(platform, url, auth).await?;
        MediaError::check_status(platform, "the download", resp.status())?;
        let declared = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if resp.content_length().is_some_and(|n| n > max as u64) {
            return Err(MediaError::TooLarge { limit: max });
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| MediaError::Unavailable {
            platform,
            why: describe(e),
        })? {
            if bytes.len() + chunk.len() > max {
                return Err(MediaError::TooLarge { limit: max });
            }
            bytes.extend_from_slice(&chunk);
        }
        let checked = match want {
            Want::Image => sniff::check_image(&declared, &bytes),
            Want::Audio => sniff::check_audio(&declared, &bytes),
        };
        match checked {
            Ok(mime) => Ok(Fetched { bytes, mime }),
            Err(found) => Err(MediaError::WrongType {
                claimed: sniff::essence(&declared),
                found,
            }),
        }
    }
}

impl Lookup for MediaFetcher {
    type Error = MediaError;

    /// One guarded GET: the host checked, the client pinned to the checked addresses, no
    /// redirect followed (a 3xx is answered as it is). Errors carry no URL.
    async fn get(
        &self,
        platform: &'static str,
        url: Url,
        auth: Option<(HeaderName, HeaderValue)>,
    ) -> Result<reqwest::Response, MediaError> {
        let host = url.host_str().unwrap_or_default().to_string();
        let client = self
            .policy
            .client_builder(&url, USER_AGENT)
            .await
            .map_err(|e| guard_error(platform, host, e))?
            .timeout(self.deadline)
            .build()
            .map_err(|e| MediaError::Unavailable {
                platform,
                why: describe(e),
            })?;
        let mut request = client.get(url);
        if let Some((name, value)) = auth {
            request = request.header(name, value);
        }
        let resp = request.send().await.map_err(|e| {
            if e.is_timeout() {
                MediaError::Timeout {
                    secs: self.deadline.as_secs(),
                }
            } else {
                MediaError::Unavailable {
                    platform,
                    why: describe(e),
                }
            }
        })?;
        // A redirect is never followed here: the download refuses it with its status, and a
        // platform's look-up that expects one (Twilio's media) checks where it points and
        // makes that the download, through the guard again.
        Ok(resp)
    }
}

/// The guard's refusal without its URL (which may hold a token): the host and the reason.
fn guard_error(platform: &'static str, host: String, e: GuardError) -> MediaError {
    match e {
        GuardError::Refused { why, .. } => MediaError::AddressRefused { host, why },
        GuardError::NoHost => MediaError::Refused {
            platform,
            why: "the file URL has no host".into(),
        },
        GuardError::Resolve { name, error } => MediaError::Unavailable {
            platform,
            why: format!("cannot resolve {name:?}: {error}"),
        },
        GuardError::NoAddress(name) => MediaError::Unavailable {
            platform,
            why: format!("{name:?} has no address"),
        },
    }
}
