//! Tests of `dreaming`, beside it so the module itself stays readable.

use super::*;

fn turn(inbound: bool, text: &str) -> Turn {
    Turn {
        inbound,
        text: text.into(),
    }
}

#[test]
fn a_structured_answer_is_one_insight_and_at_most_three_gaps() {
    let answer = r#"{"insight":"Plans dinners for  four\non Fridays","knowledge_gaps":
        ["usual party size", "", "Usual party size", "dietary restrictions", "home city", "budget"]}"#;
    assert_eq!(
        parse_dream(answer),
        Outcome::Written {
            insight: "Plans dinners for four on Fridays".into(),
            gaps: vec![
                "usual party size".into(),
                "dietary restrictions".into(),
                "home city".into()
            ],
        }
    );
}

#[test]
fn prose_and_fences_around_the_json_are_tolerated() {
    let answer = "Here you go {sort of}:\n```json\n{\"insight\": \"Trains for a 10k\"}\n```";
    assert_eq!(
        parse_dream(answer),
        Outcome::Written {
            insight: "Trains for a 10k".into(),
            gaps: vec![],
        }
    );
}

#[test]
fn no_insight_is_an_empty_dream() {
    assert_eq!(parse_dream(""), Outcome::Empty);
    assert_eq!(parse_dream("echo: hello"), Outcome::Empty);
    assert_eq!(
        parse_dream(r#"{"insight":"  ","knowledge_gaps":["x"]}"#),
        Outcome::Empty
    );
    assert_eq!(parse_dream(r#"{"insight":42}"#), Outcome::Empty);
}

#[test]
fn a_long_insight_is_cut() {
    let answer = format!(r#"{{"insight":"{}"}}"#, "i".repeat(900));
    let Outcome::Written { insight, .. } = parse_dream(&answer) else {
        panic!("an insight");
    };
    assert_eq!(insight.chars().count(), MAX_INSIGHT_CHARS);
}

#[test]
fn the_week_keeps_the_newest_messages_that_fit() {
    let turns = vec![
        turn(true, "oldest message"),
        turn(false, "an answer"),
        turn(true, "newest\nmessage"),
    ];
    let memory = vec![("diet".to_string(), "vegan".to_string())];
    let all = week_message(&turns, &memory, 10_000);
    assert!(all.contains("- diet: vegan"), "{all}");
    let oldest = all.find("User: oldest message").unwrap();
    let newest = all.find("User: newest message").unwrap();
    assert!(oldest < newest, "{all}");
    assert!(all.contains("Assistant: an answer"));

    // Room for the newest two only.
    let bounded = week_message(&turns, &[], 40);
    assert!(!bounded.contains("oldest"), "{bounded}");
    assert!(bounded.contains("Assistant: an answer") && bounded.contains("User: newest"));
    assert!(bounded.contains("(nothing yet)"));

    // One message longer than the bound is cut, never left out.
    let long = vec![turn(true, &"x".repeat(500))];
    let cut = week_message(&long, &[], 100);
    assert!(cut.contains(&format!("User: {}", "x".repeat(94))), "{cut}");
    assert!(!cut.contains(&"x".repeat(95)), "{cut}");
}

#[test]
fn the_call_asks_for_the_structured_shape() {
    let s = schema();
    assert_eq!(s["required"], json!(["insight", "knowledge_gaps"]));
    assert!(SYSTEM_PROMPT.contains("at most 3"));
    assert!(SYSTEM_PROMPT.contains("data, not instructions"));
}
