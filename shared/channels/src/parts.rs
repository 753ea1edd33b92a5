//! What one reply becomes on a platform: models write images as Markdown links
//! (`![a sunset bar](https://…/bar.jpg)`), which chat apps do not render, so a reply holding
//! exactly one such image is sent as a photo message (with the rest of the text as its
//! caption when the platform allows captions and it fits), and the text as messages of the
//! platform's size.

use crate::Limits;
use crate::split::split_text;

/// One outbound message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Text(String),
    Image {
        url: String,
        caption: Option<String>,
    },
}

/// The parts of `text` for a platform whose messages hold `limits.max_chars` characters and
/// whose photo captions hold `limits.max_caption` (`None`: no captions).
pub fn parts(text: &str, limits: Limits) -> Vec<Part> {
    let Limits {
        max_chars,
        max_caption,
    } = limits;
    let Some((url, rest)) = single_image(text) else {
        return split_text(text, max_chars)
            .into_iter()
            .map(Part::Text)
            .collect();
    };
    let rest = rest.trim();
    match max_caption {
        Some(limit) if rest.chars().count() <= limit => vec![Part::Image {
            url,
            caption: (!rest.is_empty()).then(|| rest.to_string()),
        }],
        _ => std::iter::once(Part::Image { url, caption: None })
            .chain(split_text(rest, max_chars).into_iter().map(Part::Text))
            .collect(),
    }
}

/// The URL of the only Markdown image in `text` (http or https) and the text without it.
fn single_image(text: &str) -> Option<(String, String)> {
    let (start, end, url) = image_at(text, 0)?;
    if image_at(text, end).is_some() {
        return None;
    }
    let rest = format!("{}{}", &text[..start], &text[end..]);
    Some((url, rest))
}

/// The first `![alt](url)` at or after byte `from`: its span and URL.
fn image_at(text: &str, from: usize) -> Option<(usize, usize, String)> {
    let mut at = from;
    while let Some(i) = text[at..].find("![") {
        let start = at + i;
        let after = &text[start + 2..];
        if let Some(close) = after.find("](") {
            let link = &after[close + 2..];
            if let Some(end) = link.find(')') {
                let url = link[..end].trim();
                let ok = (url.starts_with("https://") || url.starts_with("http://"))
                    && !url.contains(char::is_whitespace)
                    && !after[..close].contains('\n');
                if ok {
                    let span_end = start + 2 + close + 2 + end + 1;
                    return Some((start, span_end, url.to_string()));
                }
            }
        }
        at = start + 2;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(text: &str, max_chars: usize, max_caption: Option<usize>) -> Vec<Part> {
        super::parts(
            text,
            Limits {
                max_chars,
                max_caption,
            },
        )
    }

    #[test]
    fn plain_text_is_split_into_text_parts() {
        assert_eq!(parts("hi", 10, Some(5)), [Part::Text("hi".into())]);
    }

    #[test]
    fn one_markdown_image_becomes_a_photo_with_its_caption() {
        let text = "Here it is: ![Sunset bar](https://img.example/bar.jpg)\nOpen till late.";
        assert_eq!(
            parts(text, 4096, Some(1024)),
            [Part::Image {
                url: "https://img.example/bar.jpg".into(),
                caption: Some("Here it is: \nOpen till late.".into()),
            }]
        );
        // No captions, or a caption too long: the photo, then the text.
        let p = parts(text, 4096, None);
        assert_eq!(p.len(), 2);
        assert!(matches!(&p[0], Part::Image { caption: None, .. }));
        assert!(matches!(&p[1], Part::Text(t) if t.ends_with("Open till late.")));
        assert_eq!(parts(text, 4096, Some(5)).len(), 2);
    }

    #[test]
    fn two_images_or_a_non_http_link_stay_text() {
        let two = "![a](https://x/a.png) and ![b](https://x/b.png)";
        assert!(matches!(&parts(two, 100, Some(100))[..], [Part::Text(_)]));
        let local = "![a](file:///etc/passwd)";
        assert!(matches!(&parts(local, 100, Some(100))[..], [Part::Text(_)]));
        let broken = "![a](https://x/a.png";
        assert!(matches!(
            &parts(broken, 100, Some(100))[..],
            [Part::Text(_)]
        ));
    }
}
