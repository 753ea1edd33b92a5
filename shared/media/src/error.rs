//! Why a platform's file could not be used, as the user is told and as the metric counts it.
//! No variant holds a URL: the URLs this crate requests may carry a bot token.

use hermes_channels::media::LocateError;
use hermes_types::model::MediaKind;

/// What became of one file: the `outcome` label of `hermes_media_fetch_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Downloaded and of an accepted type.
    Ok,
    /// A voice note downloaded and transcribed.
    Transcribed,
    /// The platform refused the file id (a 4xx, or Telegram's `ok: false`).
    Refused,
    /// Larger than the limit.
    TooLarge,
    /// Its bytes are not what it claims, or not a type the model takes.
    WrongType,
    /// The deadline passed before the file arrived.
    Timeout,
    /// The platform could not be reached or failed (5xx, network).
    Unavailable,
    /// The download's host has a non-public address that is not allowlisted.
    AddressRefused,
    /// The platform's credentials are not configured, so its files cannot be fetched.
    NoCredentials,
    /// A kind of file the model cannot use (document, sticker, video).
    Unsupported,
    /// A voice note while no transcription endpoint is configured.
    NotConfigured,
    /// The transcription endpoint failed.
    TranscriptionFailed,
}

impl Outcome {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Transcribed => "transcribed",
            Outcome::Refused => "refused",
            Outcome::TooLarge => "too_large",
            Outcome::WrongType => "wrong_type",
            Outcome::Timeout => "timeout",
            Outcome::Unavailable => "unavailable",
            Outcome::AddressRefused => "address_refused",
            Outcome::NoCredentials => "no_credentials",
            Outcome::Unsupported => "unsupported",
            Outcome::NotConfigured => "not_configured",
            Outcome::TranscriptionFailed => "transcription_failed",
        }
    }
}

/// Why a file could not be fetched or transcribed. The texts are ours: they name the
/// platform and the reason, never a URL.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("{platform} credentials are not configured")]
    NoCredentials { platform: &'static str },
    #[error("{platform} refused the file: {why}")]
    Refused { platform: &'static str, why: String },
    #[error("the file is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the file claims {claimed:?} but its bytes are {found}")]
    WrongType { claimed: String, found: String },
    #[error("the file did not arrive within {secs} s")]
    Timeout { secs: u64 },
    #[error("{platform} could not be reached: {why}")]
    Unavailable { platform: &'static str, why: String },
    #[error("the download host {host} is not public: {why}")]
    AddressRefused { host: String, why: String },
    #[error("the transcription failed: {0}")]
    Transcription(String),
}

impl MediaError {
    /// A platform's answer `status` as a failure of `what` (`the download`, …): a 5xx or
    /// 429 as the platform unavailable, any other non-2xx as the file refused.
    pub fn check_status(
        platform: &'static str,
        what: &str,
        status: reqwest::StatusCode,
    ) -> Result<(), MediaError> {
        Ok(LocateError::check_status(platform, what, status)?)
    }

    /// The metric's outcome for this failure.
    pub fn outcome(&self) -> Outcome {
        match self {
            MediaError::NoCredentials { .. } => Outcome::NoCredentials,
            MediaError::Refused { .. } => Outcome::Refused,
            MediaError::TooLarge { .. } => Outcome::TooLarge,
            MediaError::WrongType { .. } => Outcome::WrongType,
            MediaError::Timeout { .. } => Outcome::Timeout,
            MediaError::Unavailable { .. } => Outcome::Unavailable,
            MediaError::AddressRefused { .. } => Outcome::AddressRefused,
            MediaError::Transcription(_) => Outcome::TranscriptionFailed,
        }
    }

    /// What the sender of the file reads: what went wrong with their `kind` of file and
    /// what they can do, in a sentence (the operator's details are in the log).
    pub fn user_message(&self, kind: MediaKind) -> String {
        let what = noun(kind);
        match self {
            MediaError::TooLarge { limit } => format!(
                "Sorry, your {what} is too large for me to open (the limit is {}). Could you \
                 send a smaller one?",
                size(*limit)
            ),
            MediaError::WrongType { .. } => format!(
                "Sorry, I couldn't open your {what}: the file isn't in a format I can read. \
                 Could you send it as a photo (JPEG, PNG, GIF or WebP) or a voice note?"
            ),
            MediaError::Refused { .. } => format!(
                "Sorry, I couldn't get your {what} from the chat service: it may have \
                 expired. Could you send it again?"
            ),
            MediaError::Timeout { .. } | MediaError::Unavailable { .. } => format!(
                "Sorry, your {what} took too long to download. Please try sending it again \
                 in a moment."
            ),
            MediaError::NoCredentials { .. } | MediaError::AddressRefused { .. } => {
                format!("Sorry, I can't open files like your {what} here yet.")
            }
            MediaError::Transcription(_) => "Sorry, I couldn't make out your voice note. \
                 Could you try again, or type your message?"
                .to_string(),
        }
    }
}

impl From<LocateError> for MediaError {
    fn from(e: LocateError) -> Self {
        match e {
            LocateError::NoCredentials { platform } => MediaError::NoCredentials { platform },
            LocateError::Refused { platform, why } => MediaError::Refused { platform, why },
            LocateError::Unavailable { platform, why } => MediaError::Unavailable { platform, why },
        }
    }
}

/// How a file of `kind` is named to its sender.
pub fn noun(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Image => "photo",
        MediaKind::Document => "document",
        MediaKind::Voice => "voice note",
        MediaKind::Audio => "audio file",
        MediaKind::Video => "video",
        MediaKind::Sticker => "sticker",
    }
}

/// A byte limit as people read it: `5 MB`, `700 KB`.
fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MB", bytes >> 20)
    } else if bytes >= 1 << 10 {
        format!("{} KB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(5 << 20), "5 MB");
        assert_eq!(size(1024), "1 KB");
        assert_eq!(size(300), "300 bytes");
    }

    #[test]
    fn every_user_message_names_the_file_and_no_detail() {
        let errors = [
            MediaError::TooLarge { limit: 1024 },
            MediaError::Refused {
                platform: "telegram",
                why: "400 Bad Request: wrong file_id".into(),
            },
            MediaError::Timeout { secs: 2 },
        ];
        for e in errors {
            let text = e.user_message(MediaKind::Image);
            assert!(text.contains("photo"), "{text}");
            assert!(!text.contains("file_id"), "{text}");
        }
    }
}
