//! The results document's JSON Schema, derived from the types a file is read into (schemars),
//! so other tools can read results without reading Rust. The manual publishes it as
//! `docs/src/results-schema.json`; a test keeps that file equal to this.
use super::{Results, SCHEMA_VERSION};

/// The schema (draft 2020-12) of one results file, as `hookprof __schema` prints it.
pub fn json_schema() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(Results))
        .expect("a derived schema serialises to JSON");
    schema["title"] = "hookprof results".into();
    // The loader accepts this version only (ResultsError names another).
    schema["properties"]["schema_version"]["const"] = SCHEMA_VERSION.into();
    schema
}
