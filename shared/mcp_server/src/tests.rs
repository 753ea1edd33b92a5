//! The core's answers to every kind of message, over a tool set of one echoing tool.

use super::*;

const INFO: ServerInfo = ServerInfo {
    name: "test",
    title: "Test",
    version: "0",
    instructions: "call echo",
};

/// `echo` gives back its arguments; `no` refuses.
struct Echo;

impl ToolSet for Echo {
    fn list(&self) -> Vec<Value> {
        vec![json!({ "name": "echo" }), json!({ "name": "no" })]
    }

    async fn call(&self, name: &str, args: Value) -> Result<Value, CallError> {
        match name {
            "echo" => Ok(args),
            "no" => Err(CallError::Refused(Refusal {
                code: "INVALID_ARGUMENT",
                message: "never".into(),
                details: Map::new(),
            })),
            other => Err(CallError::UnknownTool(other.into())),
        }
    }
}

async fn answer(message: Value) -> Reply {
    handle(&INFO, &Echo, message).await
}

fn body(reply: Reply) -> (Value, bool) {
    match reply {
        Reply::Message { body, malformed } => (body, malformed),
        Reply::Nothing => panic!("expected an answer"),
    }
}

#[test]
fn a_served_version_is_echoed_and_another_gets_the_newest() {
    for v in PROTOCOL_VERSIONS {
        assert_eq!(
            initialize(&INFO, &json!({ "protocolVersion": v }))["protocolVersion"],
            v
        );
    }
    assert_eq!(
        initialize(&INFO, &json!({ "protocolVersion": "2099-01-01" }))["protocolVersion"],
        PROTOCOL_VERSIONS[0]
    );
    assert_eq!(
        initialize(&INFO, &Value::Null)["protocolVersion"],
        PROTOCOL_VERSIONS[0]
    );
}

#[tokio::test]
async fn malformed_messages_are_invalid_requests() {
    for (message, id) in [
        (
            json!([{ "jsonrpc": "2.0", "id": 1, "method": "ping" }]),
            Value::Null,
        ),
        (json!("ping"), Value::Null),
        (
            json!({ "jsonrpc": "1.0", "id": 1, "method": "ping" }),
            json!(1),
        ),
        (
            json!({ "jsonrpc": "2.0", "id": 1.5, "method": "ping" }),
            Value::Null,
        ),
        (
            json!({ "jsonrpc": "2.0", "id": 2, "method": "ping", "params": [] }),
            json!(2),
        ),
        (json!({ "jsonrpc": "2.0", "id": "x" }), json!("x")),
    ] {
        let (body, malformed) = body(answer(message.clone()).await);
        assert!(malformed, "{message}");
        assert_eq!(body["error"]["code"], -32600, "{message}");
        assert_eq!(body["id"], id, "{message}");
    }
    let (body, malformed) = body(parse(b"{nope").unwrap_err());
    assert!(malformed);
    assert_eq!(body["error"]["code"], -32700);
}

#[tokio::test]
async fn notifications_and_client_responses_get_no_answer() {
    let n = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    assert_eq!(answer(n).await, Reply::Nothing);
    let r = json!({ "jsonrpc": "2.0", "id": 7, "result": {} });
    assert_eq!(answer(r).await, Reply::Nothing);
}

#[tokio::test]
async fn methods_are_served_and_others_not_found() {
    let (b, malformed) = body(answer(json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" })).await);
    assert!(!malformed);
    assert_eq!(b, json!({ "jsonrpc": "2.0", "id": 1, "result": {} }));
    let (b, _) = body(answer(json!({ "jsonrpc": "2.0", "id": "l", "method": "tools/list" })).await);
    assert_eq!(b["result"]["tools"][0]["name"], "echo");
    let (b, malformed) =
        body(answer(json!({ "jsonrpc": "2.0", "id": 3, "method": "resources/list" })).await);
    assert!(!malformed);
    assert_eq!(b["error"]["code"], -32601);
    let (b, _) = body(
        answer(json!({ "jsonrpc": "2.0", "id": 4, "method": "initialize",
            "params": { "protocolVersion": "2025-03-26" } }))
        .await,
    );
    assert_eq!(b["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(b["result"]["serverInfo"]["name"], "test");
}

#[tokio::test]
async fn tool_calls_answer_results_refusals_and_param_errors() {
    let call = |params: Value| json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params });
    let (b, _) = body(answer(call(json!({ "name": "echo", "arguments": { "a": 1 } }))).await);
    assert_eq!(b["result"]["isError"], false);
    assert_eq!(b["result"]["structuredContent"], json!({ "a": 1 }));
    assert_eq!(b["result"]["content"][0]["text"], "{\"a\":1}");
    let (b, _) = body(answer(call(json!({ "name": "no" }))).await);
    assert_eq!(b["result"]["isError"], true);
    assert_eq!(
        b["result"]["structuredContent"]["error"],
        json!({ "code": "INVALID_ARGUMENT", "message": "never" })
    );
    for params in [
        json!({ "name": "nope" }),
        json!({ "arguments": {} }),
        json!({ "name": "echo", "arguments": [1] }),
    ] {
        let (b, malformed) = body(answer(call(params.clone())).await);
        assert!(!malformed);
        assert_eq!(b["error"]["code"], -32602, "{params}");
    }
}

#[test]
fn an_integer_argument_is_absent_within_its_bounds_or_refused_with_a_sentence() {
    let args = json!({"limit": 5, "none": null, "big": 500, "text": "5"});
    let args = args.as_object().unwrap();
    assert_eq!(int_argument(args, "limit", 1, 100), Ok(Some(5)));
    assert_eq!(int_argument(args, "none", 1, 100), Ok(None));
    assert_eq!(int_argument(args, "absent", 1, 100), Ok(None));
    assert_eq!(
        int_argument(args, "big", 1, 100),
        Err("big must be an integer from 1 to 100".into())
    );
    assert!(int_argument(args, "text", 1, 100).is_err());
}
