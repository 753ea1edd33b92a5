//! Images an API caller named by http(s) URL (docs/api.md, images), fetched right before
//! the model call that needs them: through the SSRF guard (a host with any non-public
//! address is refused unless `HERMES_IMAGE_FETCH_ALLOW` lists it, and the connection goes
//! only to the checked addresses), no redirect followed, within `HERMES_IMAGE_MAX_BYTES`,
//! and only when the answer is an image whose bytes are the type it claims. The bytes go to
//! the provider inline, so no provider is ever handed a URL it would fetch itself, and they
//! live only in this call's memory: the queued request keeps the URL.
//!
//! A chat platform's photos (docs/channels.md, media) travel as references in the
//! request's `media`; they are fetched here too, with the platform's credentials through
//! `hermes_media`, into the last user turn's image blocks. A photo that cannot be used
//! fails the call with a sentence for its sender, and no model is asked.

use std::time::Duration;

use base64::Engine;
use hermes_config::Config;
use hermes_media::{MediaFetcher, Outcome, Want};
use hermes_net::guard::{AddressPolicy, shown};
use hermes_net::http::describe;
use hermes_types::model::{IMAGE_TYPES, ImageRef, LlmRequest, Platform, Role, sniff_image};
use url::Url;

const USER_AGENT: &str = concat!("hermes-image-fetch/", env!("CARGO_PKG_VERSION"));
/// How long one image may take to arrive.
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);

/// Fetches the images of API requests and of chat platforms.
pub struct ImageFetcher {
    policy: AddressPolicy,
    max_bytes: usize,
    media: MediaFetcher,
}

impl ImageFetcher {
    /// A fetcher under `config`'s limits, counting platform files in `media_fetches`.
    pub fn new(config: &Config, media_fetches: prometheus::IntCounterVec) -> Self {
        Self {
            media: MediaFetcher::new(config, media_fetches),
            policy: AddressPolicy::new(
                config.api.image_fetch_allow.clone(),
                "HERMES_IMAGE_FETCH_ALLOW",
            ),
            max_bytes: config.api.image_max_bytes,
        }
    }

    /// The request to send: `request` itself when it holds no caller's http(s) image and
    /// no platform photo, else a copy with each such image inlined. The error names the
    /// image and what is wrong with it, for the caller or the chat's sender.
    pub async fn inline(&self, request: &LlmRequest) -> Result<Option<LlmRequest>, String> {
        let remote = |i: &ImageRef| i.url.starts_with("http://") || i.url.starts_with("https://");
        let api_images = request.reply_to.platform == Platform::Api
            && request.messages.iter().flat_map(|m| &m.images).any(remote);
        if !api_images && request.media.is_empty() {
            return Ok(None);
        }
        let mut copy = request.clone();
        if api_images {
            for image in copy.messages.iter_mut().flat_map(|m| m.images.iter_mut()) {
                if remote(image) {
                    *image = self.fetch(&image.url).await?;
                }
            }
        }
        let media = std::mem::take(&mut copy.media);
        let mut blocks = Vec::with_capacity(media.len());
        for item in &media {
            let fetched = self
                .media
                .fetch(item, Want::Image)
                .await
                .map_err(|e| e.user_message(item.media.kind))?;
            self.media.count(item, Outcome::Ok);
            blocks.push(fetched.image_block());
        }
        // The photos belong to the user's turn of this message: the last one.
        if let Some(turn) = copy
            .messages
            .iter_mut()
            .rev()
            .find(|m| m.role == Role::User)
        {
            turn.images.extend(blocks);
        }
        Ok(Some(copy))
    }

    /// One image, as a `data:` URL.
    async fn fetch(&self, raw: &str) -> Result<ImageRef, String> {
        let url = Url::parse(raw).map_err(|e| format!("the image URL is not valid: {e}"))?;
        let name = shown(&url);
        let failed = |why: String| format!("the image at {name} could not be used: {why}");
        let client = self
            .policy
            .client_builder(&url, USER_AGENT)
            .await
            .map_err(|e| failed(e.to_string()))?
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| failed(describe(e)))?;
        let mut resp = client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, IMAGE_TYPES.join(", "))
            .send()
            .await
            .map_err(|e| failed(describe(e)))?;
        let status = resp.status();
        if status.is_redirection() {
            return Err(failed(format!(
                "it answered {status}; redirects are not followed, send the final URL"
            )));
        }
        if !status.is_success() {
            return Err(failed(format!("it answered {status}")));
        }
        let declared = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase())
            .unwrap_or_default();
        let Some(mime) = IMAGE_TYPES.iter().find(|t| **t == declared) else {
            return Err(failed(format!(
                "its content type {declared:?} is not one of {}",
                IMAGE_TYPES.join(", ")
            )));
        };
        let too_large = || failed(format!("it is larger than {} bytes", self.max_bytes));
        if resp
            .content_length()
            .is_some_and(|n| n > self.max_bytes as u64)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| failed(describe(e)))? {
            if bytes.len() + chunk.len() > self.max_bytes {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        match sniff_image(&bytes) {
            Some(found) if found == *mime => {}
            found => {
                return Err(failed(format!(
                    "it claims {mime} but its bytes are {}",
                    found.unwrap_or("not an image")
                )));
            }
        }
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        Ok(ImageRef {
            url: format!("data:{mime};base64,{data}"),
            mime_type: Some(mime.to_string()),
        })
    }
}
