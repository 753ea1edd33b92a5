//! JSON schemas rewritten into the OpenAPI 3.0 subset Gemini's `Schema` accepts, for tool
//! parameters and structured output alike.

use serde_json::{Map, Value, json};

/// The `parameters` of a function declaration, or `None` when the tool takes no arguments:
/// Gemini refuses an OBJECT schema whose `properties` is empty.
pub(super) fn tool_parameters(schema: &Value) -> Option<Value> {
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
pub(super) fn clean_schema(schema: &Value) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
