//! Keyword classifiers for what a message is about (docs/models-and-budgets.md, steps 5 and 7 of the routing pipeline): the text
//! intent that decides which toolsets the model is offered, and the image intent that
//! picks the vision pipeline. They run on every message, so they are plain word matching
//! over one lower-cased copy of the text: no allocation per rule, no regex.
//!
//! Text is split into words: letters and digits, lower-cased, apostrophes dropped
//! ("what's" → "whats"), everything else a separator. A rule is a phrase of one or more
//! words matched on consecutive words; a rule word ending in `*` matches any word it
//! prefixes ("reserv*" matches "reserve", "reservation", "reserved").
//!
//! Keywords are kept precise on purpose: [`Intent::General`] is offered every toolset, so
//! a message that falls through to it loses nothing, while a wrong specific intent hides
//! the tools the reply needs. Hence "book a" / "book it" rather than "book" (a novel is a
//! book), and "a run" / "running" rather than "run" ("run a search").

use hermes_types::intent::{ImageIntent, Intent};
use hermes_types::model::{ChatMessage, Role};

use crate::trivial::is_trivial;

/// A phrase: consecutive words, each exact or (ending in `*`) a prefix.
type Phrase = &'static [&'static str];

const BOOKING: &[Phrase] = &[
    &["book", "a"],
    &["book", "an"],
    &["book", "me"],
    &["book", "us"],
    &["book", "it"],
    &["book", "the"],
    &["book", "for"],
    &["book", "at"],
    &["book", "table"],
    &["to", "book"],
    &["i", "book"],
    &["we", "book"],
    &["please", "book"],
    &["booking"],
    &["bookings"],
    &["booked"],
    &["reserv*"],
    &["table", "for"],
    &["cancel", "my"],
    &["cancel", "the"],
    &["reschedul*"],
    &["rsvp"],
];

const VENUE: &[Phrase] = &[
    &["bar"],
    &["bars"],
    &["pub"],
    &["pubs"],
    &["restaurant*"],
    &["cafe"],
    &["cafes"],
    &["café"],
    &["cafés"],
    &["coffee", "shop*"],
    &["club"],
    &["clubs"],
    &["nightclub*"],
    &["beach", "club*"],
    &["venue*"],
    &["warung*"],
    &["bistro*"],
    &["rooftop*"],
    &["lounge*"],
    &["place", "to"],
    &["places", "to"],
    &["spot"],
    &["spots"],
    &["where", "can", "i"],
    &["where", "can", "we"],
    &["where", "to"],
    &["where", "should"],
    &["near", "me"],
    &["nearby"],
    &["sunset"],
    &["brunch"],
    &["happy", "hour"],
    &["live", "music"],
    &["opening", "hours"],
    &["open", "now"],
];

const FITNESS: &[Phrase] = &[
    &["workout*"],
    &["work", "out"],
    &["working", "out"],
    &["gym"],
    &["gyms"],
    &["a", "run"],
    &["my", "run"],
    &["morning", "run"],
    &["running"],
    &["jog*"],
    &["training"],
    &["exercis*"],
    &["steps"],
    &["step", "count"],
    &["weight", "loss"],
    &["lose", "weight"],
    &["losing", "weight"],
    &["fat", "loss"],
    &["muscle*"],
    &["cardio"],
    &["hiit"],
    &["yoga"],
    &["pilates"],
    &["squat*"],
    &["pushup*"],
    &["push", "ups"],
    &["deadlift*"],
    &["marathon"],
    &["5k"],
    &["10k"],
    &["stretch*"],
    &["reps"],
    &["fitness"],
];

const NUTRITION: &[Phrase] = &[
    &["calori*"],
    &["kcal"],
    &["protein*"],
    &["carb"],
    &["carbs"],
    &["fiber"],
    &["fibre"],
    &["sugar"],
    &["diet*"],
    &["macro"],
    &["macros"],
    &["meal*"],
    &["vegan"],
    &["vegetarian"],
    &["keto"],
    &["paleo"],
    &["gluten*"],
    &["nutrition*"],
    &["nutrient*"],
    &["snack*"],
    &["breakfast"],
    &["recipe*"],
    &["fasting"],
    &["intake"],
    &["what", "should", "i", "eat"],
];

const SEARCH: &[Phrase] = &[
    &["search*"],
    &["look", "up"],
    &["lookup"],
    &["google*"],
    &["news"],
    &["headline*"],
    &["latest"],
    &["website*"],
    &["web"],
    &["online"],
    &["wikipedia"],
    &["weather"],
    &["forecast"],
    &["exchange", "rate"],
    &["stock", "price"],
];

const TIME: &[Phrase] = &[
    &["what", "time"],
    &["time", "in"],
    &["time", "is", "it"],
    &["current", "time"],
    &["local", "time"],
    &["date", "today"],
    &["todays", "date"],
    &["the", "date"],
    &["what", "day"],
    &["what", "date"],
    &["day", "is", "it"],
    &["timezone*"],
    &["time", "zone*"],
];

/// The text rules in precedence order; the first intent with a matching phrase wins.
///
/// - Booking first: a booking names the place it is at ("book a table at a bar"), and its
///   toolsets include the venue tools.
/// - Venue next: a place outranks what is done there ("vegan restaurant", "gym near me",
///   "google the best rooftop bar"), and the venue toolsets include search.
/// - Fitness before Nutrition: mixed messages ("protein after my workout") are about the
///   training plan, and fitness is offered the nutrition tools too.
/// - Search after the domains: "search" / "latest" qualify a domain request more often
///   than they make a web request.
/// - Time last: "what time" / "what day" mostly ask about something else ("what time does
///   the club open"), and its toolset is the narrowest.
const TEXT_RULES: &[(Intent, &[Phrase])] = &[
    (Intent::Booking, BOOKING),
    (Intent::Venue, VENUE),
    (Intent::Fitness, FITNESS),
    (Intent::Nutrition, NUTRITION),
    (Intent::Search, SEARCH),
    (Intent::Time, TIME),
];

/// Substrings (ASCII, any case) that make a message a web request.
const URL_MARKERS: &[&str] = &["http://", "https://", "www."];

/// Unambiguous nutrition words in an image caption.
const CALORIE_STRONG: &[Phrase] = &[
    &["calori*"],
    &["kcal"],
    &["cal"],
    &["cals"],
    &["macro"],
    &["macros"],
    &["protein*"],
    &["carb"],
    &["carbs"],
    &["nutrition*"],
    &["nutrient*"],
    &["how", "healthy"],
    &["is", "this", "healthy"],
];

/// Shopping words in an image caption.
const DUPE: &[Phrase] = &[
    &["dupe"],
    &["dupes"],
    &["similar"],
    &["cheaper"],
    &["cheap"],
    &["affordable"],
    &["where", "to", "buy"],
    &["where", "to", "get"],
    &["where", "can", "i", "buy"],
    &["where", "can", "i", "get"],
    &["where", "do", "i", "get"],
    &["find", "this"],
    &["find", "me", "this"],
    &["find", "it"],
    &["same", "look"],
    &["this", "look"],
    &["outfit*"],
    &["lookalike*"],
    &["look", "alike"],
    &["look", "for", "less"],
    &["knockoff*"],
    &["knock", "off"],
    &["alternative*"],
    &["buy", "this"],
    &["buy", "it"],
    &["shop", "this"],
    &["who", "makes"],
    &["what", "brand"],
];

/// Food words in an image caption: a meal, but maybe not a calorie question.
const CALORIE_WEAK: &[Phrase] = &[
    &["food"],
    &["meal*"],
    &["dish"],
    &["plate"],
    &["portion*"],
    &["lunch"],
    &["dinner"],
    &["breakfast"],
    &["snack*"],
    &["eat"],
    &["eating"],
    &["ate"],
];

/// The intent of a text message: [`Intent::Trivial`] when [`is_trivial`], otherwise the
/// first rule (booking, venue, fitness, nutrition, search, time) with a
/// matching phrase, otherwise [`Intent::General`].
pub fn classify(text: &str) -> Intent {
    if is_trivial(text) {
        return Intent::Trivial;
    }
    let lower = normalize(text);
    let words: Vec<&str> = lower.split_whitespace().collect();
    for (intent, phrases) in TEXT_RULES {
        if any_phrase(&words, phrases) {
            return *intent;
        }
        if *intent == Intent::Search && URL_MARKERS.iter().any(|m| contains_ascii_ci(text, m)) {
            return Intent::Search;
        }
    }
    Intent::General
}

/// The intent of an image from its caption. Explicit nutrition words ("calories",
/// "macros", "how many cal") win; then shopping words ("dupe", "cheaper", "where can I
/// get", "outfit") make it a [`ImageIntent::DupeSearch`]; then plain food words ("meal",
/// "lunch") make it a [`ImageIntent::CalorieScan`]. The shopping check sits between the
/// two food tiers because "where can I get this dish" is a shopping question about food,
/// while "calories" leaves no doubt. No caption, or none of these: [`ImageIntent::General`].
pub fn classify_image(caption: Option<&str>) -> ImageIntent {
    let Some(caption) = caption else {
        return ImageIntent::General;
    };
    let lower = normalize(caption);
    let words: Vec<&str> = lower.split_whitespace().collect();
    if any_phrase(&words, CALORIE_STRONG) {
        ImageIntent::CalorieScan
    } else if any_phrase(&words, DUPE) {
        ImageIntent::DupeSearch
    } else if any_phrase(&words, CALORIE_WEAK) {
        ImageIntent::CalorieScan
    } else {
        ImageIntent::General
    }
}

/// Lower-cased words separated by spaces; apostrophes dropped, other non-alphanumerics
/// turned into spaces.
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\'' | '\u{2019}' | '\u{02BC}') {
            continue;
        }
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else {
            out.push(' ');
        }
    }
    out
}

/// Whether `haystack` contains the ASCII `needle`, ignoring ASCII case.
fn contains_ascii_ci(haystack: &str, needle: &str) -> bool {
    haystack
        .as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

fn any_phrase(words: &[&str], phrases: &[Phrase]) -> bool {
    (0..words.len()).any(|i| {
        phrases.iter().any(|phrase| {
            words.len() - i >= phrase.len()
                && phrase
                    .iter()
                    .zip(&words[i..])
                    .all(|(rule, word)| word_matches(rule, word))
        })
    })
}

fn word_matches(rule: &str, word: &str) -> bool {
    match rule.strip_suffix('*') {
        Some(prefix) => word.starts_with(prefix),
        None => word == rule,
    }
}

/// The intent of a message in its conversation: a trivial reply ("yes", "ok 👍") to an
/// earlier request keeps that request's intent, so confirming "shall I book it?" still
/// reaches the booking tools. `history` is the session's turns, oldest first.
pub fn classify_in_context(text: &str, history: &[ChatMessage]) -> Intent {
    let own = classify(text);
    if own != Intent::Trivial {
        return own;
    }
    history
        .iter()
        .rev()
        .filter(|m| m.role == Role::User)
        .find_map(|m| m.content.as_deref())
        .map(classify)
        .unwrap_or(Intent::Trivial)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(intent: Intent, messages: &[&str]) {
        for m in messages {
            assert_eq!(classify(m), intent, "{m:?}");
        }
    }

    #[test]
    fn trivial() {
        expect(
            Intent::Trivial,
            &["hi", "Thanks!!", "ok 👍", "good night", "", "❤️"],
        );
    }

    #[test]
    fn booking() {
        expect(
            Intent::Booking,
            &[
                "book a table for 4 at 8pm",
                "Can you book a table at a sunset bar in Canggu?",
                "I need a reservation for Friday",
                "cancel my booking at La Brisa",
                "table for two tonight please",
                "reschedule tomorrow's dinner to 9",
                "I'd like to book the rooftop for my birthday",
            ],
        );
    }

    #[test]
    fn venue() {
        expect(
            Intent::Venue,
            &[
                "find me a sunset bar in Canggu",
                "any good restaurants in Ubud?",
                "best beach club in Seminyak",
                "where can I get good coffee around here",
                "a nice place to watch the sunset",
                "brunch spots open now",
                "vegan cafe near me",
                "what time does the club close tonight",
                "find a gym near me",
            ],
        );
    }

    #[test]
    fn fitness() {
        expect(
            Intent::Fitness,
            &[
                "give me a 30 minute workout",
                "how many steps did I do today",
                "I want to lose weight before summer",
                "going for a run tomorrow morning, any tips?",
                "leg day at the gym",
                "how much protein after my workout",
            ],
        );
    }

    #[test]
    fn nutrition() {
        expect(
            Intent::Nutrition,
            &[
                "how many calories in this",
                "how many calories in a nasi goreng",
                "is 120g of protein too much for my diet",
                "plan my meals for the week",
                "vegan lunch ideas",
                "what's my kcal target",
            ],
        );
    }

    #[test]
    fn search() {
        expect(
            Intent::Search,
            &[
                "search for flights to Lombok",
                "look up the latest Bitcoin price",
                "any news about the volcano?",
                "what's on https://example.com/page",
                "check www.example.org",
                "HTTPS://EXAMPLE.COM",
                "what's the weather tomorrow",
            ],
        );
    }

    #[test]
    fn time() {
        expect(
            Intent::Time,
            &[
                "what time is it in New York?",
                "What's the date today",
                "what day is it",
                "time in Tokyo",
                "which timezone is Bali in",
            ],
        );
    }

    #[test]
    fn general() {
        expect(
            Intent::General,
            &[
                "tell me a joke",
                "can you recommend a good book",
                "run a quick check on my account",
                "what do you think about remote work",
                "translate this to Indonesian",
                "barbecue tips",
            ],
        );
    }

    #[test]
    fn words_not_substrings() {
        // "bar" in "barbecue", "run" in "brunette", "book" as a noun.
        expect(Intent::General, &["my brunette friend loves barbecue"]);
        expect(Intent::General, &["this book is great, what do you think"]);
    }

    #[test]
    fn image_calorie_scan() {
        for caption in [
            "how many calories?",
            "How many cal is this",
            "macros pls",
            "what's in this meal",
            "my lunch today",
            "is this healthy",
            "calories in this dish, and where can I get it cheaper?",
        ] {
            assert_eq!(
                classify_image(Some(caption)),
                ImageIntent::CalorieScan,
                "{caption:?}"
            );
        }
    }

    #[test]
    fn image_dupe_search() {
        for caption in [
            "find me a dupe",
            "anything similar but cheaper?",
            "where can I get this?",
            "where to buy this bag",
            "love this outfit",
            "find this",
            "same look for less",
            "where can I get this dish",
        ] {
            assert_eq!(
                classify_image(Some(caption)),
                ImageIntent::DupeSearch,
                "{caption:?}"
            );
        }
    }

    #[test]
    fn image_general() {
        assert_eq!(classify_image(None), ImageIntent::General);
        assert_eq!(classify_image(Some("")), ImageIntent::General);
        assert_eq!(classify_image(Some("   ")), ImageIntent::General);
        assert_eq!(
            classify_image(Some("look at this view!")),
            ImageIntent::General
        );
        assert_eq!(
            classify_image(Some("call me when you see this")),
            ImageIntent::General
        );
    }

    #[test]
    fn prefix_rules() {
        assert!(word_matches("reserv*", "reservation"));
        assert!(word_matches("reserv*", "reserve"));
        assert!(!word_matches("reserv*", "reser"));
        assert!(word_matches("bar", "bar"));
        assert!(!word_matches("bar", "bars2"));
    }

    #[test]
    fn a_trivial_reply_keeps_the_intent_of_the_request_it_answers() {
        let history = vec![
            ChatMessage::text(Role::User, "book a table for 4 at 8pm"),
            ChatMessage::text(Role::Assistant, "Shall I book it?"),
        ];
        assert_eq!(classify_in_context("yes", &history), Intent::Booking);
        assert_eq!(classify_in_context("thanks!", &[]), Intent::Trivial);
        let greeted = vec![ChatMessage::text(Role::User, "hi")];
        assert_eq!(classify_in_context("ok", &greeted), Intent::Trivial);
        assert_eq!(
            classify_in_context("how many calories in a croissant", &history),
            Intent::Nutrition
        );
    }
}
