//! Recognizes trivial messages (docs/models-and-budgets.md, soul loading and tool gating): greetings,
//! acknowledgements, thanks, goodbyes, a lone emoji, empty text. A trivial message skips
//! semantic recall and is offered no tools, which is where the token savings come from.
//!
//! The rule, in order:
//! 1. Letters are folded to lower case; apostrophes are dropped ("what's" → "whats");
//!    emoji (see [`is_emoji`]), punctuation and symbols separate words and count for
//!    nothing. No words left → trivial ("", "👍🏽", "!!!", "?").
//! 2. More than [`MAX_WORDS`] words → not trivial, without looking further.
//! 3. Otherwise the words must be covered entirely by trivial phrases ("thank you", "good
//!    morning", "ok") and a few fillers ("there", "so much", "guys"), with at least one
//!    phrase. Letters repeated for emphasis do not matter ("heyyy", "okkk", "thxx"), and
//!    laughter of any length is a phrase ("hahaha", "lolol", "wkwkwk").
//!
//! A false "trivial" costs the reply its tools and its recall, a false "not trivial" costs
//! a few hundred tokens, so anything with a word outside the lists is not trivial: a
//! digit ("4", "8pm"), a name, a request ("hi, find me a bar in Canggu").

/// More words than this and a message is never trivial.
pub const MAX_WORDS: usize = 8;

/// Trivial phrases: greetings, acknowledgements, thanks, goodbyes (some in the languages
/// the fleet's users write in). Each is a sequence of lower-case words.
const PHRASES: &[&[&str]] = &[
    // Greetings.
    &["hi"],
    &["hello"],
    &["hey"],
    &["heya"],
    &["hiya"],
    &["yo"],
    &["sup"],
    &["whats", "up"],
    &["wassup"],
    &["howdy"],
    &["gm"],
    &["good", "morning"],
    &["good", "afternoon"],
    &["good", "evening"],
    &["morning"],
    &["evening"],
    &["hola"],
    &["halo"],
    &["hallo"],
    &["bonjour"],
    &["salut"],
    &["ciao"],
    &["aloha"],
    &["namaste"],
    &["buenos", "dias"],
    &["selamat", "pagi"],
    // Acknowledgements.
    &["ok"],
    &["okay"],
    &["okey"],
    &["k"],
    &["sure"],
    &["cool"],
    &["nice"],
    &["great"],
    &["good"],
    &["fine"],
    &["perfect"],
    &["awesome"],
    &["amazing"],
    &["alright"],
    &["all", "right"],
    &["yes"],
    &["yeah"],
    &["yea"],
    &["ya"],
    &["yep"],
    &["yup"],
    &["no"],
    &["nope"],
    &["nah"],
    &["got", "it"],
    &["noted"],
    &["understood"],
    &["sounds", "good"],
    &["np"],
    &["no", "problem"],
    &["no", "worries"],
    &["lol"],
    &["lmao"],
    &["lmfao"],
    &["rofl"],
    &["xd"],
    &["haha"],
    &["hehe"],
    &["oh"],
    &["ah"],
    &["hmm"],
    &["wow"],
    // Thanks.
    &["thanks"],
    &["thank", "you"],
    &["thank", "u"],
    &["thanx"],
    &["thx"],
    &["tx"],
    &["ty"],
    &["tysm"],
    &["cheers"],
    &["much", "appreciated"],
    &["appreciate", "it"],
    &["merci"],
    &["gracias"],
    &["grazie"],
    &["danke"],
    &["obrigado"],
    &["obrigada"],
    &["terima", "kasih"],
    &["makasih"],
    // Goodbyes.
    &["bye"],
    &["byebye"],
    &["goodbye"],
    &["see", "you"],
    &["see", "ya"],
    &["see", "you", "later"],
    &["cya"],
    &["later"],
    &["ttyl"],
    &["take", "care"],
    &["gn"],
    &["good", "night"],
    &["night"],
    &["nite"],
    &["adios"],
];

/// Words that may pad a trivial phrase ("hi there", "thanks so much") but are not one.
const FILLERS: &[&str] = &[
    "there", "all", "everyone", "guys", "man", "bro", "mate", "dude", "again", "so", "very",
    "much", "a", "lot", "too", "and", "you",
];

/// Whether `text` is a trivial message: see the module documentation for the rule.
pub fn is_trivial(text: &str) -> bool {
    let Some(normalized) = normalize(text) else {
        return false;
    };
    let words: Vec<&str> = normalized.split(' ').filter(|w| !w.is_empty()).collect();
    words.is_empty() || covered(&words)
}

/// Whether `c` is part of an emoji: the common emoji blocks plus the characters that
/// build emoji sequences (variation selectors, ZWJ, skin tones, tags, keycap).
pub fn is_emoji(c: char) -> bool {
    matches!(
        c,
        // Mahjong, cards, enclosed alphanumerics (flags), pictographs, emoticons,
        // transport, alchemical, geometric extended, supplemental symbols, chess,
        // symbols and pictographs extended-A; skin tones U+1F3FB–U+1F3FF are in here.
        '\u{1F000}'..='\u{1FAFF}'
            // Miscellaneous symbols and dingbats (☀ ❤ ✅ ✨).
            | '\u{2600}'..='\u{27BF}'
            // Miscellaneous symbols and arrows (⭐ ⬆).
            | '\u{2B00}'..='\u{2BFF}'
            // Arrows, miscellaneous technical (⌚ ⏰ ⏳), geometric shapes (▶ ◼).
            | '\u{2190}'..='\u{21FF}'
            | '\u{2300}'..='\u{23FF}'
            | '\u{25A0}'..='\u{25FF}'
            | '\u{2934}'
            | '\u{2935}'
            // ™ ℹ Ⓜ ‼ ⁉: emoji that are letter-like or punctuation-like.
            | '\u{2122}'
            | '\u{2139}'
            | '\u{24C2}'
            | '\u{203C}'
            | '\u{2049}'
            // Text and emoji variation selectors, zero-width joiner, keycap.
            | '\u{FE0E}'
            | '\u{FE0F}'
            | '\u{200D}'
            | '\u{20E3}'
            // Tag characters (subdivision flags).
            | '\u{E0020}'..='\u{E007F}'
            | '\u{3030}'
            | '\u{303D}'
            | '\u{3297}'
            | '\u{3299}'
            | '\u{00A9}'
            | '\u{00AE}'
    )
}

/// Lower-case words separated by spaces, or `None` past [`MAX_WORDS`] words (so a long
/// message is rejected without building all of it).
fn normalize(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len().min(128));
    let mut words = 0;
    let mut in_word = false;
    for c in text.chars() {
        if matches!(c, '\'' | '\u{2019}' | '\u{02BC}') {
            continue;
        }
        if is_emoji(c) || !c.is_alphanumeric() {
            if in_word {
                out.push(' ');
                in_word = false;
            }
            continue;
        }
        if !in_word {
            words += 1;
            if words > MAX_WORDS {
                return None;
            }
            in_word = true;
        }
        out.extend(c.to_lowercase());
    }
    Some(out)
}

/// Whether `words` is a sequence of phrases and fillers with at least one phrase.
fn covered(words: &[&str]) -> bool {
    // reach[i][p]: the first i words can be covered, p = a phrase was used.
    let mut reach = [[false; 2]; MAX_WORDS + 1];
    reach[0][0] = true;
    for i in 0..words.len() {
        for seen in 0..2 {
            if !reach[i][seen] {
                continue;
            }
            if FILLERS.iter().any(|f| same_word(words[i], f)) {
                reach[i + 1][seen] = true;
            }
            if is_laughter(words[i]) {
                reach[i + 1][1] = true;
            }
            for phrase in PHRASES {
                let end = i + phrase.len();
                if end <= words.len()
                    && words[i..end]
                        .iter()
                        .zip(phrase.iter())
                        .all(|(w, p)| same_word(w, p))
                {
                    reach[end][1] = true;
                }
            }
        }
    }
    reach[words.len()][1]
}

/// Equal once runs of a repeated letter count as one ("heyyy" = "hey", "okk" = "ok").
fn same_word(a: &str, b: &str) -> bool {
    let mut a = squeezed(a);
    let mut b = squeezed(b);
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x == y => {}
            _ => return false,
        }
    }
}

fn squeezed(s: &str) -> impl Iterator<Item = char> + '_ {
    let mut prev = None;
    s.chars().filter(move |&c| prev.replace(c) != Some(c))
}

/// Laughter of any length: "haha", "hahahah", "ahah", "hehe", "lolol", "jaja", "wkwk".
fn is_laughter(word: &str) -> bool {
    const PAIRS: [[char; 2]; 5] = [['h', 'a'], ['h', 'e'], ['l', 'o'], ['j', 'a'], ['w', 'k']];
    word.chars().count() >= 3
        && PAIRS.iter().any(|pair| {
            word.chars().all(|c| pair.contains(&c)) && pair.iter().all(|p| word.contains(*p))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_trivial(cases: &[&str]) {
        for case in cases {
            assert!(is_trivial(case), "should be trivial: {case:?}");
        }
    }

    #[test]
    fn greetings() {
        all_trivial(&[
            "hi",
            "Hello",
            "HEY",
            "yo",
            "good morning",
            "Good Morning!",
            "gm",
            "hola",
            "hi there",
            "heyyy",
            "what's up?",
            "hey guys 👋",
            "Selamat pagi",
        ]);
    }

    #[test]
    fn acknowledgements() {
        all_trivial(&[
            "ok",
            "okay",
            "k",
            "kk",
            "okkk",
            "sure",
            "cool",
            "nice",
            "great",
            "yes",
            "no",
            "yep",
            "nope",
            "lol",
            "haha",
            "hahahaha",
            "LOL",
            "wkwkwk",
            "ok 👍",
            "Cool!!",
            "got it",
            "sounds good",
            "ok cool",
        ]);
    }

    #[test]
    fn thanks() {
        all_trivial(&[
            "thanks",
            "Thanks!!",
            "thank you",
            "Thank you so much 🙏",
            "thanks a lot",
            "thx",
            "ty",
            "cheers",
            "ok thanks",
            "terima kasih",
            "thank you very much!",
        ]);
    }

    #[test]
    fn goodbyes() {
        all_trivial(&[
            "bye",
            "bye bye",
            "see you",
            "see you later!",
            "gn",
            "good night",
            "Good night 😴",
            "thanks, bye",
        ]);
    }

    #[test]
    fn emoji_and_punctuation_only() {
        all_trivial(&[
            "",
            "   ",
            "\n",
            "👍",
            "👍🏽",
            "❤️",
            "🙏🙏🙏",
            "!!!",
            "?",
            "...",
            "😂😂",
            "👨‍👩‍👧",
            "🇮🇩",
            "✨",
            "⭐",
            "🏴\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}",
        ]);
    }

    #[test]
    fn real_content_is_not_trivial() {
        for case in [
            "hi, find me a bar in Canggu",
            "ok book it for 8pm",
            "thanks, can you also check the weather",
            "yes please book it",
            "good morning, what's my calorie target",
            "4",
            "8pm",
            "1️⃣",
            "there",
            "so much",
            "hello how are you doing today my friend ok",
            "find me a sunset bar",
            "Canggu",
            "no onions",
            "ok 2 people",
        ] {
            assert!(!is_trivial(case), "should not be trivial: {case:?}");
        }
    }

    #[test]
    fn long_messages_are_cut_short() {
        assert!(!is_trivial(&"hi ".repeat(MAX_WORDS + 1)));
        assert!(is_trivial(&"hi ".repeat(MAX_WORDS)));
    }

    #[test]
    fn emoji_ranges() {
        for c in [
            '😀',
            '👍',
            '🏽',
            '❤',
            '☀',
            '✅',
            '⭐',
            '⬆',
            '\u{FE0F}',
            '\u{200D}',
            '\u{20E3}',
            '\u{E0067}',
            '〰',
            '〽',
            '©',
            '®',
            '🇮',
            '🀄',
            '🫠',
            '⌚',
            'ℹ',
        ] {
            assert!(is_emoji(c), "{c:?} U+{:04X}", c as u32);
        }
        for c in ['a', 'Z', '1', 'é', '海', ' ', '!', '€'] {
            assert!(!is_emoji(c), "{c:?}");
        }
    }

    #[test]
    fn letter_repetition_is_tolerated_both_ways() {
        assert!(same_word("heyyy", "hey"));
        assert!(same_word("okkk", "ok"));
        assert!(same_word("kk", "k"));
        assert!(!same_word("hey", "he"));
        assert!(!same_word("book", "bok2"));
    }
}
