//! Splitting a long reply into messages a platform accepts: on a paragraph break if one
//! falls in the second half of the allowed length, else after a sentence, else on a space,
//! else (one unbroken word) at the limit.

/// `text` as parts of at most `limit` characters each, in order, none empty.
pub fn split_text(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while rest.chars().count() > limit {
        let window_end = rest
            .char_indices()
            .nth(limit)
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let window = &rest[..window_end];
        // Only a break past the middle: a short first part followed by many is worse than a
        // cut sentence.
        let half = window
            .char_indices()
            .nth(limit / 2)
            .map(|(i, _)| i)
            .unwrap_or(0);
        let cut = last_after(window, half, &["\n\n"])
            .or_else(|| last_after(window, half, &[". ", "! ", "? ", ".\n", "!\n", "?\n", "\n"]))
            .or_else(|| last_after(window, half, &[" "]))
            .unwrap_or(window_end);
        let (part, tail) = rest.split_at(cut);
        let part = part.trim_end();
        if !part.is_empty() {
            parts.push(part.to_string());
        }
        rest = tail.trim_start();
    }
    if !rest.is_empty() {
        parts.push(rest.to_string());
    }
    parts
}

/// The byte index just after the last of `seps` in `window` that ends past `from`, keeping
/// the separator's punctuation with the part before it.
fn last_after(window: &str, from: usize, seps: &[&str]) -> Option<usize> {
    seps.iter()
        .filter_map(|sep| {
            window.rfind(sep).map(|i| {
                // Keep ". " → "." on the left; whitespace is trimmed anyway.
                i + sep.len()
            })
        })
        .filter(|&end| end > from)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_are_one_part() {
        assert_eq!(split_text("hello", 4096), ["hello"]);
        assert!(split_text("   ", 10).is_empty());
    }

    #[test]
    fn paragraphs_are_preferred_then_sentences_then_words() {
        let para = format!("{}\n\n{}", "a".repeat(70), "b".repeat(50));
        assert_eq!(split_text(&para, 100), ["a".repeat(70), "b".repeat(50)]);

        let sentences = format!("{}. {}. {}", "a".repeat(40), "b".repeat(40), "c".repeat(40));
        let parts = split_text(&sentences, 100);
        assert_eq!(parts[0], format!("{}. {}.", "a".repeat(40), "b".repeat(40)));
        assert_eq!(parts[1], "c".repeat(40));

        let words = "word ".repeat(50);
        let parts = split_text(&words, 32);
        assert!(
            parts
                .iter()
                .all(|p| p.chars().count() <= 32 && !p.ends_with(' '))
        );
        assert!(parts.iter().all(|p| p.split(' ').all(|w| w == "word")));

        let blob = "x".repeat(250);
        assert_eq!(split_text(&blob, 100).len(), 3);
    }

    #[test]
    fn every_part_fits_and_nothing_is_lost() {
        let text =
            "Ünïcödé sentence one. ".repeat(600) + "\n\nSecond paragraph! " + &"ok ".repeat(2000);
        let parts = split_text(&text, 4096);
        assert!(parts.len() > 3);
        assert!(parts.iter().all(|p| p.chars().count() <= 4096));
        let joined: String = parts.concat();
        let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        assert_eq!(squash(&joined), squash(&text));
    }
}
