//! Google's native Gemini API (`generateContent` / `streamGenerateContent?alt=sse`): this
//! file owns the translation of a neutral call into Gemini's wire format (`contents` with
//! `user`/`model` roles, `systemInstruction`, `functionDeclarations` with an OpenAPI-subset
//! schema, `generationConfig`), thought signatures carried through tool calls, the answer and
//! its stream back into a [`Completion`], and the usage normalizer (thinking billed as output).
//!
//! The key travels in the `x-goog-api-key` header, never in the URL: URLs end up in logs and
//! in transport errors.

use hermes_config::{BackendKind, Resolved};
use hermes_types::model::{ChatMessage, ImageRef, Role, ToolCall, Usage};
use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::http::{self, HttpClient, RejectReason};
use super::sse::SseReader;
use super::{Adapter, CallSpec, Completion, DeltaSink, ProviderError};

/// The header Gemini reads its API key from.
const KEY_HEADER: &str = "x-goog-api-key";

/// Gemini refuses more than five stop sequences with a 400.
const MAX_STOP_SEQUENCES: usize = 5;

/// The native Gemini backend.
pub struct Gemini {
    http: HttpClient,
    /// The API root without its trailing slash (`…/v1beta`).
    base: String,
    key: Option<SecretString>,
}

impl Gemini {
    /// A Gemini backend at `resolved.base_url`, authenticated with `resolved.key`.
    pub fn new(http: HttpClient, resolved: Resolved) -> Self {
        Self {
            http,
            base: resolved.base_url.as_str().trim_end_matches('/').to_string(),
            key: resolved.key,
        }
    }

    /// `{base}/models/{model}:{method}`; a model id configured as `models/…` (the form
    /// Gemini's own model list uses) is accepted too.
    fn model_url(&self, model_id: &str, method: &str) -> String {
        let model = model_id.strip_prefix("models/").unwrap_or(model_id);
        format!("{}/models/{model}:{method}", self.base)
    }

    fn authed(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let Some(key) = &self.key else {
            return req;
        };
        match HeaderValue::from_str(key.expose_secret()) {
            Ok(mut value) => {
                // Keeps the key out of any Debug output of the request.
                value.set_sensitive(true);
                req.header(KEY_HEADER, value)
            }
            // A key that is no valid header value: reqwest records the error and `send`
            // fails with a builder error that does not echo the value.
            Err(_) => req.header(KEY_HEADER, key.expose_secret()),
        }
    }

    fn post(&self, url: String, body: &Value) -> reqwest::RequestBuilder {
        self.authed(self.http.inner.post(url).json(body))
    }
}

impl Adapter for Gemini {
    fn kind(&self) -> BackendKind {
        BackendKind::Gemini
    }

    fn supports_tools(&self) -> bool {
        true
    }

    async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        let body = request_body(call);
        let req = self
            .post(self.model_url(call.model_id, "generateContent"), &body)
            .timeout(call.timeout);
        let resp = http::send(req, call.timeout).await?;
        parse_response(&http::body(resp, call.timeout).await?)
    }

    async fn stream(
        &self,
        call: &CallSpec<'_>,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, ProviderError> {
        let body = request_body(call);
        let url = self.model_url(call.model_id, "streamGenerateContent") + "?alt=sse";
        // No whole-request timeout on a stream: the reader bounds the first event and every
        // silence, and the chain bounds the attempt.
        let resp = http::send(self.post(url, &body), call.first_token_timeout).await?;
        let mut reader = SseReader::new(resp, call.first_token_timeout, call.idle_timeout);
        let mut acc = StreamAcc::default();
        while let Some(event) = reader.next().await? {
            if event.data.trim().is_empty() {
                continue;
            }
            acc.chunk(&event.data, sink)?;
        }
        // Gemini sends no end marker: the body simply ends after the last chunk.
        acc.finish()
    }

    async fn health_check(&self) -> Result<(), ProviderError> {
        let timeout = std::time::Duration::from_secs(10);
        let url = format!("{}/models?pageSize=1", self.base);
        let req = self.authed(self.http.inner.get(url)).timeout(timeout);
        http::send(req, timeout).await.map(|_| ())
    }
}

// ---------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------

/// The JSON body of a `generateContent` request (the streaming call sends the same body).
///
/// System messages become `systemInstruction` parts in order; the rest become `contents`,
/// with consecutive turns of the same Gemini role merged, because Gemini expects user and
/// model turns to alternate.
pub fn request_body(call: &CallSpec<'_>) -> Value {
    let mut system_parts: Vec<Value> = Vec::new();
    let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (i, m) in call.messages.iter().enumerate() {
        let (role, parts) = match m.role {
            Role::System => {
                if let Some(text) = m.content.as_deref().filter(|t| !t.trim().is_empty()) {
                    system_parts.push(json!({ "text": text }));
                }
                continue;
            }
            Role::User => ("user", user_parts(m)),
            Role::Assistant => ("model", model_parts(m)),
            // Function results go back in a user turn.
            Role::Tool => ("user", vec![tool_result_part(m, &call.messages[..i])]),
        };
        // Gemini refuses a content without parts.
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last, acc)) if *last == role => acc.extend(parts),
            _ => contents.push((role, parts)),
        }
    }

    let mut body = json!({
        "contents": contents
            .into_iter()
            .map(|(role, parts)| json!({ "role": role, "parts": parts }))
            .collect::<Vec<_>>(),
    });
    if !system_parts.is_empty() {
        body["systemInstruction"] = json!({ "parts": system_parts });
    }
    if !call.tools.is_empty() {
        let declarations: Vec<Value> = call
            .tools
            .iter()
            .map(|t| {
                let mut d = json!({ "name": t.name, "description": t.description });
                if let Some(p) = tool_parameters(&t.parameters) {
                    d["parameters"] = p;
                }
                d
            })
            .collect();
        body["tools"] = json!([{ "functionDeclarations": declarations }]);
    }
    body["generationConfig"] = generation_config(call);
    body
}

fn generation_config(call: &CallSpec<'_>) -> Value {
    let p = call.params;
    let mut config = json!({ "maxOutputTokens": call.max_tokens });
    if let Some(t) = p.temperature {
        config["temperature"] = json!(t);
    }
    if let Some(t) = p.top_p {
        config["topP"] = json!(t);
    }
    if !p.stop.is_empty() {
        // Beyond the fifth Gemini would refuse the whole call; the first five still apply.
        let stop: Vec<&String> = p.stop.iter().take(MAX_STOP_SEQUENCES).collect();
        config["stopSequences"] = json!(stop);
    }
    if let Some(f) = &p.response_format {
        config["responseMimeType"] = json!("application/json");
        config["responseSchema"] = clean_schema(&f.schema);
    }
    config
}

/// A user turn's parts: its text, then its images.
fn user_parts(m: &ChatMessage) -> Vec<Value> {
    let mut parts: Vec<Value> = text_part(m).into_iter().collect();
    parts.extend(m.images.iter().map(image_part));
    parts
}

/// A model turn's parts: its text, then one `functionCall` part per tool call, each with
/// the thought signature it came with (Gemini validates it on the next turn).
fn model_parts(m: &ChatMessage) -> Vec<Value> {
    let mut parts: Vec<Value> = text_part(m).into_iter().collect();
    parts.extend(m.tool_calls.iter().map(|c| {
        let mut part = json!({ "functionCall": { "name": c.name, "args": c.arguments } });
        if let Some(sig) = &c.signature {
            part["thoughtSignature"] = json!(sig);
        }
        part
    }));
    parts
}

fn text_part(m: &ChatMessage) -> Option<Value> {
    m.content
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(|t| json!({ "text": t }))
}

/// A `data:` URL travels inline; any other URL is handed to Gemini to fetch.
fn image_part(image: &ImageRef) -> Value {
    if let Some((mime, data)) = parse_data_url(&image.url) {
        let mime = mime.or(image.mime_type.as_deref()).unwrap_or("image/jpeg");
        return json!({ "inlineData": { "mimeType": mime, "data": data } });
    }
    json!({
        "fileData": {
            "mimeType": image.mime_type.as_deref().unwrap_or("image/jpeg"),
            "fileUri": image.url,
        }
    })
}

/// `data:<mime>;base64,<data>` → (mime if given, data). Only base64 data URLs qualify:
/// `inlineData` takes base64 bytes.
fn parse_data_url(url: &str) -> Option<(Option<&str>, &str)> {
    hermes_types::data_url::parse_base64(url).map(|d| (d.mime, d.data))
}

/// A tool result as a `functionResponse` part. Gemini matches results by function name,
/// which only the assistant turn that made the call knows; the nearest earlier call with
/// this id wins (ids may repeat across turns on other backends).
fn tool_result_part(m: &ChatMessage, earlier: &[ChatMessage]) -> Value {
    let text = m.content.as_deref().unwrap_or_default();
    let id = m.tool_call_id.as_deref().unwrap_or_default();
    let name = earlier
        .iter()
        .rev()
        .filter(|e| e.role == Role::Assistant)
        .flat_map(|e| e.tool_calls.iter())
        .find(|c| c.id == id)
        .map(|c| c.name.as_str());
    let Some(name) = name else {
        // A result whose call is gone (a trimmed history) would make Gemini refuse the
        // whole request ("function response turn must follow a function call turn"); as
        // plain text the model still sees it.
        return json!({ "text": format!("Result of tool call {id}: {text}") });
    };
    let content = match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!(text),
    };
    json!({ "functionResponse": { "name": name, "response": { "content": content } } })
}

/// The `parameters` of a function declaration, or `None` when the tool takes no arguments:
/// Gemini refuses an OBJECT schema whose `properties` is empty.
fn tool_parameters(schema: &Value) -> Option<Value> {
    let cleaned = clean_schema(schema);
    let obj = cleaned.as_object()?;
    let is_object = obj
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(|t| t.eq_ignore_ascii_case("object"));
    if is_object && !obj.contains_key("properties") && !obj.contains_key("anyOf") {
        return None;
    }
    Some(cleaned)
}

/// The keywords of Gemini's `Schema` (an OpenAPI 3.0 subset). Anything else — `$schema`,
/// `additionalProperties`, `$defs`, `const`, `oneOf`, `examples`, … — makes Gemini refuse
/// the request with a 400, so it is dropped or rewritten.
const SCHEMA_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// The only `format` values Gemini takes (numbers: float/double, integers: int32/int64,
/// strings: enum/date-time); another, such as `uri`, is refused with a 400.
const SCHEMA_FORMATS: &[&str] = &["float", "double", "int32", "int64", "enum", "date-time"];

/// How many `$ref`s deep a schema is inlined; a recursive type is cut off there.
const MAX_REF_DEPTH: usize = 4;

/// A JSON schema rewritten into the subset Gemini accepts: local `$ref`s inlined from
/// `$defs`/`definitions`, `type: [T, "null"]` and `anyOf [..., {type: null}]` as
/// `nullable`, `oneOf` as `anyOf`, `const` as a one-value `enum`, a one-member `allOf`
/// merged, and every other unknown keyword dropped, recursively.
pub fn clean_schema(schema: &Value) -> Value {
    let mut defs = Map::new();
    for key in ["definitions", "$defs"] {
        if let Some(d) = schema.get(key).and_then(Value::as_object) {
            defs.extend(d.clone());
        }
    }
    clean_node(schema, &defs, 0)
}

fn clean_node(node: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    let Some(obj) = node.as_object() else {
        // `true` (any value) and other non-object schemas: an unconstrained schema.
        return json!({});
    };
    let mut out = Map::new();
    if let Some(target) = obj
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve_ref(r, defs))
        && depth < MAX_REF_DEPTH
        && let Value::Object(m) = clean_node(target, defs, depth + 1)
    {
        out = m;
    }
    // Generators wrap a `$ref` in a one-member allOf to attach a description to it.
    if let Some([only]) = obj
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        && let Value::Object(m) = clean_node(only, defs, depth)
    {
        out.extend(m);
    }
    for (key, value) in obj {
        match key.as_str() {
            "properties" => {
                let Some(props) = value.as_object().filter(|p| !p.is_empty()) else {
                    continue;
                };
                let cleaned = props
                    .iter()
                    .map(|(name, s)| (name.clone(), clean_node(s, defs, depth)))
                    .collect();
                out.insert(key.clone(), Value::Object(cleaned));
            }
            "items" => {
                // Tuple-style `items: [..]` has no Gemini form; its first member is kept.
                let item = match value {
                    Value::Array(a) => a.first(),
                    v => Some(v),
                };
                if let Some(item) = item {
                    out.insert(key.clone(), clean_node(item, defs, depth));
                }
            }
            "anyOf" | "oneOf" => {
                if let Some(members) = value.as_array() {
                    let members = members.iter().map(|s| clean_node(s, defs, depth)).collect();
                    out.insert("anyOf".into(), Value::Array(members));
                }
            }
            "type" => match value {
                Value::Array(types) => {
                    let mut types: Vec<&Value> = types.iter().collect();
                    if let Some(i) = types.iter().position(|t| t.as_str() == Some("null")) {
                        types.remove(i);
                        out.insert("nullable".into(), json!(true));
                    }
                    match types.as_slice() {
                        [] => {}
                        [one] => {
                            out.insert("type".into(), (*one).clone());
                        }
                        many => {
                            let members = many
                                .iter()
                                .map(|t| json!({ "type": t }))
                                .collect::<Vec<_>>();
                            out.insert("anyOf".into(), Value::Array(members));
                        }
                    }
                }
                v => {
                    out.insert(key.clone(), v.clone());
                }
            },
            // Gemini's enum holds strings only; another `const` is dropped below.
            "const" if value.is_string() => {
                out.insert("enum".into(), json!([value]));
                out.entry("type").or_insert(json!("string"));
            }
            "format" if !value.as_str().is_some_and(|f| SCHEMA_FORMATS.contains(&f)) => {}
            k if SCHEMA_KEYS.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    lift_null_member(&mut out);
    Value::Object(out)
}

/// `anyOf: [S, {type: null}]` (how Pydantic and zod write an optional field) becomes S with
/// `nullable: true`.
fn lift_null_member(out: &mut Map<String, Value>) {
    let Some(Value::Array(members)) = out.get_mut("anyOf") else {
        return;
    };
    let before = members.len();
    members.retain(|m| m.get("type").and_then(Value::as_str) != Some("null"));
    if members.len() == before {
        return;
    }
    out.insert("nullable".into(), json!(true));
    let members = match out.remove("anyOf") {
        Some(Value::Array(m)) => m,
        _ => return,
    };
    match <[Value; 1]>::try_from(members) {
        Ok([Value::Object(only)]) => {
            for (k, v) in only {
                out.entry(k).or_insert(v);
            }
        }
        Ok([other]) => {
            out.insert("anyOf".into(), json!([other]));
        }
        Err(members) if members.is_empty() => {}
        Err(members) => {
            out.insert("anyOf".into(), Value::Array(members));
        }
    }
}

fn resolve_ref<'a>(reference: &str, defs: &'a Map<String, Value>) -> Option<&'a Value> {
    let name = reference
        .strip_prefix("#/$defs/")
        .or_else(|| reference.strip_prefix("#/definitions/"))?;
    defs.get(name)
}

// ---------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    #[serde(default)]
    candidates: Option<Vec<WireCandidate>>,
    #[serde(default)]
    prompt_feedback: Option<WirePromptFeedback>,
    #[serde(default)]
    usage_metadata: Option<WireUsage>,
    /// An error reported inside a 200 stream (the status was already sent).
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCandidate {
    #[serde(default)]
    content: Option<WireContent>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireContent {
    #[serde(default)]
    parts: Vec<WirePart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePart {
    #[serde(default)]
    text: Option<String>,
    /// A thinking summary, not part of the answer.
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    function_call: Option<WireFunctionCall>,
    #[serde(default)]
    thought_signature: Option<String>,
}

#[derive(Deserialize)]
struct WireFunctionCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
    #[serde(default)]
    block_reason_message: Option<String>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    message: String,
    #[serde(default)]
    status: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    tool_use_prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: u64,
}

impl WireUsage {
    /// The usage normalizer of this wire format: prompt (plus tool-use prompt) → input;
    /// candidates plus thoughts → output, because Gemini bills thinking tokens as output
    /// and does not count them in `candidatesTokenCount`.
    fn normalize(&self) -> Usage {
        Usage {
            input_tokens: self.prompt_token_count + self.tool_use_prompt_token_count,
            output_tokens: self.candidates_token_count + self.thoughts_token_count,
            // Priced by the chain, which knows the logical model.
            cost_micro_usd: 0,
        }
    }
}

/// Our finish reason for Gemini's `finishReason`.
fn finish_reason(raw: Option<&str>, has_calls: bool) -> String {
    match raw {
        None | Some("STOP") if has_calls => "tool_calls".into(),
        None | Some("STOP") => "stop".into(),
        Some("MAX_TOKENS") => "length".into(),
        Some(
            "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT",
        ) => "content_filter".into(),
        Some(other) => other.to_ascii_lowercase(),
    }
}

/// A tool call id: Gemini's own when it gives one, else a fresh unique one. Unique rather
/// than positional because the history may fail over to a backend (Anthropic) that refuses
/// repeated tool call ids within a conversation.
fn call_id(given: Option<String>) -> String {
    given
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| format!("call_{}", uuid::Uuid::now_v7().simple()))
}

impl WireResponse {
    /// The error a chunk without an answer means: an error object, or a blocked prompt.
    fn refusal(&self) -> Option<ProviderError> {
        if let Some(e) = &self.error {
            let status = reqwest::StatusCode::from_u16(e.code)
                .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR);
            let body = json!({ "error": { "message": e.message, "status": e.status } });
            return Some(http::status_error(status, None, &body.to_string()));
        }
        let has_candidates = self.candidates.as_ref().is_some_and(|c| !c.is_empty());
        let reason = self
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason.as_deref())
            .filter(|_| !has_candidates)?;
        let detail = self
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason_message.as_deref())
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        Some(ProviderError::Rejected {
            status: 400,
            reason: RejectReason::ContentFilter,
            message: format!("Gemini blocked the prompt ({reason}){detail}"),
        })
    }

    /// The first candidate's parts and finish reason (Gemini answers one candidate).
    fn into_first_candidate(self) -> Option<WireCandidate> {
        self.candidates.and_then(|c| c.into_iter().next())
    }
}

/// Collects the answer's text and calls from parts, skipping thinking summaries.
#[derive(Default)]
struct Parts {
    text: String,
    tool_calls: Vec<ToolCall>,
}

impl Parts {
    /// Take in one candidate's parts; returns the answer text they added, in order.
    fn add(&mut self, parts: Vec<WirePart>) -> Vec<String> {
        let mut added = Vec::new();
        for part in parts {
            if let Some(call) = part.function_call {
                self.tool_calls.push(ToolCall {
                    id: call_id(call.id),
                    name: call.name,
                    arguments: call.args.filter(|a| !a.is_null()).unwrap_or(json!({})),
                    signature: part.thought_signature,
                });
            } else if let Some(text) = part.text.filter(|t| !part.thought && !t.is_empty()) {
                self.text.push_str(&text);
                added.push(text);
            }
        }
        added
    }

    fn into_completion(self, usage: Usage, raw_finish: Option<&str>) -> Completion {
        let finish_reason = finish_reason(raw_finish, !self.tool_calls.is_empty());
        Completion {
            text: Some(self.text).filter(|t| !t.is_empty()),
            tool_calls: self.tool_calls,
            usage,
            finish_reason,
        }
    }
}

/// Parse a `generateContent` response body.
pub fn parse_response(text: &str) -> Result<Completion, ProviderError> {
    let wire: WireResponse = serde_json::from_str(text)
        .map_err(|e| ProviderError::Malformed(format!("not a Gemini response: {e}")))?;
    if let Some(e) = wire.refusal() {
        return Err(e);
    }
    let usage = wire.usage_metadata.as_ref().map(WireUsage::normalize);
    let candidate = wire
        .into_first_candidate()
        .ok_or_else(|| ProviderError::Malformed("no candidates in the response".into()))?;
    let mut parts = Parts::default();
    parts.add(candidate.content.map(|c| c.parts).unwrap_or_default());
    Ok(parts.into_completion(
        usage.unwrap_or_default(),
        candidate.finish_reason.as_deref(),
    ))
}

/// A streamed answer being assembled: every chunk is a whole response holding the next
/// parts; usage is cumulative, so the last one counts.
#[derive(Default)]
struct StreamAcc {
    parts: Parts,
    usage: Usage,
    finish_reason: Option<String>,
}

impl StreamAcc {
    fn chunk(&mut self, data: &str, sink: &dyn DeltaSink) -> Result<(), ProviderError> {
        let chunk: WireResponse = serde_json::from_str(data)
            .map_err(|e| ProviderError::Malformed(format!("stream chunk is not JSON: {e}")))?;
        if let Some(e) = chunk.refusal() {
            return Err(e);
        }
        if let Some(u) = &chunk.usage_metadata {
            self.usage = u.normalize();
        }
        if let Some(candidate) = chunk.into_first_candidate() {
            let parts = candidate.content.map(|c| c.parts).unwrap_or_default();
            for text in self.parts.add(parts) {
                sink.delta(&text);
            }
            if let Some(r) = candidate.finish_reason {
                self.finish_reason = Some(r);
            }
        }
        Ok(())
    }

    /// The answer, if the stream got as far as a finish reason (Gemini's only sign that
    /// the answer is whole).
    fn finish(self) -> Result<Completion, ProviderError> {
        let Some(raw) = self.finish_reason else {
            return Err(ProviderError::Interrupted(
                "the stream ended without a finishReason".into(),
            ));
        };
        Ok(self.parts.into_completion(self.usage, Some(&raw)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::providers::testing::{Collect, call, resolved};
    use hermes_types::model::{CallParams, JsonSchemaFormat, ToolSpec};
    use wiremock::matchers::{body_partial_json, header, method, path, query_param};
    use wiremock::{MockServer, ResponseTemplate};

    const TEXT: &str = include_str!("../../tests/fixtures/gemini/generate_text.json");
    const FUNCTION_CALL: &str =
        include_str!("../../tests/fixtures/gemini/generate_function_call.json");
    const BLOCKED: &str = include_str!("../../tests/fixtures/gemini/blocked_prompt.json");
    const ERROR_429: &str = include_str!("../../tests/fixtures/gemini/error_429.json");
    const ERROR_503: &str = include_str!("../../tests/fixtures/gemini/error_503.json");
    const STREAM_TEXT: &str = include_str!("../../tests/fixtures/gemini/stream_text.sse");
    const STREAM_CALL: &str = include_str!("../../tests/fixtures/gemini/stream_function_call.sse");

    const MODEL: &str = "gemini-2.5-flash";

    async fn backend() -> (MockServer, Gemini) {
        hermes_net::install_crypto_provider();
        let server = MockServer::start().await;
        // The trailing slash must not double up in the URLs.
        let base = format!("{}/v1beta/", server.uri());
        let gemini = Gemini::new(
            HttpClient::new().unwrap(),
            resolved(BackendKind::Gemini, &base),
        );
        (server, gemini)
    }

    fn endpoint(m: &str) -> String {
        format!("/v1beta/models/{MODEL}:{m}")
    }

    fn sse(body: &str) -> ResponseTemplate {
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(body)
    }

    fn user(text: &str) -> Vec<ChatMessage> {
        vec![ChatMessage::text(Role::User, text)]
    }

    fn signed_call(id: &str, name: &str, args: Value, sig: Option<&str>) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args,
            signature: sig.map(str::to_string),
        }
    }

    #[test]
    fn request_body_maps_every_field() {
        let messages = vec![
            ChatMessage::text(Role::System, "You are the venue assistant."),
            ChatMessage::text(Role::System, "  \n"),
            ChatMessage::text(Role::System, "Opening hours: 10-18."),
            ChatMessage {
                images: vec![
                    ImageRef {
                        url: "data:image/png;base64,iVBORw0KGgo=".into(),
                        mime_type: None,
                    },
                    ImageRef {
                        url: "https://cdn.example/menu.webp".into(),
                        mime_type: Some("image/webp".into()),
                    },
                    ImageRef {
                        url: "https://cdn.example/photo".into(),
                        mime_type: None,
                    },
                ],
                ..ChatMessage::text(Role::User, "What is on these?")
            },
            ChatMessage::text(Role::User, "And what time is it in Tokyo?"),
            ChatMessage {
                role: Role::Assistant,
                content: Some("Checking.".into()),
                tool_calls: vec![
                    signed_call(
                        "c1",
                        "current_time",
                        json!({"timezone": "Asia/Tokyo"}),
                        Some("SIG/1+="),
                    ),
                    signed_call("c2", "weather", json!({"city": "Tokyo"}), None),
                ],
                tool_call_id: None,
                images: Vec::new(),
            },
            ChatMessage::tool_result("c2", r#"{"temp_c": 21}"#),
            ChatMessage::tool_result("c1", "12:00"),
            ChatMessage::tool_result("gone", "orphan"),
            ChatMessage::text(Role::User, "Thanks!"),
        ];
        let tools = vec![ToolSpec {
            name: "current_time".into(),
            description: "The current time in a timezone.".into(),
            parameters: json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "timezone": {"type": "string", "format": "iana-tz", "description": "IANA name"},
                    "options": {
                        "type": "object",
                        "additionalProperties": false,
                        "properties": {"seconds": {"type": ["boolean", "null"]}}
                    }
                },
                "required": ["timezone"]
            }),
            toolset: "builtin".into(),
        }];
        let params = CallParams {
            temperature: Some(0.5),
            top_p: Some(0.25),
            stop: vec!["END".into()],
            max_tokens: None,
            response_format: Some(JsonSchemaFormat {
                name: "answer".into(),
                schema: json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": {"reply": {"type": "string"}},
                    "required": ["reply"],
                    "additionalProperties": false
                }),
                strict: true,
            }),
        };
        let mut spec = call(MODEL, &messages, &tools, &params);
        spec.max_tokens = 77;
        let body = request_body(&spec);

        assert_eq!(
            body["systemInstruction"],
            json!({"parts": [
                {"text": "You are the venue assistant."},
                {"text": "Opening hours: 10-18."}
            ]})
        );
        let contents = body["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 3, "{contents:#?}");
        // The two user messages merge into one turn: text, images, text.
        assert_eq!(
            contents[0],
            json!({"role": "user", "parts": [
                {"text": "What is on these?"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"mimeType": "image/webp", "fileUri": "https://cdn.example/menu.webp"}},
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://cdn.example/photo"}},
                {"text": "And what time is it in Tokyo?"}
            ]})
        );
        assert_eq!(
            contents[1],
            json!({"role": "model", "parts": [
                {"text": "Checking."},
                {"functionCall": {"name": "current_time", "args": {"timezone": "Asia/Tokyo"}},
                 "thoughtSignature": "SIG/1+="},
                {"functionCall": {"name": "weather", "args": {"city": "Tokyo"}}}
            ]})
        );
        // Results grouped in one user turn, named after their calls, followed by the
        // next user message; a JSON object result travels parsed, text as a string.
        assert_eq!(
            contents[2],
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "weather", "response": {"content": {"temp_c": 21}}}},
                {"functionResponse": {"name": "current_time", "response": {"content": "12:00"}}},
                {"text": "Result of tool call gone: orphan"},
                {"text": "Thanks!"}
            ]})
        );
        assert_eq!(
            body["tools"],
            json!([{"functionDeclarations": [{
                "name": "current_time",
                "description": "The current time in a timezone.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "timezone": {"type": "string", "description": "IANA name"},
                        "options": {
                            "type": "object",
                            "properties": {"seconds": {"type": "boolean", "nullable": true}}
                        }
                    },
                    "required": ["timezone"]
                }
            }]}])
        );
        assert_eq!(
            body["generationConfig"],
            json!({
                "maxOutputTokens": 77,
                "temperature": 0.5,
                "topP": 0.25,
                "stopSequences": ["END"],
                "responseMimeType": "application/json",
                "responseSchema": {
                    "type": "object",
                    "properties": {"reply": {"type": "string"}},
                    "required": ["reply"]
                }
            })
        );
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(
            keys.len(),
            4,
            "contents, systemInstruction, tools, generationConfig: {keys:?}"
        );
    }

    #[test]
    fn minimal_request_has_no_optional_fields() {
        let messages = user("hi");
        let params = CallParams::default();
        let body = request_body(&call(MODEL, &messages, &[], &params));
        assert_eq!(
            body,
            json!({
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "generationConfig": {"maxOutputTokens": 256}
            })
        );
    }

    #[test]
    fn schemas_are_rewritten_into_gemini_subset() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": {
                "Slot": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "start": {"type": "string", "format": "date-time"},
                        "kind": {"const": "table"}
                    }
                }
            },
            "type": "object",
            "properties": {
                "slot": {"allOf": [{"$ref": "#/$defs/Slot"}], "description": "When"},
                "note": {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "null"}]},
                "party": {"type": "integer", "exclusiveMinimum": 0, "examples": [2]},
                "pick": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "anything": true
            }
        });
        assert_eq!(
            clean_schema(&schema),
            json!({
                "type": "object",
                "properties": {
                    "slot": {
                        "type": "object",
                        "properties": {
                            "start": {"type": "string", "format": "date-time"},
                            "kind": {"type": "string", "enum": ["table"]}
                        },
                        "description": "When"
                    },
                    "note": {"type": "string", "maxLength": 200, "nullable": true},
                    "party": {"type": "integer"},
                    "pick": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "anything": {}
                }
            })
        );
        // A recursive type is cut off instead of looping.
        let recursive = json!({
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
            "$ref": "#/$defs/Node"
        });
        let cleaned = clean_schema(&recursive).to_string();
        assert!(
            cleaned.matches("\"next\"").count() <= MAX_REF_DEPTH,
            "{cleaned}"
        );
        // A tool without arguments sends no parameters: Gemini refuses empty properties.
        assert_eq!(
            tool_parameters(
                &json!({"type": "object", "properties": {}, "additionalProperties": false})
            ),
            None
        );
        assert_eq!(
            tool_parameters(&json!({"type": "object", "properties": {"q": {"type": "string"}}})),
            Some(json!({"type": "object", "properties": {"q": {"type": "string"}}}))
        );
    }

    #[test]
    fn text_response_skips_thoughts_and_bills_thinking_as_output() {
        let c = parse_response(TEXT).unwrap();
        assert_eq!(
            c.text.as_deref(),
            Some("We open at 10:00 on Sundays and close at 18:00.")
        );
        assert!(c.tool_calls.is_empty());
        assert_eq!(c.finish_reason, "stop");
        // 14 candidates + 327 thinking tokens are output; total 398 = 57 + 14 + 327.
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 57,
                output_tokens: 341,
                cost_micro_usd: 0
            }
        );
    }

    #[test]
    fn usage_counts_tool_use_prompt_as_input() {
        let u: WireUsage = serde_json::from_value(json!({
            "promptTokenCount": 100, "toolUsePromptTokenCount": 20,
            "candidatesTokenCount": 5, "thoughtsTokenCount": 7, "totalTokenCount": 132
        }))
        .unwrap();
        assert_eq!(
            u.normalize(),
            Usage {
                input_tokens: 120,
                output_tokens: 12,
                cost_micro_usd: 0
            }
        );
    }

    #[test]
    fn finish_reasons_are_mapped() {
        assert_eq!(finish_reason(Some("STOP"), false), "stop");
        assert_eq!(finish_reason(Some("STOP"), true), "tool_calls");
        assert_eq!(finish_reason(Some("MAX_TOKENS"), true), "length");
        for r in [
            "SAFETY",
            "RECITATION",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
        ] {
            assert_eq!(finish_reason(Some(r), false), "content_filter", "{r}");
        }
        assert_eq!(
            finish_reason(Some("MALFORMED_FUNCTION_CALL"), false),
            "malformed_function_call"
        );
    }

    #[tokio::test]
    async fn complete_sends_key_header_and_returns_signed_tool_calls() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("generateContent")))
            .and(header(KEY_HEADER, "test-key"))
            .and(header("content-type", "application/json"))
            .and(body_partial_json(json!({
                "contents": [{"role": "user", "parts": [{"text": "time in Tokyo?"}]}],
                "generationConfig": {"maxOutputTokens": 256}
            })))
            .respond_with(ResponseTemplate::new(200).set_body_string(FUNCTION_CALL))
            .expect(1)
            .mount(&server)
            .await;
        let messages = user("time in Tokyo?");
        let params = CallParams::default();
        let c = gemini
            .complete(&call(MODEL, &messages, &[], &params))
            .await
            .unwrap();

        assert_eq!(c.text, None);
        assert_eq!(c.finish_reason, "tool_calls");
        assert_eq!(c.tool_calls.len(), 2);
        let first = &c.tool_calls[0];
        assert_eq!(first.name, "current_time");
        assert_eq!(first.arguments, json!({"timezone": "Asia/Tokyo"}));
        assert!(first.id.starts_with("call_"), "{}", first.id);
        assert!(
            first
                .signature
                .as_deref()
                .is_some_and(|s| s.starts_with("CiwBVKhc7nGJbv2s") && s.ends_with("nvM=")),
            "the signature is kept verbatim"
        );
        // Gemini signs only the first of parallel calls.
        assert_eq!(c.tool_calls[1].name, "weather");
        assert_eq!(c.tool_calls[1].signature, None);
        assert_ne!(c.tool_calls[0].id, c.tool_calls[1].id);
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 112,
                output_tokens: 38 + 86,
                cost_micro_usd: 0
            }
        );

        // The key went in the header only.
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests[0].url.query(), None);
        assert!(!requests[0].url.as_str().contains("test-key"));

        // Next turn: the signature goes back exactly as received, the result by name.
        let history = vec![
            ChatMessage::text(Role::User, "time in Tokyo?"),
            ChatMessage {
                role: Role::Assistant,
                content: c.text.clone(),
                tool_calls: c.tool_calls.clone(),
                tool_call_id: None,
                images: Vec::new(),
            },
            ChatMessage::tool_result(&c.tool_calls[0].id, "12:00"),
        ];
        let body = request_body(&call(MODEL, &history, &[], &params));
        assert_eq!(
            body["contents"][1]["parts"][0]["thoughtSignature"],
            json!(first.signature.as_deref().unwrap())
        );
        assert_eq!(
            body["contents"][2]["parts"][0]["functionResponse"]["name"],
            "current_time"
        );
    }

    #[tokio::test]
    async fn stream_delivers_deltas_and_takes_the_last_usage() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("streamGenerateContent")))
            .and(query_param("alt", "sse"))
            .and(header(KEY_HEADER, "test-key"))
            .respond_with(sse(STREAM_TEXT))
            .expect(1)
            .mount(&server)
            .await;
        let messages = user("When do you open on Sunday?");
        let params = CallParams::default();
        let sink = Collect::default();
        let c = gemini
            .stream(&call(MODEL, &messages, &[], &params), &sink)
            .await
            .unwrap();
        assert_eq!(
            *sink.0.lock().unwrap(),
            vec!["We open", " at 10:00 on Sundays and close", " at 18:00."]
        );
        assert_eq!(
            c.text.as_deref(),
            Some("We open at 10:00 on Sundays and close at 18:00.")
        );
        assert_eq!(c.finish_reason, "stop");
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 57,
                output_tokens: 14 + 330,
                cost_micro_usd: 0
            }
        );
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests[0].url.query(), Some("alt=sse"));
    }

    #[tokio::test]
    async fn stream_assembles_signed_function_calls() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("streamGenerateContent")))
            .respond_with(sse(STREAM_CALL))
            .mount(&server)
            .await;
        let messages = user("time in Tokyo?");
        let params = CallParams::default();
        let sink = Collect::default();
        let c = gemini
            .stream(&call(MODEL, &messages, &[], &params), &sink)
            .await
            .unwrap();
        assert_eq!(sink.joined(), "Let me look that up.");
        assert_eq!(c.finish_reason, "tool_calls");
        assert_eq!(c.tool_calls.len(), 1);
        assert_eq!(c.tool_calls[0].name, "current_time");
        assert_eq!(c.tool_calls[0].arguments["timezone"], "Asia/Tokyo");
        assert!(
            c.tool_calls[0]
                .signature
                .as_deref()
                .is_some_and(|s| s.starts_with("CiQBVKhc7lR0") && s.ends_with("B6Q=="))
        );
        assert_eq!(c.usage.output_tokens, 21 + 86);
    }

    #[tokio::test]
    async fn stream_ending_without_finish_reason_is_interrupted() {
        let (server, gemini) = backend().await;
        // The recorded transcript cut before its last chunk (the one with finishReason).
        let events: Vec<&str> = STREAM_TEXT.split_inclusive("\r\n\r\n").collect();
        assert_eq!(events.len(), 3);
        let truncated = events[..2].concat();
        wiremock::Mock::given(method("POST"))
            .respond_with(sse(&truncated))
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let sink = Collect::default();
        let e = gemini
            .stream(&call(MODEL, &messages, &[], &params), &sink)
            .await
            .unwrap_err();
        assert!(matches!(e, ProviderError::Interrupted(_)), "{e:?}");
        assert_eq!(sink.joined(), "We open at 10:00 on Sundays and close");
    }

    #[tokio::test]
    async fn malformed_stream_chunk_is_malformed() {
        let (server, gemini) = backend().await;
        let first = STREAM_TEXT.split_inclusive("\r\n\r\n").next().unwrap();
        let body = format!("{first}data: {{\"candidates\": [{{\"content\": \r\n\r\n");
        wiremock::Mock::given(method("POST"))
            .respond_with(sse(&body))
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let e = gemini
            .stream(&call(MODEL, &messages, &[], &params), &Collect::default())
            .await
            .unwrap_err();
        assert!(matches!(e, ProviderError::Malformed(_)), "{e:?}");
    }

    #[tokio::test]
    async fn error_inside_a_stream_is_mapped_by_its_code() {
        let (server, gemini) = backend().await;
        let body = format!("data: {}\r\n\r\n", ERROR_503.replace('\n', ""));
        wiremock::Mock::given(method("POST"))
            .respond_with(sse(&body))
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let e = gemini
            .stream(&call(MODEL, &messages, &[], &params), &Collect::default())
            .await
            .unwrap_err();
        assert_eq!(
            e,
            ProviderError::Server {
                status: 503,
                message: "The model is overloaded. Please try again later.".into()
            }
        );
    }

    #[tokio::test]
    async fn blocked_prompt_is_rejected_as_content_filter() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("generateContent")))
            .respond_with(ResponseTemplate::new(200).set_body_string(BLOCKED))
            .mount(&server)
            .await;
        let stream_body = format!("data: {}\r\n\r\n", BLOCKED.replace('\n', ""));
        wiremock::Mock::given(method("POST"))
            .and(path(endpoint("streamGenerateContent")))
            .respond_with(sse(&stream_body))
            .mount(&server)
            .await;
        let messages = user("something forbidden");
        let params = CallParams::default();
        let spec = call(MODEL, &messages, &[], &params);
        let complete = gemini.complete(&spec).await.unwrap_err();
        let streamed = gemini.stream(&spec, &Collect::default()).await.unwrap_err();
        for e in [complete, streamed] {
            let ProviderError::Rejected {
                status,
                reason,
                message,
            } = &e
            else {
                panic!("{e:?}")
            };
            assert_eq!(*status, 400);
            assert_eq!(*reason, RejectReason::ContentFilter);
            assert!(message.contains("PROHIBITED_CONTENT"), "{message}");
            assert!(!e.fails_over());
        }
    }

    #[tokio::test]
    async fn rate_limit_carries_retry_after() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "29")
                    .insert_header("content-type", "application/json; charset=UTF-8")
                    .set_body_string(ERROR_429),
            )
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let spec = call(MODEL, &messages, &[], &params);
        let expected = ProviderError::RateLimited {
            retry_after: Some(Duration::from_secs(29)),
        };
        assert_eq!(gemini.complete(&spec).await.unwrap_err(), expected);
        assert_eq!(
            gemini.stream(&spec, &Collect::default()).await.unwrap_err(),
            expected
        );
    }

    #[tokio::test]
    async fn unavailable_is_a_server_error_that_fails_over() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(503).set_body_string(ERROR_503))
            .mount(&server)
            .await;
        let messages = user("hi");
        let params = CallParams::default();
        let e = gemini
            .complete(&call(MODEL, &messages, &[], &params))
            .await
            .unwrap_err();
        assert_eq!(
            e,
            ProviderError::Server {
                status: 503,
                message: "The model is overloaded. Please try again later.".into()
            }
        );
        assert!(e.fails_over());
    }

    #[tokio::test]
    async fn health_check_lists_one_model_with_the_key_header() {
        let (server, gemini) = backend().await;
        wiremock::Mock::given(method("GET"))
            .and(path("/v1beta/models"))
            .and(query_param("pageSize", "1"))
            .and(header(KEY_HEADER, "test-key"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "models": [{"name": "models/gemini-2.5-flash"}],
                "nextPageToken": "Ch5tb2RlbHMvZ2VtaW5pLTIuNS1mbGFzaA=="
            })))
            .expect(1)
            .mount(&server)
            .await;
        gemini.health_check().await.unwrap();
    }

    #[test]
    fn model_ids_with_the_models_prefix_are_accepted() {
        hermes_net::install_crypto_provider();
        let g = Gemini::new(
            HttpClient::new().unwrap(),
            resolved(
                BackendKind::Gemini,
                "https://generativelanguage.googleapis.com/v1beta/",
            ),
        );
        for id in ["gemini-2.5-flash", "models/gemini-2.5-flash"] {
            assert_eq!(
                g.model_url(id, "generateContent"),
                "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
            );
        }
    }
}
