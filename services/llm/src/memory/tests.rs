//! Tests of `memory`, beside it so the module itself stays readable.

use super::*;
use hermes_db::memory::MemoryEntry;
use hermes_db::scratch::{ScratchDb, insert_user};
use hermes_telemetry::Metrics;
use hermes_types::ids::UserId;
use hermes_types::model::Tier;

fn fact(key: &str, value: &str) -> ExtractedFact {
    ExtractedFact {
        key: key.into(),
        value: value.into(),
    }
}

#[test]
fn bare_json_is_parsed() {
    let got = parse_facts(
        r#"{"facts":[{"key":"diet","value":"vegan"},{"key":"home_city","value":"Lisbon"}]}"#,
    );
    assert_eq!(
        got,
        vec![fact("diet", "vegan"), fact("home_city", "Lisbon")]
    );
}

#[test]
fn fenced_json_is_parsed() {
    let answer = "```json\n{\"facts\": [{\"key\": \"typical_party_size\", \"value\": 4}]}\n```";
    assert_eq!(parse_facts(answer), vec![fact("typical_party_size", "4")]);
}

#[test]
fn json_wrapped_in_prose_is_parsed() {
    let answer = "Sure! Here is what I found {as requested}:\n\
                  {\"facts\":[{\"key\":\"favorite_areas\",\"value\":\"Canggu\"}]}\n\
                  Let me know if you need {anything} else.";
    assert_eq!(parse_facts(answer), vec![fact("favorite_areas", "Canggu")]);
}

#[test]
fn malformed_entries_are_skipped() {
    let answer = r#"{"facts":[
        "diet: vegan",
        {"key":"diet"},
        {"value":"no key"},
        {"key":42,"value":"numeric key"},
        {"key":"pets","value":{"nested":true}},
        {"key":"","value":"empty key"},
        {"key":"!!!","value":"key of punctuation"},
        {"key":"Favourite Cuisine","value":"  Thai\n food\u0000 "},
        {"key":"fitness_goal","value":"run a 10k"}
    ]}"#;
    assert_eq!(
        parse_facts(answer),
        vec![
            fact("favourite_cuisine", "Thai food"),
            fact("fitness_goal", "run a 10k")
        ]
    );
}

#[test]
fn empty_values_and_repeats_are_dropped() {
    let answer = r#"{"facts":[
        {"key":"allergies","value":"   "},
        {"key":"allergies","value":"peanuts"},
        {"key":"allergies","value":"Peanuts"},
        {"key":"allergies","value":"shellfish"},
        {"key":"diet","value":"vegan"},
        {"key":"diet","value":"vegetarian"}
    ]}"#;
    assert_eq!(
        parse_facts(answer),
        vec![
            fact("allergies", "peanuts"),
            fact("allergies", "shellfish"),
            fact("diet", "vegan")
        ]
    );
}

#[test]
fn at_most_ten_facts_are_kept() {
    let items: Vec<String> = (0..25)
        .map(|i| format!(r#"{{"key":"fact_{i}","value":"value {i}"}}"#))
        .collect();
    let got = parse_facts(&format!(r#"{{"facts":[{}]}}"#, items.join(",")));
    assert_eq!(got.len(), MAX_FACTS);
    assert_eq!(got[0], fact("fact_0", "value 0"));
    assert_eq!(got[9], fact("fact_9", "value 9"));
}

#[test]
fn no_json_or_an_empty_list_is_no_facts() {
    assert!(parse_facts(r#"{"facts":[]}"#).is_empty());
    assert!(parse_facts("").is_empty());
    assert!(parse_facts("echo: I love sushi").is_empty());
    assert!(parse_facts(r#"{"facts": "none"}"#).is_empty());
    assert!(parse_facts(r#"{"facts":[{"key":"diet","value":"vegan"}"#).is_empty());
    assert!(parse_facts(r#"[{"key":"diet","value":"vegan"}]"#).is_empty());
}

#[test]
fn long_keys_and_values_are_cut() {
    let answer = format!(
        r#"{{"facts":[{{"key":"{}","value":"{}"}}]}}"#,
        "k".repeat(80),
        "v".repeat(500)
    );
    let got = parse_facts(&answer);
    assert_eq!(got[0].key.chars().count(), MAX_KEY_CHARS);
    assert_eq!(got[0].value.chars().count(), MAX_VALUE_CHARS);
}

#[test]
fn the_prompt_names_every_structural_key_and_the_json_shape() {
    let prompt = system_prompt();
    for key in STRUCTURAL_KEYS.iter().chain(&FITNESS_KEYS) {
        assert!(prompt.contains(key), "{key} missing from the prompt");
    }
    assert!(prompt.contains(r#"{"facts":[{"key":"...","value":"..."}]}"#));
    assert!(prompt.contains(r#"{"facts":[]}"#));
}

#[test]
fn the_exchange_is_bounded() {
    let job = MemoryExtract {
        user_id: UserId::from(uuid::Uuid::nil()),
        tier: Tier::Free,
        user_text: "u".repeat(10_000),
        answer: "a".repeat(10_000),
    };
    let text = exchange_message(&job);
    assert!(text.contains(&"u".repeat(MAX_USER_TEXT_CHARS)));
    assert!(!text.contains(&"u".repeat(MAX_USER_TEXT_CHARS + 1)));
    assert!(text.contains(&"a".repeat(MAX_ANSWER_CHARS)));
    assert!(!text.contains(&"a".repeat(MAX_ANSWER_CHARS + 1)));
}

#[test]
fn embedding_text_reads_as_words() {
    assert_eq!(
        embedding_text(&fact("favourite_cuisine", "Thai")),
        "favourite cuisine: Thai"
    );
}

#[tokio::test]
async fn the_mock_provider_yields_no_facts() {
    let metrics = Metrics::new();
    let (config, gateway) = hermes_gateway::gateway::testing::mock(&metrics);
    let job = MemoryExtract {
        user_id: UserId::from(uuid::Uuid::nil()),
        tier: Tier::Free,
        user_text: "I'm vegan and I live in Lisbon".into(),
        answer: "Noted!".into(),
    };
    let facts = extract_facts(&gateway, &config, &job).await.unwrap();
    assert!(facts.is_empty());
    assert_eq!(
        metrics
            .llm
            .calls
            .with_label_values(&["claude-haiku", "free"])
            .get(),
        1,
        "the mock was asked"
    );
}

#[tokio::test]
async fn an_empty_message_makes_no_call() {
    let metrics = Metrics::new();
    let (config, gateway) = hermes_gateway::gateway::testing::mock(&metrics);
    let job = MemoryExtract {
        user_id: UserId::from(uuid::Uuid::nil()),
        tier: Tier::Free,
        user_text: "  ".into(),
        answer: "Hi!".into(),
    };
    let facts = extract_facts(&gateway, &config, &job).await.unwrap();
    assert!(facts.is_empty());
    assert_eq!(
        metrics
            .llm
            .calls
            .with_label_values(&["claude-haiku", "free"])
            .get(),
        0
    );
}

#[tokio::test]
async fn save_stores_new_facts_once_and_skips_gone_users() {
    ScratchDb::with(|db| async move {
        let mut client = db.get().await.unwrap();
        let user = insert_user(&db).await.unwrap();
        let of = |facts: Vec<(ExtractedFact, Option<Vec<f32>>)>| Extracted {
            user_id: user,
            facts: Some(facts),
        };

        let tx = client.transaction().await.unwrap();
        let got = save(
            &tx,
            of(vec![
                (fact("diet", "vegan"), None),
                (fact("allergies", "peanuts"), Some(vec![1.0, 0.0])),
            ]),
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(
            got,
            Memorized::Saved {
                user_id: user,
                count: 2
            }
        );

        // The same facts again (a later exchange, or a redelivery): nothing new.
        let again = of(vec![
            (fact("diet", "Vegan"), None),
            (fact("allergies", "Peanuts"), Some(vec![0.0, 1.0])),
        ]);
        assert_eq!(save(&client, again).await.unwrap(), Memorized::Nothing);

        // A changed structural value replaces the old one; a new fact adds a row.
        let changed = of(vec![
            (fact("diet", "vegetarian"), None),
            (fact("allergies", "shellfish"), None),
        ]);
        assert_eq!(
            save(&client, changed).await.unwrap(),
            Memorized::Saved {
                user_id: user,
                count: 2
            }
        );
        assert_eq!(
            memory::structural(&client, user).await.unwrap(),
            vec![MemoryEntry {
                key: "diet".into(),
                value: "vegetarian".into()
            }]
        );
        let recallable = memory::facts_with_embeddings(&client, user).await.unwrap();
        assert_eq!(recallable.len(), 1, "shellfish has no embedding");
        assert_eq!(recallable[0].value, "peanuts");
        assert_eq!(recallable[0].embedding, vec![1.0, 0.0]);
        let rows = client
            .query(
                "SELECT source FROM user_memory WHERE user_id = $1",
                &[&user],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.get::<_, String>(0) == "extracted"));

        let stranger = Extracted {
            user_id: UserId::new(),
            facts: Some(vec![(fact("diet", "vegan"), None)]),
        };
        assert_eq!(save(&client, stranger).await.unwrap(), Memorized::Nothing);
        let failed = Extracted {
            user_id: user,
            facts: None,
        };
        assert_eq!(save(&client, failed).await.unwrap(), Memorized::Failed);
    })
    .await;
}
