//! `Results::parse` on any text: an error or a results value, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(results) = hookprof::results::Results::parse(text, "fuzz.json") {
        // What parses must render: `report` does this with every file it reads.
        let _ = hookprof::results::Results::parse(&results.to_json(), "again.json")
            .expect("a parsed results file round-trips");
    }
});
