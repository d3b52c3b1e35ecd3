//! What keeps root's work from harming the host or leaking what it reads: every file it creates,
//! replaces or deletes (`owned_files`, `scratch`), every file it reads (`input`), the process
//! limits checked before any work (`limits`), whom the runner runs as (`credentials`) and the
//! one rule for secrets in what it records (`secrets`).
pub mod credentials;
pub mod input;
pub mod limits;
pub mod owned_files;
pub mod scratch;
pub mod secrets;
