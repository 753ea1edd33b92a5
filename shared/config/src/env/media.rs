//! Media from chat platforms (docs/channels.md, media): how large a voice note may be, how
//! long one download may take, which non-public hosts a download may reach, and the
//! OpenAI-compatible transcription endpoint that turns voice notes into text.

use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use super::Unset::{Means, Value};
use super::{kinds, settings};
use crate::AllowRule;

settings! {
    /// Platform media and transcription.
    SETTINGS = [
        HERMES_MEDIA_DEADLINE_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("20"),
            secret: false,
            help: "how long fetching one platform file may take in all (the platform's file look-up and the download): past it the download is cut and the user told",
        },
        HERMES_AUDIO_MAX_BYTES: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("20971520"),
            secret: false,
            help: "largest voice note or audio file downloaded for transcription (photos use `HERMES_IMAGE_MAX_BYTES`)",
        },
        HERMES_MEDIA_FETCH_ALLOW: Vec<AllowRule> {
            kind: kinds::ALLOW_LIST,
            unset: Means("(none)"),
            secret: false,
            help: "comma-separated host names or CIDR ranges platform file downloads may reach although not public (else refused)",
        },
        HERMES_TRANSCRIBE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Means("(none: voice notes are answered that they cannot be listened to)"),
            secret: false,
            help: "base URL of an OpenAI-compatible transcription endpoint (`/audio/transcriptions` is appended), e.g. `https://api.openai.com/v1`",
        },
        HERMES_TRANSCRIBE_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "Bearer key of the transcription endpoint",
        },
        HERMES_TRANSCRIBE_MODEL: String {
            kind: kinds::TEXT,
            unset: Value("whisper-1"),
            secret: false,
            help: "model named in each transcription request",
        },
        HERMES_TRANSCRIBE_TIMEOUT_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("60"),
            secret: false,
            help: "how long one transcription request may take",
        },
    ]
}
