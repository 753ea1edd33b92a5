//! Images an API caller sends (docs/api.md, images): an `image_url` (chat completions) or
//! `input_image` (responses) URL becomes an [`ImageRef`]. A `data:` URL is checked here,
//! whole: an image type the providers take, valid base64, bytes that are what the type
//! says, and at most `HERMES_IMAGE_MAX_BYTES` decoded. An http(s) URL is only parsed here;
//! the llm stage fetches it through the SSRF guard right before the model call, with the
//! same limits, so that no bytes of it ever travel in a queue message.

use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::model::{ChatMessage, IMAGE_TYPES, ImageRef, sniff_image};

/// `HERMES_IMAGE_MAX_BYTES` of this process, set once at start ([`set_max_bytes`]): the
/// parsers that call [`image_ref`] have no configuration at hand, and every ingest of a
/// process reads the same environment.
static MAX_BYTES: AtomicUsize = AtomicUsize::new(5 * 1024 * 1024);

/// Set the decoded size limit of `data:` images.
pub(crate) fn set_max_bytes(max: usize) {
    MAX_BYTES.store(max, Ordering::Relaxed);
}

fn invalid(message: String) -> ApiError {
    ApiError::bad_request(ApiErrorCode::InvalidImage, message)
}

/// The image a caller's URL names, checked as far as ingest can without fetching.
pub(crate) fn image_ref(url: &str) -> Result<ImageRef, ApiError> {
    if let Some(rest) = url.strip_prefix("data:") {
        return data_image(url, rest);
    }
    match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(ImageRef {
            url: url.to_string(),
            mime_type: None,
        }),
        _ => Err(ApiError::bad_request(
            ApiErrorCode::InvalidRequest,
            "an image URL must be an http(s) URL or a data:image/… URL",
        )),
    }
}

/// A `data:<type>[;…];base64,<payload>` image, checked whole.
fn data_image(url: &str, rest: &str) -> Result<ImageRef, ApiError> {
    let (header, payload) = rest
        .split_once(',')
        .ok_or_else(|| invalid("a data: URL needs a ',' before its data".into()))?;
    let mut params = header.split(';');
    let mime = params
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if !mime.starts_with("image/") {
        return Err(ApiError::bad_request(
            ApiErrorCode::UnsupportedContentType,
            format!("data: URLs of type {mime:?} are not supported; only images are"),
        ));
    }
    // `image/jpg` is common enough in the wild to be read as what it means.
    let mime = if mime == "image/jpg" {
        "image/jpeg".to_string()
    } else {
        mime
    };
    let Some(mime) = IMAGE_TYPES.iter().find(|t| **t == mime) else {
        return Err(ApiError::bad_request(
            ApiErrorCode::UnsupportedContentType,
            format!(
                "images of type {mime:?} are not supported; send {}",
                IMAGE_TYPES.join(", ")
            ),
        ));
    };
    if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err(invalid(
            "an image data: URL must be base64 (;base64,)".into(),
        ));
    }
    let max = MAX_BYTES.load(Ordering::Relaxed);
    // Four characters make three bytes: a payload that cannot fit is refused undecoded.
    if payload.len() / 4 * 3 > max + 3 {
        return Err(too_large(max));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload.trim())
        .map_err(|e| invalid(format!("the image's base64 is not valid: {e}")))?;
    if bytes.len() > max {
        return Err(too_large(max));
    }
    match sniff_image(&bytes) {
        Some(found) if found == *mime => Ok(ImageRef {
            url: url.to_string(),
            mime_type: Some(mime.to_string()),
        }),
        Some(found) => Err(invalid(format!(
            "the data: URL says {mime} but holds {found}"
        ))),
        None => Err(invalid(format!(
            "the data: URL's bytes are not a {mime} image"
        ))),
    }
}

/// At most `max` images over the whole conversation a request sends (`HERMES_IMAGE_MAX_COUNT`):
/// each one is fetched and inlined for every model call of the run, so the count bounds
/// what one request costs the llm stage. More is `400 too_many_images`, naming the limit.
pub(crate) fn within_count(messages: &[ChatMessage], max: usize) -> Result<(), ApiError> {
    let count: usize = messages.iter().map(|m| m.images.len()).sum();
    if count > max {
        return Err(ApiError::bad_request(
            ApiErrorCode::TooManyImages,
            format!(
                "the request carries {count} images (its earlier turns included); at most {max} are taken per request"
            ),
        ));
    }
    Ok(())
}

fn too_large(max: usize) -> ApiError {
    ApiError::bad_request(
        ApiErrorCode::ImageTooLarge,
        format!("an image may be at most {max} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PNG's first bytes, base64.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUg==";

    #[test]
    fn http_and_image_data_urls_are_taken() {
        let r = image_ref("https://cdn.example/cat.png?x=1").unwrap();
        assert_eq!(r.url, "https://cdn.example/cat.png?x=1");
        assert_eq!(r.mime_type, None);
        let url = format!("data:image/png;base64,{PNG}");
        let r = image_ref(&url).unwrap();
        assert_eq!((r.url, r.mime_type.as_deref()), (url, Some("image/png")));
        let r = image_ref(&format!("data:image/PNG;charset=x;base64,{PNG}")).unwrap();
        assert_eq!(r.mime_type.as_deref(), Some("image/png"));
    }

    #[test]
    fn other_urls_and_bad_data_are_refused_with_their_reason() {
        for (url, code) in [
            (
                "ftp://cdn.example/cat.png".to_string(),
                ApiErrorCode::InvalidRequest,
            ),
            ("file:///etc/passwd".into(), ApiErrorCode::InvalidRequest),
            ("cat.png".into(), ApiErrorCode::InvalidRequest),
            (
                "data:application/pdf;base64,JVBERi0=".into(),
                ApiErrorCode::UnsupportedContentType,
            ),
            (
                "data:text/plain,hello".into(),
                ApiErrorCode::UnsupportedContentType,
            ),
            (
                "data:image/svg+xml;base64,PHN2Zz4=".into(),
                ApiErrorCode::UnsupportedContentType,
            ),
            (format!("data:image/png,{PNG}"), ApiErrorCode::InvalidImage),
            (
                "data:image/png;base64,!!!not base64".into(),
                ApiErrorCode::InvalidImage,
            ),
            ("data:image/png;base64".into(), ApiErrorCode::InvalidImage),
            // A JPEG's magic numbers under a PNG's name.
            (
                "data:image/png;base64,/9j/4AAQ".into(),
                ApiErrorCode::InvalidImage,
            ),
            (
                "data:image/gif;base64,PGh0bWw+".into(),
                ApiErrorCode::InvalidImage,
            ),
        ] {
            let e = image_ref(&url).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.code),
                (400, code),
                "{url}: {}",
                e.message
            );
        }
    }

    #[test]
    fn images_are_counted_over_every_turn_and_more_than_the_limit_is_refused() {
        let image = || image_ref("https://cdn.example/cat.png").unwrap();
        let turn = |n: usize| ChatMessage {
            images: (0..n).map(|_| image()).collect(),
            ..ChatMessage::text(hermes_types::model::Role::User, "look")
        };
        assert!(within_count(&[turn(4), turn(6)], 10).is_ok());
        let e = within_count(&[turn(4), turn(7)], 10).unwrap_err();
        assert_eq!(
            (e.status.as_u16(), e.code),
            (400, ApiErrorCode::TooManyImages)
        );
        assert!(e.message.contains("11 images") && e.message.contains("at most 10"));
    }

    #[test]
    fn a_data_image_over_the_limit_is_refused() {
        let big = base64::engine::general_purpose::STANDARD
            .encode([&b"\x89PNG\r\n\x1a\n"[..], &vec![0u8; 6 * 1024 * 1024]].concat());
        let e = image_ref(&format!("data:image/png;base64,{big}")).unwrap_err();
        assert_eq!(e.code, ApiErrorCode::ImageTooLarge);
    }
}
