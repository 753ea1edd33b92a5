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
use hermes_media::{MediaError, MediaFetcher, Outcome, Transcriber, Want};
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
            if media.platform_id.is_none() && media.url.is_none() {
                // Nothing names the file: it cannot be fetched, whatever its kind.
                self.fetcher.count(&item, Outcome::Refused);
                return Err(MediaError::Refused {
                    platform: event.platform.as_str(),
                    why: "the message names no file".into(),
                }
                .user_message(media.kind));
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_types::model::{Media, Platform};

    fn step(vars: &[(&str, &str)]) -> (MediaStep, prometheus::IntCounterVec) {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let config = Config::from_lookup(
            &|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
            None,
        )
        .unwrap();
        let counted = prometheus::IntCounterVec::new(
            prometheus::Opts::new("hermes_media_fetch_total", "test"),
            &["platform", "kind", "outcome"],
        )
        .unwrap();
        (MediaStep::new(&config, counted.clone()).unwrap(), counted)
    }

    fn event(kind: MediaKind, id: Option<&str>) -> MessageEvent {
        let mut e: MessageEvent = serde_json::from_value(serde_json::json!({
            "platform": "telegram", "sender_id": "1", "chat_id": "1",
            "received_at": "2026-11-22T00:00:00Z",
        }))
        .unwrap();
        e.text = Some("look".into());
        e.media = vec![Media {
            kind,
            platform_id: id.map(str::to_string),
            url: None,
            mime_type: None,
        }];
        e
    }

    #[tokio::test]
    async fn photos_pass_and_what_the_model_cannot_use_gets_a_notice() {
        let (step, counted) = step(&[]);
        let text = step.text_of(&event(MediaKind::Image, Some("f"))).await;
        assert_eq!(text.as_deref(), Ok("look"));
        let sticker = step.text_of(&event(MediaKind::Sticker, Some("f"))).await;
        assert!(sticker.unwrap_err().contains("can't open stickers"));
        let voice = step.text_of(&event(MediaKind::Voice, Some("f"))).await;
        assert_eq!(voice.unwrap_err(), CANNOT_LISTEN);
        let nameless = step.text_of(&event(MediaKind::Image, None)).await;
        assert!(nameless.unwrap_err().contains("Could you send it again"));
        for (kind, outcome) in [
            ("sticker", "unsupported"),
            ("voice", "not_configured"),
            ("image", "refused"),
        ] {
            let n = counted
                .with_label_values(&[Platform::Telegram.as_str(), kind, outcome])
                .get();
            assert_eq!(n, 1, "{kind} {outcome}");
        }
    }
}
