//! Images in chat completions: `image_url` parts (http(s), fetched by the llm stage through
//! the SSRF guard, and `data:image/…`) reach the fake model as inline image parts; a private
//! address, a too-large image and a lying content type are refused with a clear error, and
//! uploaded files are not taken.

use base64::Engine;
use hermes::Service;
use hermes_testkit::{KEY, TestEnv};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A PNG's signature and some bytes: enough for the type checks.
fn png(len: usize) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.resize(len, 7);
    b
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A chat completion asking about the image at `url`.
fn asking(url: &str) -> Value {
    json!({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is in this image?"},
        {"type": "image_url", "image_url": {"url": url, "detail": "high"}},
    ]}]})
}

/// The fake model, and a server of images at `/cat.png` (a PNG), `/big.png` (a PNG over
/// 1 KiB), `/lie.png` (HTML said to be a PNG).
async fn servers() -> (MockServer, MockServer) {
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(hermes_testkit::openai_answer("a cat", 1, 1)),
        )
        .mount(&model)
        .await;
    let images = MockServer::start().await;
    for (at, body, kind) in [
        ("/cat.png", png(300), "image/png"),
        ("/big.png", png(4096), "image/png"),
        (
            "/lie.png",
            b"<html>not an image</html>".to_vec(),
            "image/png",
        ),
    ] {
        Mock::given(method("GET"))
            .and(path(at))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, kind))
            .mount(&images)
            .await;
    }
    (model, images)
}

/// The image parts of the user turn the model was sent.
fn image_urls(call: &wiremock::Request) -> Vec<String> {
    image_parts(&call.body_json().unwrap())
}

/// The image parts (their URLs) of the user turns of a chat completions request.
pub(crate) fn image_parts(sent: &Value) -> Vec<String> {
    sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["type"] == "image_url")
        .map(|p| p["image_url"]["url"].as_str().unwrap().to_string())
        .collect()
}

/// Whether any request `model` received carried the JPEG `bytes` inline as its user turn's
/// one image: how a chat platform's photo is seen to reach the vision model.
pub(crate) async fn model_saw_jpeg(model: &MockServer, bytes: &[u8]) -> bool {
    let data = format!("data:image/jpeg;base64,{}", b64(bytes));
    let calls = model.received_requests().await.unwrap_or_default();
    calls
        .iter()
        .filter_map(|c| c.body_json::<Value>().ok())
        .any(|c| image_parts(&c) == [data.clone()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_data_images_reach_the_model_inline() {
    let (model, images) = servers().await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri())
        // The image server is on loopback: allowlisted, as an operator would a private CDN.
        .set("HERMES_IMAGE_FETCH_ALLOW", "127.0.0.1");
    let fleet = env.start(&Service::ALL).await;

    let (status, body) = fleet
        .post_json(
            "/v1/chat/completions",
            KEY,
            &asking(&format!("{}/cat.png", images.uri())),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "a cat");
    let inline = format!("data:image/png;base64,{}", b64(&png(300)));
    let calls = model.received_requests().await.unwrap();
    assert_eq!(image_urls(&calls[0]), [inline]);
    assert_eq!(images.received_requests().await.unwrap().len(), 1);

    let gif = format!("data:image/gif;base64,{}", b64(b"GIF89a\x01\x00\x01\x00"));
    let (status, body) = fleet
        .post_json("/v1/chat/completions", KEY, &asking(&gif))
        .await;
    assert_eq!(status, 200, "{body}");
    let calls = model.received_requests().await.unwrap();
    assert_eq!(image_urls(&calls[1]), [gif]);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_oversized_and_lying_images_are_refused_and_no_model_is_asked() {
    let (model, images) = servers().await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri())
        .set("HERMES_IMAGE_FETCH_ALLOW", "127.0.0.1")
        .set("HERMES_IMAGE_MAX_BYTES", "1024");
    let fleet = env.start(&Service::ALL).await;

    for (url, says) in [
        // Not allowlisted: refused before any connection.
        ("http://10.1.2.3/cat.png".to_string(), "private"),
        (
            format!("{}/big.png", images.uri()),
            "larger than 1024 bytes",
        ),
        (format!("{}/lie.png", images.uri()), "claims image/png"),
        (format!("{}/missing.png", images.uri()), "404"),
    ] {
        let (status, body) = fleet
            .post_json("/v1/chat/completions", KEY, &asking(&url))
            .await;
        assert_eq!(status, 422, "{url}: {body}");
        assert_eq!(body["error"]["code"], "invalid", "{url}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{url}: {message}");
    }
    assert!(model.received_requests().await.unwrap().is_empty());

    // Checked at ingest, before anything runs.
    let big = format!("data:image/png;base64,{}", b64(&png(2048)));
    let (status, body) = fleet
        .post_json("/v1/chat/completions", KEY, &asking(&big))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("image_too_large"))
    );
    let (status, body) = fleet
        .post_json(
            "/v1/chat/completions",
            KEY,
            &json!({"messages": [{"role": "user", "content": [
                {"type": "text", "text": "summarise"},
                {"type": "input_file", "file_id": "file-1"},
            ]}]}),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("unsupported_content_type"))
    );
    let pdf = "data:application/pdf;base64,JVBERi0xLjQ=";
    let (status, body) = fleet
        .post_json("/v1/chat/completions", KEY, &asking(pdf))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("unsupported_content_type"))
    );
    fleet.stop().await.unwrap();
}

/// `n` image parts of `url_of(i)` in one user turn.
fn with_images(n: usize, url_of: impl Fn(usize) -> String) -> Value {
    let mut parts = vec![json!({"type": "text", "text": "what is in these images?"})];
    parts.extend((0..n).map(|i| json!({"type": "image_url", "image_url": {"url": url_of(i)}})));
    json!({"messages": [{"role": "user", "content": parts}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eleven_images_are_refused_at_ingest_naming_the_limit() {
    let env = TestEnv::new().await;
    // Refused before anything is queued: ingest alone answers.
    let fleet = env.start(&[Service::Ingest]).await;
    let url = |i: usize| format!("https://cdn.example/{i}.png");
    let (status, body) = fleet
        .post_json("/v1/chat/completions", KEY, &with_images(11, url))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "too_many_images", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("at most 10"), "{message}");
    // Counted over the whole conversation, earlier turns included.
    let mut split = with_images(6, url);
    let earlier = split["messages"][0].clone();
    split["messages"] = json!([earlier, {"role": "assistant", "content": "nice"}, earlier]);
    let (status, body) = fleet.post_json("/v1/chat/completions", KEY, &split).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("too_many_images"))
    );
    // The Responses API counts its `input_image` parts the same way.
    let input: Vec<Value> = (0..11)
        .map(|i| json!({"type": "input_image", "image_url": url(i)}))
        .chain([json!({"type": "input_text", "text": "what is this?"})])
        .collect();
    let (status, body) = fleet
        .post_responses(KEY, &json!({"input": [{"role": "user", "content": input}]}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "too_many_images", "{body}");
    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains(
            "hermes_ingest_messages_total{outcome=\"too_many_images\",platform=\"api\"} 3"
        ),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_slow_images_end_within_one_deadline_and_too_many_bytes_are_refused() {
    let (model, images) = servers().await;
    // Every /slow/… image takes an hour: only the deadline of the whole call ends the wait.
    Mock::given(method("GET"))
        .and(wiremock::matchers::path_regex("^/slow/"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(png(300), "image/png")
                .set_delay(std::time::Duration::from_secs(3600)),
        )
        .mount(&images)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri())
        .set("HERMES_IMAGE_FETCH_ALLOW", "127.0.0.1")
        .set("HERMES_IMAGE_FETCH_DEADLINE_SECS", "2")
        // Three 300-byte images fit; four do not.
        .set("HERMES_IMAGE_INLINE_MAX_BYTES", "1000");
    let fleet = env.start(&Service::ALL).await;

    // Ten images of an hour each, formerly fetched one after another for 20 s each (past
    // the caller's 30 s run timeout): now one deadline of 2 s for them all.
    let slow = with_images(10, |i| format!("{}/slow/{i}.png", images.uri()));
    let (status, body) = fleet.post_json("/v1/chat/completions", KEY, &slow).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("did not all arrive within 2 s"),
        "{message}"
    );
    // A few at a time: never more than four fetches were begun.
    let asked = images.received_requests().await.unwrap().len();
    assert!((1..=4).contains(&asked), "{asked} fetches begun");

    let cats = |n| with_images(n, |_| format!("{}/cat.png", images.uri()));
    let (status, body) = fleet.post_json("/v1/chat/completions", KEY, &cats(4)).await;
    assert_eq!(status, 422, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("more than 1000 bytes together"),
        "{message}"
    );
    assert!(model.received_requests().await.unwrap().is_empty());
    // Within the budget the images reach the model.
    let (status, body) = fleet.post_json("/v1/chat/completions", KEY, &cats(3)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        image_urls(&model.received_requests().await.unwrap()[0]).len(),
        3
    );

    let metrics = fleet.metrics().await;
    for (outcome, n) in [("deadline", 1.0), ("too_many_bytes", 1.0), ("ok", 1.0)] {
        let series = format!("hermes_image_inline_total{{outcome=\"{outcome}\"}}");
        assert_eq!(
            hermes_testkit::metric(&metrics, &series),
            Some(n),
            "{series}"
        );
    }
    fleet.stop().await.unwrap();
}
