//! Splitting a long reply into messages a platform accepts: on a paragraph break if one
//! falls in the second half of the allowed length, else after a sentence or a line, else on
//! a space, else (one unbroken word) at the limit. A cut never falls inside a Markdown link
//! or image, an inline code span, or the first or last line of a code block; a cut inside a
//! fenced code block closes the fence at the end of its part and opens it again, with the
//! same language, at the start of the next (docs/channels.md, "Long replies").

use crate::markdown::Layout;

/// The separators a cut may follow, best first; each tier is tried before the next.
const TIERS: [&[&str]; 3] = [
    &["\n\n"],
    &[". ", "! ", "? ", ".\n", "!\n", "?\n", "\n"],
    &[" "],
];

/// `text` as parts of at most `limit` characters each, in order, none empty.
pub fn split_text(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let text = text.trim();
    let layout = Layout::of(text);
    let mut parts = Vec::new();
    let mut pos = 0;
    // The code block the next part continues, re-opened at its start.
    let mut reopen: Option<&str> = None;
    while pos < text.len() {
        let opening = reopen.map(|line| format!("{line}\n")).unwrap_or_default();
        let room = limit.saturating_sub(opening.chars().count());
        let rest = &text[pos..];
        if rest.chars().count() <= room {
            parts.push(format!("{opening}{rest}"));
            break;
        }
        let fenced = fences_fit(&layout, limit);
        let mut cut = pos + cut_in(rest, pos, room.max(1), &layout);
        if fenced && layout.block_at(cut).is_some() {
            // Room for the closing fence.
            cut = pos + cut_in(rest, pos, room.saturating_sub(4).max(1), &layout);
        }
        let block = layout.block_at(cut).filter(|_| fenced);
        let part = text[pos..cut].trim_end();
        if !part.is_empty() {
            parts.push(match block {
                Some(b) => format!("{opening}{part}\n{}", b.fence),
                None => format!("{opening}{part}"),
            });
        }
        reopen = block.map(|b| b.open.as_str());
        pos = cut;
        // Outside code the spaces at a cut go; inside, a line keeps its indentation.
        if block.is_none() {
            pos = text.len() - text[pos..].trim_start().len();
        } else if text[pos..].starts_with('\n') {
            pos += 1;
        }
    }
    parts
}

/// Whether a fence can be closed and re-opened within `limit`: never for a limit so small
/// that the fences would crowd out the text (the longest opening line plus the closing
/// fence must take at most a quarter of it).
fn fences_fit(layout: &Layout, limit: usize) -> bool {
    layout
        .blocks
        .iter()
        .map(|b| b.open.chars().count() + b.fence.chars().count() + 2)
        .max()
        .is_some_and(|longest| longest * 4 <= limit)
}

/// Where in `rest` (which starts at byte `base` of the text) the part ends: at most
/// `window` characters in, at the best break past half of it that leaves every atomic
/// span whole, else at the window's end moved back before a span it would enter.
fn cut_in(rest: &str, base: usize, window: usize, layout: &Layout) -> usize {
    let window_end = rest
        .char_indices()
        .nth(window)
        .map_or(rest.len(), |(i, _)| i);
    let slice = &rest[..window_end];
    // Only a break past the middle: a short first part followed by many is worse than a
    // cut sentence.
    let half = slice.char_indices().nth(window / 2).map_or(0, |(i, _)| i);
    let allowed = |end: usize| end > half && layout.may_cut(base + end);
    let best = |seps: &[&str]| {
        seps.iter()
            .filter_map(|sep| {
                slice
                    .rmatch_indices(sep)
                    .map(|(i, _)| i + sep.len())
                    .find(|&end| allowed(end))
            })
            .max()
    };
    let [paragraph, sentence, word] = TIERS;
    // In code, a line's end anywhere beats a line cut in two.
    let code_line = || {
        slice
            .rmatch_indices('\n')
            .map(|(i, _)| i + 1)
            .find(|&end| layout.may_cut(base + end) && layout.block_at(base + end).is_some())
    };
    if let Some(end) = best(paragraph)
        .or_else(|| best(sentence))
        .or_else(code_line)
        .or_else(|| best(word))
    {
        return end;
    }
    // No break: the window's end, or the start of the span it would enter when something
    // comes before that span (a span longer than the whole window is cut anyway).
    match layout
        .atomic
        .iter()
        .find(|r| r.start < base + window_end && base + window_end < r.end)
    {
        Some(span) if span.start > base => span.start - base,
        _ => window_end,
    }
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

    #[test]
    fn a_link_or_inline_code_is_never_cut() {
        let link = "[the opening hours](https://example.com/venues/42?tab=hours)";
        let text = format!("{} {link} and more words here", "word ".repeat(15));
        for limit in 60..110 {
            let parts = split_text(&text, limit);
            assert!(parts.iter().any(|p| p.contains(link)), "{limit}: {parts:?}");
            assert!(parts.iter().all(|p| p.chars().count() <= limit));
        }
        let code = "`SELECT * FROM venues WHERE open`";
        let text = format!("{} {code} end", "word ".repeat(15));
        for limit in 50..100 {
            let parts = split_text(&text, limit);
            assert!(parts.iter().any(|p| p.contains(code)), "{limit}: {parts:?}");
        }
    }

    #[test]
    fn a_cut_code_block_is_closed_and_opened_again_in_its_language() {
        let lines: Vec<String> = (0..40)
            .map(|i| format!("    let x{i} = compute({i});"))
            .collect();
        let text = format!(
            "Here is the code:\n\n```rust\n{}\n```\n\nThat is all.",
            lines.join("\n")
        );
        let parts = split_text(&text, 400);
        assert!(parts.len() > 2, "{parts:?}");
        for (i, p) in parts.iter().enumerate() {
            assert!(p.chars().count() <= 400);
            let fences = p.lines().filter(|l| l.starts_with("```")).count();
            assert_eq!(fences % 2, 0, "part {i} leaves a fence open: {p}");
            if i > 0 && i < parts.len() - 1 {
                assert!(p.starts_with("```rust\n"), "part {i}: {p}");
            }
        }
        // Every line of code arrives whole, indentation included.
        for line in &lines {
            assert!(parts.iter().any(|p| p.lines().any(|l| l == line)), "{line}");
        }
    }

    /// A random reply of words, sentences, paragraphs, links, inline code and code blocks,
    /// and what must arrive whole.
    struct Sample {
        text: String,
        atoms: Vec<String>,
        code_lines: Vec<String>,
        /// Each block's content span in `text` and its opening line.
        blocks: Vec<(std::ops::Range<usize>, String)>,
    }

    fn sample(rng: &mut rand::rngs::StdRng) -> Sample {
        use rand::Rng;
        let mut s = Sample {
            text: String::new(),
            atoms: Vec::new(),
            code_lines: Vec::new(),
            blocks: Vec::new(),
        };
        let words = [
            "alpha", "beta", "gamma", "Zürich", "naïve", "🍜", "delta", "x",
        ];
        for n in 0..rng.random_range(20..200) {
            match rng.random_range(0..20) {
                0 => s.text.push_str(". "),
                1 => s.text.push_str("\n\n"),
                2 => {
                    let link = format!("[see {n} here](https://ex.io/a_(b)/{n}) ");
                    s.atoms.push(link.trim_end().to_string());
                    s.text.push_str(&link);
                }
                3 => {
                    let code = format!("`let v{n} = [1, 2];` ");
                    s.atoms.push(code.trim_end().to_string());
                    s.text.push_str(&code);
                }
                4 => {
                    let lang = ["", "rust", "python", "sh"][rng.random_range(0..4)];
                    s.text.push_str(&format!("\n```{lang}\n"));
                    let start = s.text.len();
                    for l in 0..rng.random_range(1..30) {
                        let indent = " ".repeat(rng.random_range(0..3) * 4);
                        let body = "tok ".repeat(rng.random_range(1..12));
                        let line = format!("{indent}{}{n}_{l}", body);
                        s.text.push_str(&line);
                        s.text.push('\n');
                        s.code_lines.push(line);
                    }
                    s.blocks.push((start..s.text.len(), format!("```{lang}")));
                    s.text.push_str("```\n");
                }
                _ => {
                    s.text.push_str(words[rng.random_range(0..words.len())]);
                    s.text.push(' ');
                }
            }
        }
        s
    }

    /// The original, rebuilt from `parts` with the fences the splitter added taken out;
    /// panics where a part holds anything else than the original's next text.
    fn rebuild(s: &Sample, parts: &[String]) {
        let original = s.text.trim();
        let mut pos = 0;
        for part in parts {
            let rest = &original[pos..];
            let ws = rest.len() - rest.trim_start().len();
            // An added opening: the language of the block the part continues.
            let body = match part.split_once('\n') {
                Some((first, body))
                    if first.starts_with("```") && !rest.trim_start().starts_with(first) =>
                {
                    let inside = s
                        .blocks
                        .iter()
                        .find(|(r, _)| r.start <= pos && pos <= r.end);
                    assert_eq!(
                        inside.map(|(_, open)| open.as_str()),
                        Some(first),
                        "reopened as {first}"
                    );
                    body
                }
                _ => part.as_str(),
            };
            let matched = (0..=ws).find_map(|skip| {
                let at = &original[pos + skip..];
                if at.starts_with(body) {
                    return Some(skip + body.len());
                }
                // An added closing fence.
                let cut = body.strip_suffix("\n```")?;
                at.starts_with(cut).then_some(skip + cut.len())
            });
            let Some(len) = matched else {
                panic!(
                    "part {part:?} is not the original at {pos}: {:?}",
                    &original[pos..]
                );
            };
            pos += len;
        }
        assert!(
            original[pos..].trim().is_empty(),
            "lost: {:?}",
            &original[pos..]
        );
    }

    #[test]
    fn random_replies_split_within_the_limit_without_loss_or_broken_spans() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(21);
        for round in 0..400 {
            let s = sample(&mut rng);
            let limit = [120, 200, 333, 1000, 4096][round % 5];
            let parts = split_text(&s.text, limit);
            for p in &parts {
                assert!(p.chars().count() <= limit, "{limit}: {p:?}");
                assert!(!p.trim().is_empty());
                let fences = p.lines().filter(|l| l.starts_with("```")).count();
                assert_eq!(fences % 2, 0, "a fence left open: {p:?}");
            }
            rebuild(&s, &parts);
            for atom in &s.atoms {
                assert!(
                    parts.iter().any(|p| p.contains(atom.as_str())),
                    "{atom} cut: {parts:?}"
                );
            }
            for line in &s.code_lines {
                assert!(
                    parts.iter().any(|p| p.lines().any(|l| l == line)),
                    "{line:?} cut: {parts:#?}"
                );
            }
        }
    }
}
