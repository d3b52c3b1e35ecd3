//! The lmbench summary reader on any text: an error or results, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = hookprof::import::lmbench::parse(text, "fuzz.txt");
});
