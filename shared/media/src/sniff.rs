//! What a file's bytes are, by their magic numbers, and whether that matches the type its
//! server declared: a declared type that names another format is a lie and refused; a
//! generic one (`application/octet-stream`, or none, as Telegram's file server may send)
//! defers to the bytes.

use hermes_types::model::sniff_image;

/// Declared types that say nothing about the format.
const GENERIC: [&str; 3] = ["", "application/octet-stream", "binary/octet-stream"];

/// Audio formats by magic number, each with the declared types that name it.
const AUDIO: [(&str, &[&str]); 7] = [
    ("audio/ogg", &["audio/ogg", "audio/opus", "application/ogg"]),
    ("audio/mpeg", &["audio/mpeg", "audio/mp3"]),
    (
        "audio/wav",
        &["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"],
    ),
    (
        "audio/mp4",
        &[
            "audio/mp4",
            "audio/m4a",
            "audio/x-m4a",
            "audio/aac",
            "video/mp4",
        ],
    ),
    ("audio/amr", &["audio/amr"]),
    ("audio/webm", &["audio/webm", "video/webm"]),
    ("audio/flac", &["audio/flac", "audio/x-flac"]),
];

/// The audio format of `bytes`, as one of the MIME types of [`AUDIO`].
pub fn sniff_audio(bytes: &[u8]) -> Option<&'static str> {
    let found = if bytes.starts_with(b"OggS") {
        "audio/ogg"
    } else if bytes.starts_with(b"ID3")
        || (bytes.len() > 1 && bytes[0] == 0xff && bytes[1] & 0xe0 == 0xe0)
    {
        "audio/mpeg"
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WAVE" {
        "audio/wav"
    } else if bytes.len() >= 8 && &bytes[4..8] == b"ftyp" {
        "audio/mp4"
    } else if bytes.starts_with(b"#!AMR") {
        "audio/amr"
    } else if bytes.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]) {
        "audio/webm"
    } else if bytes.starts_with(b"fLaC") {
        "audio/flac"
    } else {
        return None;
    };
    Some(found)
}

/// The declared MIME type without parameters, lower-cased (`audio/ogg; codecs=opus` →
/// `audio/ogg`).
pub fn essence(declared: &str) -> String {
    declared
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The image type of `bytes` (one of the types every provider takes) if `declared` agrees
/// with it; else what the bytes are, for the refusal.
pub fn check_image(declared: &str, bytes: &[u8]) -> Result<&'static str, String> {
    let declared = match essence(declared).as_str() {
        "image/jpg" => "image/jpeg".to_string(),
        other => other.to_string(),
    };
    match sniff_image(bytes) {
        Some(found) if GENERIC.contains(&declared.as_str()) || declared == found => Ok(found),
        Some(found) => Err(found.to_string()),
        None => Err(describe_unknown(bytes)),
    }
}

/// The audio type of `bytes` if `declared` agrees with it; else what the bytes are.
pub fn check_audio(declared: &str, bytes: &[u8]) -> Result<&'static str, String> {
    let declared = essence(declared);
    let Some(found) = sniff_audio(bytes) else {
        return Err(describe_unknown(bytes));
    };
    let names = AUDIO
        .iter()
        .find(|(t, _)| *t == found)
        .map_or(&[][..], |(_, names)| *names);
    if GENERIC.contains(&declared.as_str()) || names.contains(&declared.as_str()) {
        Ok(found)
    } else {
        Err(found.to_string())
    }
}

/// Bytes of no known format, named for a refusal.
fn describe_unknown(bytes: &[u8]) -> String {
    if sniff_image(bytes).is_some() || sniff_audio(bytes).is_some() {
        "of another type".into()
    } else {
        "not an image or audio file".into()
    }
}

/// The file name a transcription endpoint recognizes the format of `mime` by.
pub fn audio_file_name(mime: &str) -> &'static str {
    match mime {
        "audio/mpeg" => "audio.mp3",
        "audio/wav" => "audio.wav",
        "audio/mp4" => "audio.m4a",
        "audio/amr" => "audio.amr",
        "audio/webm" => "audio.webm",
        "audio/flac" => "audio.flac",
        _ => "voice.ogg",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n0000";
    const OGG: &[u8] = b"OggS\x00\x02rest";

    #[test]
    fn an_image_is_what_its_bytes_are_and_a_generic_type_defers_to_them() {
        assert_eq!(check_image("image/png", PNG), Ok("image/png"));
        assert_eq!(
            check_image("application/octet-stream", PNG),
            Ok("image/png")
        );
        assert_eq!(check_image("", PNG), Ok("image/png"));
        assert_eq!(check_image("image/jpeg", PNG), Err("image/png".into()));
        assert!(check_image("image/png", b"<html>").is_err());
        assert_eq!(
            check_image("image/jpg", b"\xff\xd8\xff\xe0"),
            Ok("image/jpeg")
        );
    }

    #[test]
    fn audio_names_its_format_under_any_of_its_aliases() {
        assert_eq!(check_audio("audio/ogg; codecs=opus", OGG), Ok("audio/ogg"));
        assert_eq!(
            check_audio("application/octet-stream", OGG),
            Ok("audio/ogg")
        );
        assert_eq!(check_audio("audio/mpeg", OGG), Err("audio/ogg".into()));
        assert!(check_audio("audio/ogg", PNG).is_err());
        assert_eq!(check_audio("audio/mp3", b"ID3\x04"), Ok("audio/mpeg"));
        assert_eq!(audio_file_name("audio/ogg"), "voice.ogg");
    }
}
