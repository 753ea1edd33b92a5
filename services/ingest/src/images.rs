//! Images an API caller sends with a turn (docs/api.md): a `data:image/…;base64` URL of a
//! type the vision models read, or an http(s) address the provider adapter fetches. Anything
//! else (another `data:` type, a file, another scheme) is refused with 400
//! `unsupported_content_type` before the message is accepted.

use hermes_runtime::http::ApiError;
use hermes_types::data_url;
use hermes_types::model::ImageRef;

/// The image types a `data:` URL may carry.
const INLINE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

fn unsupported(message: String) -> ApiError {
    ApiError::bad_request("unsupported_content_type", message)
}

/// The image at `url`, or why it cannot be sent to a model.
pub fn image_ref(url: &str) -> Result<ImageRef, ApiError> {
    let url = url.trim();
    if let Some(inline) = data_url::parse_base64(url) {
        let mime = inline.mime.map(str::to_ascii_lowercase).unwrap_or_default();
        if !INLINE_TYPES.contains(&mime.as_str()) {
            return Err(unsupported(format!(
                "data: URLs must hold a PNG, JPEG, GIF or WebP image, not {:?}",
                if mime.is_empty() {
                    "untyped data"
                } else {
                    &mime
                }
            )));
        }
        if inline.data.trim().is_empty() {
            return Err(unsupported("the data: URL holds no image".into()));
        }
        return Ok(ImageRef {
            url: url.to_string(),
            mime_type: Some(mime),
        });
    }
    match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(ImageRef {
            url: u.to_string(),
            mime_type: None,
        }),
        _ => Err(unsupported(
            "an image must be an http(s) URL or a data:image/…;base64 URL".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_images_and_web_addresses_are_taken() {
        let r = image_ref("data:image/png;base64,iVBORw0KGgo=").unwrap();
        assert_eq!(r.mime_type.as_deref(), Some("image/png"));
        let r = image_ref("DATA:Image/JPEG;BASE64,/9j/").unwrap();
        assert_eq!(r.mime_type.as_deref(), Some("image/jpeg"));
        let r = image_ref("https://example.com/cat.png").unwrap();
        assert_eq!(
            (r.url.as_str(), r.mime_type),
            ("https://example.com/cat.png", None)
        );
        assert!(image_ref("http://example.com/a.webp").is_ok());
    }

    #[test]
    fn other_content_is_refused_as_unsupported() {
        for url in [
            "data:application/pdf;base64,JVBERi0=",
            "data:text/plain;base64,aGk=",
            "data:image/svg+xml;base64,PHN2Zz4=",
            "data:;base64,AAAA",
            "data:image/png,not-base64",
            "data:image/png;base64,",
            "file:///etc/passwd",
            "ftp://example.com/a.png",
            "file-abc123",
            "",
        ] {
            let e = image_ref(url).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.code),
                (400, "unsupported_content_type"),
                "{url}"
            );
        }
    }
}
