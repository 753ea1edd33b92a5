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

async fn post(fleet: &hermes_testkit::Fleet, body: &Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(fleet.url("/v1/chat/completions"))
        .bearer_auth(KEY)
        .json(body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_data_images_reach_the_model_inline() {
    let (model, images) = servers().await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri())
        // The image server is on loopback: allowlisted, as an operator would a private CDN.
        .set("HERMES_IMAGE_FETCH_ALLOW", "127.0.0.1");
    let fleet = env.start(&Service::ALL).await;

    let (status, body) = post(&fleet, &asking(&format!("{}/cat.png", images.uri()))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "a cat");
    let inline = format!("data:image/png;base64,{}", b64(&png(300)));
    let calls = model.received_requests().await.unwrap();
    assert_eq!(image_urls(&calls[0]), [inline]);
    assert_eq!(images.received_requests().await.unwrap().len(), 1);

    let gif = format!("data:image/gif;base64,{}", b64(b"GIF89a\x01\x00\x01\x00"));
    let (status, body) = post(&fleet, &asking(&gif)).await;
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
        let (status, body) = post(&fleet, &asking(&url)).await;
        assert_eq!(status, 422, "{url}: {body}");
        assert_eq!(body["error"]["code"], "invalid", "{url}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{url}: {message}");
    }
    assert!(model.received_requests().await.unwrap().is_empty());

    // Checked at ingest, before anything runs.
    let big = format!("data:image/png;base64,{}", b64(&png(2048)));
    let (status, body) = post(&fleet, &asking(&big)).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("image_too_large"))
    );
    let (status, body) = post(
        &fleet,
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
    let (status, body) = post(&fleet, &asking(pdf)).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("unsupported_content_type"))
    );
    fleet.stop().await.unwrap();
}
