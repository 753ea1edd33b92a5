//! Voice notes as text: an OpenAI-compatible `POST {HERMES_TRANSCRIBE_URL}/audio/transcriptions`
//! (multipart: `model` and `file`), answered `{"text": …}`. The endpoint is the operator's,
//! like the embeddings endpoint, so it is not behind the SSRF guard; its key is a secret and
//! its errors are redacted before they are logged.

use std::sync::Arc;

use hermes_config::TranscribeSettings;
use hermes_net::http::{client_builder, describe};
use secrecy::ExposeSecret;
use serde::Deserialize;

use crate::error::MediaError;
use crate::fetch::Fetched;
use crate::sniff::audio_file_name;

const USER_AGENT: &str = concat!("hermes-transcribe/", env!("CARGO_PKG_VERSION"));
/// Separates the parts of the multipart body.
const BOUNDARY: &str = "hermes-transcription-7f3a9c1e5b2d4680";

/// The endpoint's answer.
#[derive(Deserialize)]
struct Transcription {
    text: String,
}

/// A client of the transcription endpoint.
#[derive(Clone)]
pub struct Transcriber {
    settings: Arc<TranscribeSettings>,
    client: reqwest::Client,
}

impl Transcriber {
    /// A transcriber when one is configured (`HERMES_TRANSCRIBE_URL`).
    pub fn new(settings: Option<&TranscribeSettings>) -> Result<Option<Self>, MediaError> {
        let Some(settings) = settings else {
            return Ok(None);
        };
        let client = client_builder(USER_AGENT)
            .timeout(settings.timeout)
            .build()
            .map_err(|e| MediaError::Transcription(describe(e)))?;
        Ok(Some(Self {
            settings: Arc::new(settings.clone()),
            client,
        }))
    }

    /// The text spoken in `audio`.
    pub async fn transcribe(&self, audio: &Fetched) -> Result<String, MediaError> {
        let base = self.settings.url.as_str().trim_end_matches('/');
        let url = format!("{base}/audio/transcriptions");
        let mut request = self
            .client
            .post(url)
            .header(
                reqwest::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(multipart(&self.settings.model, audio));
        if let Some(key) = &self.settings.key {
            request = request.bearer_auth(key.expose_secret());
        }
        // An endpoint's error body may quote the key.
        let secrets: Vec<String> = self
            .settings
            .key
            .iter()
            .map(|k| k.expose_secret().to_string())
            .collect();
        let failed =
            |why: String| MediaError::Transcription(hermes_net::redact::redact(&why, &secrets));
        let resp = request.send().await.map_err(|e| failed(describe(e)))?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let body: String = body.chars().take(300).collect();
            return Err(failed(format!("the endpoint answered {status}: {body}")));
        }
        let answer: Transcription = resp.json().await.map_err(|e| failed(describe(e)))?;
        let text = answer.text.trim().to_string();
        if text.is_empty() {
            return Err(failed("the transcript is empty".into()));
        }
        Ok(text)
    }
}

/// The multipart body: the model's name, then the file.
fn multipart(model: &str, audio: &Fetched) -> Vec<u8> {
    let mut body = Vec::with_capacity(audio.bytes.len() + 512);
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{model}\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{}\"\r\nContent-Type: {}\r\n\r\n",
            audio_file_name(audio.mime),
            audio.mime
        )
        .as_bytes(),
    );
    body.extend_from_slice(&audio.bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}
