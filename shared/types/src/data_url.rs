//! `data:` URLs (RFC 2397, as browsers read them per the WHATWG Fetch standard): the one
//! parser the model providers use to send an image inline instead of by address.
//!
//! `data:[<media type>][;<parameter>…][;base64],<data>`. The scheme and the `base64` marker
//! are ASCII case-insensitive, and the marker counts only as the last parameter (a
//! `;base64` followed by more parameters is a parameter like any other, not an encoding).
//! The media type is returned without its parameters (`image/png;charset=utf-8` →
//! `image/png`): providers take a bare type, and a charset means nothing for image bytes.

/// A base64 `data:` URL taken apart, borrowing from the URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Base64DataUrl<'a> {
    /// The media type without parameters, when the URL names one.
    pub mime: Option<&'a str>,
    /// The base64 payload as written (not decoded).
    pub data: &'a str,
}

/// Parse `url` as a base64 `data:` URL; `None` for any other URL, a `data:` URL without a
/// comma, or one whose payload is not marked base64 (percent-encoded text).
pub fn parse_base64(url: &str) -> Option<Base64DataUrl<'_>> {
    let rest = url
        .get(..5)
        .filter(|scheme| scheme.eq_ignore_ascii_case("data:"))
        .map(|_| &url[5..])?;
    let (meta, data) = rest.split_once(',')?;
    let (params, marker) = meta.trim_end().rsplit_once(';')?;
    if !marker.trim().eq_ignore_ascii_case("base64") {
        return None;
    }
    let mime = params.split(';').next().unwrap_or_default().trim();
    Some(Base64DataUrl {
        mime: (!mime.is_empty()).then_some(mime),
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> Option<(Option<&str>, &str)> {
        parse_base64(url).map(|d| (d.mime, d.data))
    }

    #[test]
    fn a_base64_url_gives_its_type_and_payload() {
        assert_eq!(
            parsed("data:image/png;base64,iVBORw0KGgo="),
            Some((Some("image/png"), "iVBORw0KGgo="))
        );
        assert_eq!(parsed("data:;base64,AAAA"), Some((None, "AAAA")));
        assert_eq!(parsed("data:;base64,"), Some((None, "")), "empty payload");
    }

    #[test]
    fn scheme_and_marker_are_case_insensitive() {
        assert_eq!(
            parsed("DATA:image/jpeg;BASE64,/9j/"),
            Some((Some("image/jpeg"), "/9j/"))
        );
        assert_eq!(
            parsed("Data:image/gif; Base64 ,R0lGOD"),
            Some((Some("image/gif"), "R0lGOD"))
        );
    }

    #[test]
    fn parameters_are_dropped_from_the_type() {
        assert_eq!(
            parsed("data:image/svg+xml;charset=utf-8;base64,PHN2Zz4="),
            Some((Some("image/svg+xml"), "PHN2Zz4="))
        );
        assert_eq!(
            parsed("data:;charset=utf-8;base64,AAAA"),
            Some((None, "AAAA")),
            "parameters without a type name no type"
        );
    }

    #[test]
    fn the_payload_keeps_later_commas() {
        assert_eq!(parsed("data:;base64,a,b"), Some((None, "a,b")));
    }

    #[test]
    fn anything_else_is_not_a_base64_data_url() {
        for url in [
            "https://example.com/cat.png",
            "data:text/plain,hello",
            "data:image/png,iVBORw0KGgo=",
            "data:image/png;base64",
            "data:image/png;base64;charset=utf-8,AAAA",
            "data:image/png;base64x,AAAA",
            "datum:image/png;base64,AAAA",
            "data",
            "",
            "dätä:;base64,AAAA",
        ] {
            assert_eq!(parse_base64(url), None, "{url}");
        }
    }
}
