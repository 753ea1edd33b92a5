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
//!
//! One model call's images are bounded as a whole (docs/security.md, "No caller can hurt
//! another"): they are fetched [`AT_ONCE`] at a time under one deadline,
//! `HERMES_IMAGE_FETCH_DEADLINE_SECS`, and together may not hold more than
//! `HERMES_IMAGE_INLINE_MAX_BYTES` decoded (the request's own `data:` images included). A
//! call past either fails with a sentence naming the limit; no model is asked, and the run
//! ends failed (and refunded) like any other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::{StreamExt, TryStreamExt};
use hermes_config::Config;
use hermes_media::{MediaFetcher, Outcome, Want};
use hermes_net::guard::{AddressPolicy, shown};
use hermes_net::http::describe;
use hermes_telemetry::LimitMetrics;
use hermes_types::model::{IMAGE_TYPES, ImageRef, LlmRequest, Platform, Role, sniff_image};
use url::Url;

const USER_AGENT: &str = concat!("hermes-image-fetch/", env!("CARGO_PKG_VERSION"));
/// How many images of one model call are fetched at once.
pub const AT_ONCE: usize = 4;

/// Why a model call's images could not be inlined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InlineFailure {
    /// One image could not be used (the sentence names it and why).
    Refused,
    /// Together they hold more than `HERMES_IMAGE_INLINE_MAX_BYTES`.
    TooManyBytes,
    /// They did not all arrive within `HERMES_IMAGE_FETCH_DEADLINE_SECS`.
    Deadline,
}

impl InlineFailure {
    /// The `outcome` label of `hermes_image_inline_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            InlineFailure::Refused => "refused",
            InlineFailure::TooManyBytes => "too_many_bytes",
            InlineFailure::Deadline => "deadline",
        }
    }
}

/// A failure and the sentence that tells the caller (or the chat's sender) about it.
type Failed = (InlineFailure, String);

/// Fetches the images of API requests and of chat platforms.
pub struct ImageFetcher {
    policy: AddressPolicy,
    max_bytes: usize,
    /// `HERMES_IMAGE_INLINE_MAX_BYTES`: all the images of one model call, decoded.
    max_total: usize,
    /// `HERMES_IMAGE_FETCH_DEADLINE_SECS`: all the fetches of one model call.
    deadline: Duration,
    media: MediaFetcher,
    metrics: LimitMetrics,
}

/// The request's image and photo bytes still allowed in this model call.
struct Budget(AtomicUsize);

impl Budget {
    /// Take `n` bytes; false (nothing taken) when fewer are left.
    fn take(&self, n: usize) -> bool {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }
}

impl ImageFetcher {
    /// A fetcher under `config`'s limits, counting platform files in `media_fetches` and
    /// the calls' images in `metrics`.
    pub fn new(
        config: &Config,
        media_fetches: prometheus::IntCounterVec,
        metrics: LimitMetrics,
    ) -> Self {
        Self {
            media: MediaFetcher::new(config, media_fetches),
            policy: AddressPolicy::new(
                config.ingest.api.image_fetch_allow.clone(),
                "HERMES_IMAGE_FETCH_ALLOW",
            ),
            max_bytes: config.ingest.api.image_max_bytes,
            max_total: config.ingest.api.image_inline_max_bytes,
            deadline: config.ingest.api.image_fetch_deadline,
            metrics,
        }
    }

    /// The request to send: `request` itself when it holds no caller's http(s) image and
    /// no platform photo, else a copy with each such image inlined. The error names the
    /// image or the limit and what is wrong, for the caller or the chat's sender.
    pub async fn inline(&self, request: &LlmRequest) -> Result<Option<LlmRequest>, String> {
        let api_images = request.reply_to.platform == Platform::Api
            && request.messages.iter().flat_map(|m| &m.images).any(remote);
        if !api_images && request.media.is_empty() {
            return Ok(None);
        }
        let started = Instant::now();
        let result =
            match tokio::time::timeout(self.deadline, self.inline_all(request, api_images)).await {
                Ok(result) => result,
                Err(_) => Err((InlineFailure::Deadline, self.too_slow(request, api_images))),
            };
        let outcome = match &result {
            Ok(_) => "ok",
            Err((failure, _)) => failure.as_str(),
        };
        self.metrics
            .image_inlines
            .with_label_values(&[outcome])
            .inc();
        self.metrics
            .image_inline_seconds
            .with_label_values(&[outcome])
            .observe(started.elapsed().as_secs_f64());
        result.map(Some).map_err(|(_, why)| why)
    }

    /// The sentence of a call whose images outlasted the deadline.
    fn too_slow(&self, request: &LlmRequest, api_images: bool) -> String {
        let secs = self.deadline.as_secs();
        if api_images {
            format!(
                "the images of this request did not all arrive within {secs} s (the limit for all \
                 the images of one model call); send fewer images, smaller ones, or faster URLs"
            )
        } else {
            let kind = request
                .media
                .first()
                .map_or(hermes_types::model::MediaKind::Image, |m| m.media.kind);
            hermes_media::MediaError::Timeout { secs }.user_message(kind)
        }
    }

    /// Every image of the request inlined, within [`Self::max_total`], [`AT_ONCE`] fetches
    /// at a time (the caller bounds the whole by the deadline).
    async fn inline_all(
        &self,
        request: &LlmRequest,
        api_images: bool,
    ) -> Result<LlmRequest, Failed> {
        let mut copy = request.clone();
        let budget = Budget(AtomicUsize::new(self.max_total));
        // The request's own `data:` images count first: they are inlined as they are.
        let inline_bytes: usize = copy
            .messages
            .iter()
            .flat_map(|m| &m.images)
            .filter(|i| !remote(i))
            .map(|i| {
                i.url
                    .split_once(',')
                    .map_or(0, |(_, b64)| b64.len() / 4 * 3)
            })
            .sum();
        if !budget.take(inline_bytes) {
            return Err(self.too_many_bytes());
        }
        if api_images {
            let urls: Vec<String> = copy
                .messages
                .iter()
                .flat_map(|m| &m.images)
                .filter(|i| remote(i))
                .map(|i| i.url.clone())
                .collect();
            let fetched: Vec<ImageRef> = futures_util::stream::iter(urls)
                .map(|url| {
                    let budget = &budget;
                    async move { self.fetch(&url, budget).await }
                })
                .buffered(AT_ONCE)
                .try_collect()
                .await?;
            let mut fetched = fetched.into_iter();
            for image in copy.messages.iter_mut().flat_map(|m| m.images.iter_mut()) {
                if remote(image)
                    && let Some(f) = fetched.next()
                {
                    *image = f;
                }
            }
        }
        let media = std::mem::take(&mut copy.media);
        let blocks: Vec<ImageRef> = futures_util::stream::iter(0..media.len())
            .map(|i| {
                let (budget, item) = (&budget, &media[i]);
                async move {
                    let fetched =
                        self.media.fetch(item, Want::Image).await.map_err(|e| {
                            (InlineFailure::Refused, e.user_message(item.media.kind))
                        })?;
                    self.media.count(item, Outcome::Ok);
                    if !budget.take(fetched.bytes.len()) {
                        return Err(self.too_many_bytes());
                    }
                    Ok(fetched.image_block())
                }
            })
            .buffered(AT_ONCE)
            .try_collect()
            .await?;
        // The photos belong to the user's turn of this message: the last one.
        if let Some(turn) = copy
            .messages
            .iter_mut()
            .rev()
            .find(|m| m.role == Role::User)
        {
            turn.images.extend(blocks);
        }
        Ok(copy)
    }

    fn too_many_bytes(&self) -> Failed {
        (
            InlineFailure::TooManyBytes,
            format!(
                "the images of this request hold more than {} bytes together (the limit for one \
                 model call); send fewer or smaller images",
                self.max_total
            ),
        )
    }

    /// One image, as a `data:` URL, its bytes taken from `budget` as they arrive.
    async fn fetch(&self, raw: &str, budget: &Budget) -> Result<ImageRef, Failed> {
        let refused = |why: String| (InlineFailure::Refused, why);
        let url =
            Url::parse(raw).map_err(|e| refused(format!("the image URL is not valid: {e}")))?;
        let name = shown(&url);
        let failed = |why: String| refused(format!("the image at {name} could not be used: {why}"));
        // No timeout of its own: the deadline of the call's images bounds every fetch.
        let client = self
            .policy
            .client_builder(&url, USER_AGENT)
            .await
            .map_err(|e| failed(e.to_string()))?
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
            if !budget.take(chunk.len()) {
                return Err(self.too_many_bytes());
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

/// An image named by an http(s) URL, to be fetched.
fn remote(i: &ImageRef) -> bool {
    i.url.starts_with("http://") || i.url.starts_with("https://")
}
