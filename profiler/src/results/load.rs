//! Reading results files: validated loading with errors that name the file and line, and the
//! listing of a directory's results files (compare's sides, history's series, baselines).
use std::{
    io::Read,
    path::{Path, PathBuf},
};

use anyhow::Context;
use serde::{
    de::{Error as _, SeqAccess, Visitor},
    Deserialize, Deserializer,
};

use super::{Results, SCHEMA_VERSION};

/// The largest results file read: a thousand times a quick-suite run's (about 250 KB), so a
/// device or an endless stream named by mistake ends in an error, not in memory exhaustion.
pub const MAX_BYTES: u64 = 256 << 20;

/// The most samples one list holds: ten times what `--samples` takes at most, so a forged list
/// of millions is refused where it passes the bound, not carried into the statistics.
pub const MAX_SAMPLES: usize = 1_000_000;

/// The most workloads one file holds: many times a full suite's (or an lmbench summary's 42),
/// so a forged file of thousands is refused, not analysed one workload at a time.
pub const MAX_WORKLOADS: usize = 1_000;

/// The most paths (attribution rows and sampled paths, all workloads together) one file
/// holds: a run of every hook, LSM function and syscall on the full suite writes tens of
/// thousands, so a forged file of millions is refused after its parse (linear), before any
/// view works on it.
pub const MAX_PATHS: usize = 200_000;

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// `error`, not `source`: the message shows it, and a source would print it twice.
    #[error("{path}: cannot read: {error}")]
    Io { path: String, error: std::io::Error },
    /// Not JSON, or a value that is not what the field holds.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{path}: schema_version {found} is not supported (this hookprof reads {SCHEMA_VERSION})"
    )]
    Schema { path: String, found: u64 },
    #[error(
        "{path}: more than {} MiB, larger than any results file: name a hookprof results file",
        MAX_BYTES >> 20
    )]
    TooLarge { path: String },
    #[error(
        "{path}: {found} paths (attribution rows and sampled paths), more than the {MAX_PATHS} \
         any run writes: name a hookprof results file"
    )]
    TooManyPaths { path: String, found: usize },
}

impl Results {
    /// Reads and validates a results file as a stream (at most [`MAX_BYTES`]); every failure
    /// names the file, and the line and column for what is in it.
    pub fn load(path: &Path) -> Result<Results, ResultsError> {
        let shown = path.display().to_string();
        let file = crate::safety::input::open_regular(path).map_err(|error| ResultsError::Io {
            path: shown.clone(),
            error,
        })?;
        // Past the bound already: refused before parsing (the read stays bounded for a file
        // that grows meanwhile).
        if file.metadata().is_ok_and(|m| m.len() > MAX_BYTES) {
            return Err(ResultsError::TooLarge { path: shown });
        }
        read(file, &shown, MAX_BYTES)
    }

    /// Results from text already in memory (a stored run): parsed from the string, several
    /// times faster than through a reader, which a thousand stored runs notice.
    pub fn parse(text: &str, shown: &str) -> Result<Results, ResultsError> {
        if text.len() as u64 > MAX_BYTES {
            return Err(ResultsError::TooLarge {
                path: shown.to_string(),
            });
        }
        explained(serde_json::from_str(text), shown)
    }
}

/// Parses results from `input`, refusing more than `max` bytes. The text is read whole and
/// parsed in memory (serde_json's reader takes a byte at a time: a thousand files took seconds
/// more), but input that cannot be JSON (a device of zeros, a binary) is refused at its first
/// byte that is not whitespace, before reading on.
fn read(input: impl Read, shown: &str, max: u64) -> Result<Results, ResultsError> {
    let io = |error| ResultsError::Io {
        path: shown.to_string(),
        error,
    };
    let mut input = input.take(max + 1);
    let mut bytes = Vec::new();
    let mut chunk = [0; 64 << 10];
    loop {
        let got = match input.read(&mut chunk) {
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        let read_before = bytes.len();
        bytes.extend_from_slice(&chunk[..got]);
        if let Some(at) = chunk[..got].iter().position(|b| !b" \t\n\r".contains(b)) {
            let first = read_before + at;
            if !b"{[\"-0123456789tfn".contains(&bytes[first]) {
                // Parsed up to that byte, it fails there, with the line and column.
                return explained(serde_json::from_slice(&bytes[..=first]), shown);
            }
            break;
        }
        if got == 0 {
            break;
        }
    }
    input.read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(ResultsError::TooLarge {
            path: shown.to_string(),
        });
    }
    // Valid UTF-8 checked once, not string by string; invalid text is parsed as bytes, for
    // the error's line and column.
    match std::str::from_utf8(&bytes) {
        Ok(text) => explained(serde_json::from_str(text), shown),
        Err(_) => explained(serde_json::from_slice(&bytes), shown),
    }
}

/// A parse's error as a [`ResultsError`] that names the file, line and column.
fn explained(parsed: serde_json::Result<Results>, shown: &str) -> Result<Results, ResultsError> {
    let parsed = parsed.map(|mut r| {
        r.read_old_shares();
        r
    });
    if let Ok(r) = &parsed {
        let found = paths_in(r);
        if found > MAX_PATHS {
            return Err(ResultsError::TooManyPaths {
                path: shown.to_string(),
                found,
            });
        }
    }
    parsed.map_err(|e| {
        let path = shown.to_string();
        if e.is_io() {
            // The io::Error itself, so its message is shown once, not wrapped in serde's.
            let error = match e.io_error_kind() {
                Some(kind) => std::io::Error::from(kind),
                None => std::io::Error::other(e),
            };
            return ResultsError::Io { path, error };
        }
        // serde_json's message ends with the position, which the error shows in front.
        let message = e.to_string();
        let message = message
            .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
            .unwrap_or(&message);
        if let Some(found) = message
            .strip_prefix(UNSUPPORTED_SCHEMA)
            .and_then(|v| v.parse().ok())
        {
            return ResultsError::Schema { path, found };
        }
        let message = if e.is_data() {
            message.to_string()
        } else {
            format!("not a hookprof results file: {message}")
        };
        ResultsError::Parse {
            path,
            line: e.line(),
            column: e.column(),
            message,
        }
    })
}

/// The attribution rows and sampled paths of every workload of `r`.
fn paths_in(r: &Results) -> usize {
    r.workloads
        .iter()
        .map(|w| w.attribution.len() + w.profile.as_ref().map_or(0, |p| p.paths.len()))
        .sum()
}

/// How [`supported_schema`] tells [`read`] the version it found.
const UNSUPPORTED_SCHEMA: &str = "unsupported schema_version ";

/// `schema_version`, refused at once unless it is this hookprof's: the rest of another
/// version's file may mean something else. It is the first field hookprof writes.
pub(super) fn supported_schema<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let found = u64::deserialize(d)?;
    if found == u64::from(SCHEMA_VERSION) {
        Ok(SCHEMA_VERSION)
    } else {
        Err(D::Error::custom(format!("{UNSUPPORTED_SCHEMA}{found}")))
    }
}

/// A list of samples, each finite and not negative (times, rates and counts), or the load
/// fails at the offending value's line and column.
pub(super) fn samples<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    struct Sample(f64);
    impl<'de> Deserialize<'de> for Sample {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Sample, D::Error> {
            let v = f64::deserialize(d)?;
            if v >= 0.0 {
                Ok(Sample(v))
            } else {
                Err(D::Error::custom(format!(
                    "sample {v} is negative (a sample is a time, rate or count)"
                )))
            }
        }
    }
    struct Samples;
    impl<'de> Visitor<'de> for Samples {
        type Value = Vec<f64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of samples")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f64>, A::Error> {
            let mut out = Vec::new();
            while let Some(Sample(v)) = seq.next_element()? {
                if out.len() == MAX_SAMPLES {
                    return Err(A::Error::custom(format!(
                        "more than {MAX_SAMPLES} samples in one list, more than any run takes"
                    )));
                }
                out.push(v);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Samples)
}

/// The workloads of a file, at most [`MAX_WORKLOADS`], or the load fails where the list passes
/// the bound.
pub(super) fn workloads<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<super::WorkloadResult>, D::Error> {
    struct Workloads;
    impl<'de> Visitor<'de> for Workloads {
        type Value = Vec<super::WorkloadResult>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of workloads")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(w) = seq.next_element()? {
                if out.len() == MAX_WORKLOADS {
                    return Err(A::Error::custom(format!(
                        "more than {MAX_WORKLOADS} workloads, more than any run or import writes"
                    )));
                }
                out.push(w);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Workloads)
}

/// The results files in `dir` (every `*.json` that is a file), sorted by name; none is no error.
pub fn json_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot read directory", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

/// A path given for results: the file itself, or the results files in the directory (at least
/// one).
pub fn files_named(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let files = json_files(path)?;
    anyhow::ensure!(
        !files.is_empty(),
        "{}: no results files (*.json)",
        path.display()
    );
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_written_before_options_were_typed_reads_the_same_and_writes_back_whole() {
        // A run's file from before the options were typed (nulls and all).
        let old = include_str!("../../../fuzz/seeds/results/seed-null_call.json");
        let r = Results::parse(old, "seed").unwrap();
        assert_eq!(r.options.hooks, ["default"]);
        assert_eq!(r.options.probes, ["syscalls"]);
        assert_eq!(r.options.samples, Some(2));
        assert_eq!(
            r.options.workloads.as_deref(),
            Some(&["null_call".to_string()][..])
        );
        assert_eq!((r.options.user.as_deref(), r.options.jobs), (None, None));
        assert_eq!(r.options.loop_overhead_ns, Some(0.3952));
        assert!(r.options.other.is_empty(), "{:?}", r.options.other);
        let again = Results::parse(&r.to_json(), "written").unwrap();
        assert_eq!(again, r);
    }

    fn with_environment(environment: serde_json::Value) -> Results {
        let text = serde_json::json!({
            "schema_version": SCHEMA_VERSION,
            "label": "l",
            "complete": true,
            "source": "hookprof",
            "environment": environment,
            "workloads": [],
        })
        .to_string();
        Results::parse(&text, "r.json").unwrap()
    }

    #[test]
    fn cpus_online_and_allowed_are_recorded_and_old_files_cpus_is_the_allowed_count() {
        let e = with_environment(serde_json::json!({
            "kernel_release": "6.1.0", "hookprof_version": "0.1.0",
            "cpus_online": 4, "cpus_allowed": 1,
        }))
        .environment;
        assert_eq!((e.cpus_online, e.cpus_allowed), (4, 1));
        // Before cpus_online, `cpus` was the count of CPUs the process could use.
        let old = with_environment(serde_json::json!({
            "kernel_release": "6.1.0", "hookprof_version": "0.1.0", "cpus": 2,
        }))
        .environment;
        assert_eq!((old.cpus_online, old.cpus_allowed), (0, 2));
        // Written back, the old file's count keeps its new name.
        let json: serde_json::Value = serde_json::to_value(&old).unwrap();
        assert_eq!(json["cpus_allowed"], 2);
        assert!(json.get("cpus").is_none(), "{json}");
    }

    /// A file with one workload whose clean samples are `samples`, as text, on line 4.
    fn with_samples(samples: &str) -> String {
        format!(
            "{{\"schema_version\": 1, \"label\": \"l\", \"complete\": true,\n\
             \"source\": \"hookprof\", \"environment\": {{\"kernel_release\": \"6.1\",\n\
             \"hookprof_version\": \"0.1\"}}, \"workloads\": [{{\"name\": \"w\",\n\
             \"family\": \"latency\", \"unit\": \"us\", \"clean\": [1.5, {samples}]}}]}}"
        )
    }

    #[test]
    fn a_sample_that_is_not_a_finite_non_negative_number_is_refused_where_it_is() {
        assert_eq!(
            Results::parse(&with_samples("2"), "r.json")
                .unwrap()
                .workloads[0]
                .clean,
            [1.5, 2.0]
        );
        for (sample, says) in [
            ("\"NaN\"", "invalid type: string \"NaN\""),
            ("-350.8", "sample -350.8 is negative"),
            ("1e400", "number out of range"),
            ("null", "invalid type: null"),
        ] {
            let err = Results::parse(&with_samples(sample), "r.json").unwrap_err();
            let ResultsError::Parse { line, column, .. } = err else {
                panic!("{sample}: {err}");
            };
            let text = err.to_string();
            assert_eq!(line, 4, "{sample}: {text}");
            // The column points at the sample, after `"clean": [1.5, `.
            let at = with_samples(sample)
                .lines()
                .nth(3)
                .unwrap()
                .find(sample)
                .unwrap();
            assert!(
                (at..=at + sample.len() + 1).contains(&column),
                "{sample}: {text}"
            );
            assert!(text.starts_with(&format!("r.json:4:{column}: ")), "{text}");
            assert!(text.contains(says), "{sample}: {text}");
            assert!(!text.contains("at line"), "the position twice: {text}");
        }
    }

    #[test]
    fn another_schema_is_named_and_endless_input_ends() {
        let other = with_samples("2").replace("\"schema_version\": 1", "\"schema_version\": 99");
        let err = Results::parse(&other, "r.json").unwrap_err();
        assert!(
            matches!(err, ResultsError::Schema { found: 99, .. }),
            "{err}"
        );
        // Whitespace forever: cut at the cap.
        let err = read(std::io::repeat(b' '), "endless", 1 << 16).unwrap_err();
        assert!(matches!(err, ResultsError::TooLarge { .. }), "{err}");
        // Zeros forever (/dev/zero): refused at the first byte.
        let err = read(std::io::repeat(0), "zeros", MAX_BYTES).unwrap_err();
        assert!(err.to_string().starts_with("zeros:1:1: "), "{err}");
        // After whitespace too, where it is, without reading on to the cap.
        let endless = std::io::Read::chain(&b"\n  "[..], std::io::repeat(0));
        let err = read(endless, "zeros", MAX_BYTES).unwrap_err();
        assert!(err.to_string().starts_with("zeros:2:3: "), "{err}");
    }

    #[test]
    fn a_file_read_whole_parses_as_the_same_text_in_memory_and_its_errors_keep_their_place() {
        let text = with_samples("2");
        let from_reader = read(text.as_bytes(), "r.json", MAX_BYTES).unwrap();
        assert_eq!(from_reader, Results::parse(&text, "r.json").unwrap());
        let err = read(with_samples("-1").as_bytes(), "r.json", MAX_BYTES).unwrap_err();
        assert!(err.to_string().starts_with("r.json:4:"), "{err}");
        // Text that is not UTF-8 is parsed as bytes, for the place: the workload's name, line 3.
        let mut not_utf8 = text.into_bytes();
        let name = not_utf8.windows(3).position(|w| w == b"\"w\"").unwrap();
        not_utf8[name + 1] = 0xff;
        let err = read(&not_utf8[..], "r.json", MAX_BYTES).unwrap_err();
        assert!(err.to_string().starts_with("r.json:3:"), "{err}");
    }
}
