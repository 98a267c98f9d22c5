//! OpenAI's OpenAPI description (the schemas we exchange, in `tests/data/openai-openapi.yaml`),
//! read once per test binary: what we send to OpenAI-compatible servers is validated against
//! its schemas.

use std::sync::OnceLock;

use serde_json::{Value, json};

const SPEC_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/openai-openapi.yaml"
);

/// The spec's `components`, parsed once per test binary.
pub fn spec_components() -> &'static Value {
    static COMPONENTS: OnceLock<Value> = OnceLock::new();
    COMPONENTS.get_or_init(|| {
        let text =
            std::fs::read_to_string(SPEC_PATH).unwrap_or_else(|e| panic!("{SPEC_PATH}: {e}"));
        let Lenient(mut spec) = serde_norway::from_str(&text).expect("the spec is valid YAML");
        assert!(
            spec["openapi"].as_str().unwrap_or("").starts_with("3.1"),
            "OpenAPI 3.1 (JSON Schema 2020-12) expected, got {}",
            spec["openapi"]
        );
        spec["components"].take()
    })
}

/// A JSON value read from YAML. The spec has integer bounds beyond 64 bits (`seed.minimum`),
/// which `serde_json::Value` refuses; this reader keeps them as floats (JSON Schema compares
/// numbers by value, so the bound means the same).
struct Lenient(Value);

impl<'de> serde::Deserialize<'de> for Lenient {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor).map(Lenient)
    }
}

struct LenientVisitor;

impl<'de> serde::de::Visitor<'de> for LenientVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(json!(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(json!(v))
    }
    #[expect(
        clippy::cast_precision_loss,
        reason = "only out-of-range schema bounds get here"
    )]
    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(json!(v as f64))
    }
    #[expect(
        clippy::cast_precision_loss,
        reason = "only out-of-range schema bounds get here"
    )]
    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(json!(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(json!(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        serde::Deserialize::deserialize(d).map(|Lenient(v)| v)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Lenient(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some((Lenient(key), Lenient(value))) = map.next_entry()? {
            let key = match key {
                Value::String(s) => s,
                other => other.to_string(),
            };
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// A JSON Schema 2020-12 validator for `#/components/schemas/{name}`, whose `$ref`s resolve
/// inside the same document because the spec's `components` ride along in it.
pub fn spec_validator(name: &str) -> jsonschema::Validator {
    let components = spec_components();
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/components/schemas/{name}"),
        "components": components,
    });
    jsonschema::draft202012::options()
        .build(&schema)
        .unwrap_or_else(|e| panic!("the spec's {name} is not a usable schema: {e}"))
}
