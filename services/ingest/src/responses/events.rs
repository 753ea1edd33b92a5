//! Streamed responses (`"stream": true`): a run's events as the Responses API's server-sent
//! events, each `event: <type>` with `data: {"type", "sequence_number", …}`, in the order the
//! official SDKs expect (docs/api.md, "Responses"):
//!
//! 1. `response.created`, `response.in_progress`;
//! 2. per tool the fleet runs, `response.output_item.added` and `.done` of its
//!    `function_call` when it starts, then of its `function_call_output` when it finishes
//!    (words the model said before asking for tools are a message item closed first);
//! 3. the answer's message: `response.output_item.added`, `response.content_part.added`,
//!    `response.output_text.delta` per piece, `response.output_text.done`,
//!    `response.content_part.done`, `response.output_item.done`;
//! 4. `response.completed` with the whole response (the same object a retrieve answers), or
//!    `response.failed`; a run that outlasts the wait ends the stream with `error`.
//!
//! Following the run's stream is [`crate::stream::follow`]'s; this only renders.

use std::collections::HashSet;

use hermes_cache::run_events::RunEvent;
use hermes_types::model::{ChatMessage, Outcome};
use serde_json::{Value, json};

use super::object::{self, Body, Head, Status};
use crate::stream::{Frame, Render, unseen};

/// The message item being streamed.
struct OpenMessage {
    id: String,
    index: usize,
    /// The text streamed into it.
    text: String,
}

/// Renders one response's stream.
pub struct Events {
    head: Head,
    sequence: u64,
    /// Output items announced so far.
    items: usize,
    /// Message items opened so far (their ids count them).
    messages: usize,
    open: Option<OpenMessage>,
    /// Tool calls and outputs already shown (`fc_…` / `fco_…` ids).
    shown: HashSet<String>,
    superseded: bool,
}

impl Events {
    pub fn new(head: Head) -> Self {
        Self {
            head,
            sequence: 0,
            items: 0,
            messages: 0,
            open: None,
            shown: HashSet::new(),
            superseded: false,
        }
    }

    fn frame(&mut self, kind: &'static str, mut data: Value) -> Frame {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        Frame {
            event: Some(kind),
            data: data.to_string(),
        }
    }

    /// A whole item at once: added, then done.
    fn item(&mut self, item: Value) -> Vec<Frame> {
        let index = self.items;
        self.items += 1;
        if let Some(id) = item["id"].as_str() {
            self.shown.insert(id.to_string());
        }
        vec![
            self.frame(
                "response.output_item.added",
                json!({ "output_index": index, "item": item }),
            ),
            self.frame(
                "response.output_item.done",
                json!({ "output_index": index, "item": item }),
            ),
        ]
    }

    fn open_message(&mut self) -> Vec<Frame> {
        let id = object::message_id(self.head.run, self.messages);
        let index = self.items;
        self.messages += 1;
        self.items += 1;
        let item = object::message_item(&id, "", Status::InProgress);
        let out = vec![
            self.frame(
                "response.output_item.added",
                json!({ "output_index": index, "item": item }),
            ),
            self.frame(
                "response.content_part.added",
                json!({ "item_id": id, "output_index": index, "content_index": 0,
                        "part": object::output_text("") }),
            ),
        ];
        self.open = Some(OpenMessage {
            id,
            index,
            text: String::new(),
        });
        out
    }

    fn text(&mut self, text: &str) -> Vec<Frame> {
        let mut out = Vec::new();
        if self.open.is_none() {
            out = self.open_message();
        }
        let Some(m) = self.open.as_mut() else {
            return out;
        };
        m.text.push_str(text);
        let (id, index) = (m.id.clone(), m.index);
        out.push(self.frame(
            "response.output_text.delta",
            json!({ "item_id": id, "output_index": index, "content_index": 0,
                    "delta": text, "logprobs": [] }),
        ));
        out
    }

    /// Close the open message with `text` as its whole text (what was streamed unless the
    /// final answer says otherwise).
    fn close_message(&mut self, text: Option<&str>) -> Vec<Frame> {
        let Some(m) = self.open.take() else {
            return Vec::new();
        };
        let text = text.unwrap_or(&m.text);
        let at = json!({ "item_id": m.id, "output_index": m.index, "content_index": 0 });
        let with = |extra: Value| {
            let mut v = at.clone();
            if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
                v.extend(extra);
            }
            v
        };
        vec![
            self.frame(
                "response.output_text.done",
                with(json!({ "text": text, "logprobs": [] })),
            ),
            self.frame(
                "response.content_part.done",
                with(json!({ "part": object::output_text(text) })),
            ),
            self.frame(
                "response.output_item.done",
                json!({ "output_index": m.index,
                        "item": object::message_item(&m.id, text, Status::Completed) }),
            ),
        ]
    }

    /// Items of the tool round that never reached the stream (its tool events were lost).
    fn unshown(&self, transcript: &[ChatMessage]) -> Vec<Value> {
        let mut items = object::output_items(self.head.run, transcript, "");
        items.retain(|i| {
            matches!(
                i["type"].as_str(),
                Some("function_call" | "function_call_output")
            ) && i["id"].as_str().is_some_and(|id| !self.shown.contains(id))
        });
        items
    }

    fn whole(&mut self, kind: &'static str, body: &Body) -> Frame {
        let response = object::response(&self.head, body);
        self.frame(kind, json!({ "response": response }))
    }
}

impl Render for Events {
    fn start(&mut self) -> Vec<Frame> {
        let body = Body::in_progress();
        vec![
            self.whole("response.created", &body),
            self.whole("response.in_progress", &body),
        ]
    }

    fn delta(&mut self, text: &str) -> Vec<Frame> {
        if text.is_empty() {
            return Vec::new();
        }
        self.text(text)
    }

    fn superseded(&mut self) {
        self.superseded = true;
    }

    fn tool(&mut self, event: RunEvent) -> Vec<Frame> {
        let item = match &event {
            RunEvent::ToolStarted {
                call_id,
                name,
                arguments,
                ..
            } => object::function_call_item(call_id, name, arguments),
            RunEvent::ToolFinished {
                call_id, output, ..
            } => object::function_call_output_item(call_id, output),
            _ => return Vec::new(),
        };
        if item["id"]
            .as_str()
            .is_some_and(|id| self.shown.contains(id))
        {
            // A redelivered tool round announces its tools again: shown once.
            return Vec::new();
        }
        let mut out = self.close_message(None);
        out.extend(self.item(item));
        out
    }

    fn end(&mut self, outcome: Outcome) -> Vec<Frame> {
        let (text, usage, transcript) = match outcome {
            Outcome::Answered {
                text,
                usage,
                transcript,
                ..
            } => (text, usage, transcript),
            Outcome::Failed { code, message } => {
                let mut out = self.close_message(None);
                out.push(self.whole("response.failed", &Body::failed(code.as_str(), &message)));
                return out;
            }
        };
        let mut out = Vec::new();
        let late = self.unshown(&transcript);
        if self.open.is_none() {
            for item in late {
                out.extend(self.item(item));
            }
            out.extend(self.open_message());
            out.extend(self.text_unseen(&text));
            out.extend(self.close_message(Some(&text)));
        } else {
            out.extend(self.text_unseen(&text));
            out.extend(self.close_message(Some(&text)));
            for item in late {
                out.extend(self.item(item));
            }
        }
        out.push(self.whole(
            "response.completed",
            &Body::completed(self.head.run, &transcript, &text, usage),
        ));
        out
    }

    fn timeout(&mut self, message: &str) -> Vec<Frame> {
        vec![self.frame(
            "error",
            json!({ "code": "run_timeout", "message": message, "param": null }),
        )]
    }
}

impl Events {
    /// The part of the final answer the open message has not streamed.
    fn text_unseen(&mut self, text: &str) -> Vec<Frame> {
        let streamed = self.open.as_ref().map(|m| m.text.as_str()).unwrap_or("");
        let rest = unseen(streamed, self.superseded, text);
        if rest.is_empty() {
            Vec::new()
        } else {
            self.text(&rest)
        }
    }
}

#[cfg(test)]
mod tests {
    use hermes_types::ids::{ResponseId, RunId};
    use hermes_types::model::{CallParams, FailureCode, Role, ToolCall, Usage};

    use super::*;

    fn events() -> Events {
        Events::new(Head {
            id: ResponseId::new(),
            run: RunId::new(),
            created_at: 1,
            model: "hermes".into(),
            instructions: None,
            previous: None,
            params: CallParams::default(),
            store: true,
        })
    }

    fn answered(text: &str, transcript: Vec<ChatMessage>) -> Outcome {
        Outcome::Answered {
            text: text.into(),
            model: "m".into(),
            usage: Usage {
                input_tokens: 1,
                output_tokens: 2,
                cost_micro_usd: 0,
            },
            finish_reason: "stop".into(),
            tools_used: Vec::new(),
            transcript,
        }
    }

    fn parsed(frames: &[Frame]) -> Vec<Value> {
        frames
            .iter()
            .map(|f| {
                let v: Value = serde_json::from_str(&f.data).unwrap();
                assert_eq!(f.event, v["type"].as_str(), "event name is the type");
                v
            })
            .collect()
    }

    fn types(v: &[Value]) -> Vec<&str> {
        v.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    fn tool_round() -> Vec<ChatMessage> {
        vec![
            ChatMessage {
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "current_time".into(),
                    arguments: json!({"timezone": "UTC"}),
                    signature: None,
                }],
                content: None,
                ..ChatMessage::text(Role::Assistant, "")
            },
            ChatMessage::tool_result("call_1", "noon"),
        ]
    }

    #[test]
    fn a_streamed_answer_comes_in_the_order_the_sdks_expect() {
        let mut e = events();
        let mut out = e.start();
        out.extend(e.delta("It is"));
        out.extend(e.delta(""));
        out.extend(e.delta(" noon."));
        out.extend(e.end(answered("It is noon.", Vec::new())));
        let v = parsed(&out);
        assert_eq!(
            types(&v),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (n, ev) in v.iter().enumerate() {
            assert_eq!(ev["sequence_number"], n as u64);
        }
        assert_eq!(v[0]["response"]["status"], "in_progress");
        let id = v[2]["item"]["id"].clone();
        assert!(
            v[3..9]
                .iter()
                .all(|ev| ev["item_id"] == id || ev["item"]["id"] == id)
        );
        assert_eq!(v[6]["text"], "It is noon.");
        let done = &v[9]["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(
            done["output"][0]["id"], id,
            "the completed output names the streamed item"
        );
        assert_eq!(done["output"][0]["content"][0]["text"], "It is noon.");
        assert_eq!(done["usage"]["total_tokens"], 3);
    }

    #[test]
    fn tools_appear_as_items_before_the_answer() {
        let mut e = events();
        let mut out = e.start();
        out.extend(e.delta("Let me check."));
        out.extend(e.tool(RunEvent::ToolStarted {
            round: 0,
            call_id: "call_1".into(),
            name: "current_time".into(),
            arguments: json!({"timezone": "UTC"}),
        }));
        out.extend(e.tool(RunEvent::ToolFinished {
            round: 0,
            call_id: "call_1".into(),
            name: "current_time".into(),
            output: "noon".into(),
            ok: true,
        }));
        out.extend(e.delta("It is noon."));
        let mut round = tool_round();
        round[0].content = Some("Let me check.".into());
        out.extend(e.end(answered("It is noon.", round)));
        let v = parsed(&out);
        let items: Vec<(&str, u64, &str)> = v
            .iter()
            .filter(|ev| ev["type"] == "response.output_item.done")
            .map(|ev| {
                (
                    ev["item"]["type"].as_str().unwrap(),
                    ev["output_index"].as_u64().unwrap(),
                    ev["item"]["id"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            items.iter().map(|i| (i.0, i.1)).collect::<Vec<_>>(),
            [
                ("message", 0),
                ("function_call", 1),
                ("function_call_output", 2),
                ("message", 3)
            ]
        );
        let call = v
            .iter()
            .find(|ev| {
                ev["type"] == "response.output_item.added" && ev["item"]["type"] == "function_call"
            })
            .unwrap();
        assert_eq!(call["item"]["arguments"], "{\"timezone\":\"UTC\"}");
        let last = v.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        let output = last["response"]["output"].as_array().unwrap();
        let ids: Vec<&str> = output.iter().map(|i| i["id"].as_str().unwrap()).collect();
        assert_eq!(ids, items.iter().map(|i| i.2).collect::<Vec<_>>());
        // The tools redelivered with the round are not shown twice.
        assert!(
            e.tool(RunEvent::ToolStarted {
                round: 0,
                call_id: "call_1".into(),
                name: "current_time".into(),
                arguments: json!({}),
            })
            .is_empty()
        );
    }

    #[test]
    fn tools_whose_events_were_lost_are_shown_from_the_outcome() {
        let mut e = events();
        let out = e.end(answered("It is noon.", tool_round()));
        let v = parsed(&out);
        let added: Vec<&str> = v
            .iter()
            .filter(|ev| ev["type"] == "response.output_item.added")
            .map(|ev| ev["item"]["type"].as_str().unwrap())
            .collect();
        assert_eq!(added, ["function_call", "function_call_output", "message"]);
        let text: String = v.iter().filter_map(|ev| ev["delta"].as_str()).collect();
        assert_eq!(text, "It is noon.");
    }

    #[test]
    fn a_failure_ends_with_response_failed_and_a_timeout_with_error() {
        let mut e = events();
        let mut out = e.start();
        out.extend(e.delta("Hal"));
        out.extend(e.end(Outcome::Failed {
            code: FailureCode::ProvidersUnavailable,
            message: "try later".into(),
        }));
        let v = parsed(&out);
        let last = v.last().unwrap();
        assert_eq!(last["type"], "response.failed");
        assert_eq!(last["response"]["status"], "failed");
        assert_eq!(last["response"]["error"]["code"], "providers_unavailable");
        assert_eq!(v[v.len() - 2]["type"], "response.output_item.done");

        let mut e = events();
        let v = parsed(&e.timeout("no answer within 30s"));
        assert_eq!(v[0]["type"], "error");
        assert_eq!(v[0]["code"], "run_timeout");
    }
}
