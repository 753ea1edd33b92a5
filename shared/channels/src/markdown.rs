//! The Markdown a reply splitter must respect (docs/channels.md, "Long replies"): fenced
//! code blocks, which a cut may split only if it closes the fence and opens it again, and
//! spans no cut may enter at all: links and images (`[text](url)`, `![alt](url)`), inline
//! code (`` `code` ``), and the first and last line of a code block together with its
//! fences (so no part holds an empty block).

use std::ops::Range;

/// A fenced code block of the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeBlock {
    /// The opening fence line as written, trimmed (```` ```rust ````): what re-opens it.
    pub open: String,
    /// The fence's backticks (three or more): what closes it.
    pub fence: String,
    /// The bytes between the opening fence line and the closing one (or the text's end).
    pub content: Range<usize>,
}

/// What a splitter needs to know of a text's Markdown.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    pub blocks: Vec<CodeBlock>,
    /// Byte ranges no cut may fall strictly inside, in order.
    pub atomic: Vec<Range<usize>>,
}

impl Layout {
    /// The layout of `text`.
    pub fn of(text: &str) -> Self {
        let blocks = code_blocks(text);
        let mut atomic = Vec::new();
        let mut outside = 0;
        for b in &blocks {
            let fence_start = line_start(text, b.content.start.saturating_sub(1));
            inline_spans(text, outside..fence_start, &mut atomic);
            if let Some(first_end) = text[b.content.clone()].find('\n') {
                atomic.push(fence_start..b.content.start + first_end + 1);
                let last_start = line_start(text, b.content.end.saturating_sub(1));
                let close_end = text[b.content.end..]
                    .find('\n')
                    .map_or(text.len(), |i| b.content.end + i);
                atomic.push(last_start.max(b.content.start)..close_end);
            } else {
                atomic.push(fence_start..b.content.end);
            }
            outside = text[b.content.end..]
                .find('\n')
                .map_or(text.len(), |i| b.content.end + i);
        }
        inline_spans(text, outside..text.len(), &mut atomic);
        atomic.sort_by_key(|r| r.start);
        Self { blocks, atomic }
    }

    /// Whether a cut at byte `at` leaves every atomic span whole.
    pub fn may_cut(&self, at: usize) -> bool {
        !self.atomic.iter().any(|r| r.start < at && at < r.end)
    }

    /// The code block whose content a cut at byte `at` falls inside.
    pub fn block_at(&self, at: usize) -> Option<&CodeBlock> {
        self.blocks
            .iter()
            .find(|b| b.content.start < at && at < b.content.end)
    }
}

/// The byte where the line holding byte `at` starts.
fn line_start(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].rfind('\n').map_or(0, |i| i + 1)
}

/// A fence line: up to three spaces, then three or more backticks; its backticks.
fn fence_of(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let ticks = rest.len() - rest.trim_start_matches('`').len();
    (indent <= 3 && ticks >= 3).then(|| &rest[..ticks])
}

fn code_blocks(text: &str) -> Vec<CodeBlock> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String, usize)> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        match (&open, fence_of(bare)) {
            (None, Some(fence)) => {
                open = Some((bare.trim().to_owned(), fence.to_owned(), at + line.len()));
            }
            (Some((_, fence, _)), Some(closing))
                if closing.len() >= fence.len() && bare.trim() == closing =>
            {
                if let Some((open_line, fence, start)) = open.take() {
                    blocks.push(CodeBlock {
                        open: open_line,
                        fence,
                        content: start..at,
                    });
                }
            }
            _ => {}
        }
        at += line.len();
    }
    if let Some((open_line, fence, start)) = open {
        blocks.push(CodeBlock {
            open: open_line,
            fence,
            content: start.min(text.len())..text.len(),
        });
    }
    blocks
}

/// Inline code spans and links within `range` of `text` (neither crosses a blank line).
fn inline_spans(text: &str, range: Range<usize>, out: &mut Vec<Range<usize>>) {
    let seg = &text[range.clone()];
    let bytes = seg.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => {
                let run = bytes[i..].iter().take_while(|&&b| b == b'`').count();
                let ticks = &seg[i..i + run];
                let after = i + run;
                let end = find_run(&seg[after..], ticks).map(|j| after + j + run);
                match end.filter(|&e| !seg[i..e].contains("\n\n")) {
                    Some(e) => {
                        out.push(range.start + i..range.start + e);
                        i = e;
                    }
                    None => i = after,
                }
            }
            b'[' => match link_end(&seg[i..]) {
                Some(len) => {
                    let start = if i > 0 && bytes[i - 1] == b'!' {
                        i - 1
                    } else {
                        i
                    };
                    out.push(range.start + start..range.start + i + len);
                    i += len;
                }
                None => i += 1,
            },
            _ => i += 1,
        }
    }
}

/// Where exactly `ticks` backticks (not more) next occur in `s`.
fn find_run(s: &str, ticks: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(j) = s[from..].find(ticks) {
        let at = from + j;
        let end = at + ticks.len();
        let longer = b.get(end) == Some(&b'`');
        if !longer {
            return Some(at);
        }
        from = end + b[end..].iter().take_while(|&&c| c == b'`').count();
    }
    None
}

/// The length of the link `[text](url)` that `s` starts with: text without a blank line,
/// URL on one line, parentheses in it balanced.
fn link_end(s: &str) -> Option<usize> {
    let close = s.find("](")?;
    if s[..close].contains("\n\n") || s[1..close].contains('[') {
        return None;
    }
    let url_start = close + 2;
    let mut depth = 0usize;
    for (j, c) in s[url_start..].char_indices() {
        match c {
            '\n' => return None,
            '(' => depth += 1,
            ')' if depth == 0 => return Some(url_start + j + 1),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<&str> {
        Layout::of(text)
            .atomic
            .iter()
            .map(|r| &text[r.clone()])
            .collect()
    }

    #[test]
    fn links_images_and_inline_code_are_atomic() {
        let text = "see [the docs](https://x.io/a_(b)) and ![cat](https://x/c.png), run `ls -l` or ``a ` b``.";
        assert_eq!(
            spans(text),
            [
                "[the docs](https://x.io/a_(b))",
                "![cat](https://x/c.png)",
                "`ls -l`",
                "``a ` b``"
            ]
        );
        // Unclosed or broken: nothing to keep whole.
        assert!(spans("a [b](c and `d").is_empty());
        assert!(spans("[a\n\nb](c)").is_empty());
    }

    #[test]
    fn code_blocks_are_found_with_their_language_and_edges() {
        let text = "intro\n```rust\nfn a() {}\nfn b() {}\n```\nafter `x`\n````\nlast\n";
        let l = Layout::of(text);
        assert_eq!(l.blocks.len(), 2);
        assert_eq!(l.blocks[0].open, "```rust");
        assert_eq!(l.blocks[0].fence, "```");
        assert_eq!(&text[l.blocks[0].content.clone()], "fn a() {}\nfn b() {}\n");
        // The second is never closed: it runs to the end.
        assert_eq!(l.blocks[1].fence, "````");
        assert_eq!(&text[l.blocks[1].content.clone()], "last\n");
        assert_eq!(
            spans(text),
            [
                "```rust\nfn a() {}\n",
                "fn b() {}\n```",
                "`x`",
                "````\nlast\n",
                "last\n"
            ]
        );
        // Between the two lines of the first block a cut is allowed, and is in the block.
        let between = text.find("fn b").unwrap();
        assert!(l.may_cut(between));
        assert_eq!(l.block_at(between).unwrap().open, "```rust");
        assert!(!l.may_cut(text.find("fn a").unwrap()));
        // Backticks inside a block are code, not inline spans.
        assert!(
            spans("```\na `b\n```")
                .iter()
                .all(|s| !s.starts_with('`') || s.starts_with("```"))
        );
    }
}
