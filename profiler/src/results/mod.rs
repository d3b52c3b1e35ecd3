//! The results file: one JSON document per run (or per imported configuration). `compare`,
//! `history` and `report` read nothing else, so results from many runs and machines can be
//! pooled. `types` says what a file holds, `load` reads and lists files, `write` writes them,
//! `rows` is the arithmetic reports do on attribution rows.
pub mod load;
pub mod rows;
mod types;
pub mod write;

pub use load::{files_named, json_files, ResultsError};
pub use types::*;
pub use write::{check_writable, write_atomically};
