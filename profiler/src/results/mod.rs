//! The results file: one JSON document per run (or per imported configuration). `compare`,
//! `history` and `report` read nothing else, so results from many runs and machines can be
//! pooled. `types` says what a file holds (`profile` its sampled side, `options` the run options that
//! change what ran), `rows` the arithmetic reports do on its attribution
//! rows, `schema` its JSON Schema, `load` reads and lists files, `destination` decides before a run where `-o` sends
//! them, and `write` writes them.
pub mod destination;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod load;
mod options;
mod profile;
pub mod rows;
pub mod schema;
mod types;
pub mod write;

pub use crate::machine::bpf_stats::OtherProgramRuns;
pub use destination::Destination;
pub use load::{files_named, json_files, ResultsError};
pub use options::{PolicyRecord, RunOptions};
pub use profile::*;
pub use types::*;
pub use write::{write_atomically, write_or_keep};
