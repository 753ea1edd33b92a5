//! Step 1b, a chat platform's files (docs/channels.md, media): what the model can be given.
//! Photos go on as references, fetched by the llm stage right before the model call. A
//! voice note or audio file is fetched and transcribed here, because intent, recall and the
//! tools need its words: the transcript becomes the message's text, and is what the
//! history keeps. Anything else (a document, a sticker, a video), a voice note without a
//! transcription endpoint, or a file the platform will not give, is answered with a notice
//! that says so: no model call, no credit charged. Each outcome is counted in
//! `hermes_media_fetch_total`.

use hermes_config::Config;
use hermes_media::error::noun;
use hermes_media::{MediaFetcher, Outcome, Transcriber, Want};
use hermes_types::model::{MediaKind, MediaRef, MessageEvent};

/// What a voice note gets when no transcription endpoint is configured.
pub const CANNOT_LISTEN: &str =
    "I can't listen to voice notes yet. Could you type your message instead?";

/// The router's side of platform files.
pub struct MediaStep {
    fetcher: MediaFetcher,
    transcriber: Option<Transcriber>,
}

impl MediaStep {
    /// As configured: the platforms' credentials, the limits and the transcription endpoint.
    pub fn new(config: &Config, media_fetches: prometheus::IntCounterVec) -> anyhow::Result<Self> {
        let transcriber = Transcriber::new(config.media.transcribe.as_ref())?;
        if transcriber.is_none() {
            tracing::info!(
                "HERMES_TRANSCRIBE_URL is not set: voice notes are answered that they cannot be listened to"
            );
        }
        Ok(Self {
            fetcher: MediaFetcher::new(config, media_fetches),
            transcriber,
        })
    }

    /// The text of a chat platform's message: its text or caption, then the transcript of
    /// each voice note. `Err` holds the notice its sender gets instead of an answer.
    pub async fn text_of(&self, event: &MessageEvent) -> Result<String, String> {
        let mut text = event.text.clone().unwrap_or_default();
        for media in &event.media {
            let item = MediaRef {
                platform: event.platform,
                media: media.clone(),
            };
            match media.kind {
                MediaKind::Image => {}
                MediaKind::Voice | MediaKind::Audio => {
                    let transcript = self.transcribe(&item).await?;
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&transcript);
                }
                MediaKind::Document | MediaKind::Video | MediaKind::Sticker => {
                    self.fetcher.count(&item, Outcome::Unsupported);
                    return Err(format!(
                        "I can't open {}s yet. Could you send your question as text, a photo \
                         or a voice note?",
                        noun(media.kind)
                    ));
                }
            }
        }
        Ok(text)
    }

    /// The words of one voice note or audio file.
    async fn transcribe(&self, item: &MediaRef) -> Result<String, String> {
        let Some(transcriber) = &self.transcriber else {
            self.fetcher.count(item, Outcome::NotConfigured);
            return Err(CANNOT_LISTEN.into());
        };
        let kind = item.media.kind;
        let audio = self
            .fetcher
            .fetch(item, Want::Audio)
            .await
            .map_err(|e| e.user_message(kind))?;
        match transcriber.transcribe(&audio).await {
            Ok(text) => {
                self.fetcher.count(item, Outcome::Transcribed);
                Ok(text)
            }
            Err(e) => {
                self.fetcher.count(item, e.outcome());
                tracing::warn!(error = %e, "a voice note could not be transcribed");
                Err(e.user_message(kind))
            }
        }
    }
}
