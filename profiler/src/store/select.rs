//! Store selectors, where `compare`, `history` and `runs` take files: `KEY:VALUE` terms joined
//! by commas, all of which a run must match (`label:nightly,kernel:6.12*,last:5`). A path
//! that exists is always the file or directory it names.
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::{block_on, location::StoreArgs, open_for_reading};
use crate::results::{files_named, Results};

/// What the help and errors list.
pub const SYNTAX: &str = "label:L, kernel:RELEASE, machine:ID, host:NAME, lsm:LIST, \
command:run|stat|ab|add, version:V, meta:KEY=VALUE, baseline:NAME, run:ID, older-than:AGE \
(30d, 12h, 2weeks: started that long ago or more), last:N (values take * and ?; terms joined by \
commas must all match)";

/// A column a term matches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Column {
    Label,
    Kernel,
    Machine,
    Host,
    Lsm,
    Command,
    Version,
}

impl Column {
    pub fn name(self) -> &'static str {
        match self {
            Column::Label => "label",
            Column::Kernel => "kernel_release",
            Column::Machine => "machine_id",
            Column::Host => "hostname",
            Column::Lsm => "lsm",
            Column::Command => "command",
            Column::Version => "hookprof_version",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// The column matches the pattern.
    Column(Column, String),
    /// The run id starts with this.
    Run(String),
    /// The run has this meta key with a value matching the pattern.
    Meta(String, String),
    /// The run is in this baseline.
    Baseline(String),
    /// The run started at least this long before now.
    OlderThan(std::time::Duration),
}

/// The runs a selector picks: all its terms hold; with `last`, only the newest N of those.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    pub terms: Vec<Term>,
    pub last: Option<u32>,
}

impl Selector {
    /// Parses `label:x,last:3`; None when the first term names no selector key (a path).
    pub fn parse(text: &str) -> Option<Result<Selector>> {
        let (key, _) = text.split_once(':')?;
        key_known(key).then(|| parse_terms(text))
    }
}

fn key_known(key: &str) -> bool {
    matches!(
        key,
        "label"
            | "kernel"
            | "machine"
            | "host"
            | "lsm"
            | "command"
            | "version"
            | "meta"
            | "baseline"
            | "run"
            | "older-than"
            | "last"
    )
}

fn parse_terms(text: &str) -> Result<Selector> {
    let mut selector = Selector::default();
    for term in text.split(',') {
        let Some((key, value)) = term.split_once(':') else {
            bail!("selector {text}: '{term}' is not KEY:VALUE; terms are {SYNTAX}");
        };
        anyhow::ensure!(
            !value.is_empty(),
            "selector {text}: {key}: gives no value; terms are {SYNTAX}"
        );
        let column = |c| Term::Column(c, value.to_string());
        let parsed = match key {
            "label" => column(Column::Label),
            "kernel" => column(Column::Kernel),
            "machine" => column(Column::Machine),
            "host" => column(Column::Host),
            "lsm" => column(Column::Lsm),
            "command" => column(Column::Command),
            "version" => column(Column::Version),
            "run" => Term::Run(value.to_string()),
            "baseline" => Term::Baseline(value.to_string()),
            "older-than" => Term::OlderThan(humantime::parse_duration(value).map_err(|e| {
                anyhow::anyhow!("selector {text}: older-than:{value}: {e}; give an age, e.g. 30d")
            })?),
            "meta" => match value.split_once('=') {
                Some((k, v)) if !k.is_empty() => Term::Meta(k.to_string(), v.to_string()),
                _ => bail!("selector {text}: meta:{value}: give meta:KEY=VALUE"),
            },
            "last" => {
                let n = value.parse().ok().filter(|&n: &u32| n > 0).ok_or_else(|| {
                    anyhow::anyhow!("selector {text}: last:{value}: give a count, e.g. last:5")
                })?;
                anyhow::ensure!(
                    selector.last.replace(n).is_none(),
                    "selector {text}: last: given twice"
                );
                continue;
            }
            other => bail!("selector {text}: unknown key '{other}'; terms are {SYNTAX}"),
        };
        selector.terms.push(parsed);
    }
    Ok(selector)
}

/// The results `spec` names, each with what it is called in reports: an existing file or
/// directory as always, else the stored runs a selector picks (at least one), named
/// `run:ID`.
pub fn load(spec: &Path, store: &StoreArgs) -> Result<Vec<(PathBuf, Results)>> {
    let selector = match spec
        .to_str()
        .filter(|_| !spec.exists())
        .and_then(Selector::parse)
    {
        Some(selector) => selector?,
        None => return load_files(&files_named(spec)?),
    };
    let runs = select(&selector, store)?;
    anyhow::ensure!(
        !runs.is_empty(),
        "no stored run matches {} (`hookprof runs` lists them)",
        spec.display()
    );
    Ok(runs
        .into_iter()
        .map(|(id, r)| (PathBuf::from(format!("run:{}", short(&id))), r))
        .collect())
}

/// The results `files`, in that order, parsed on every CPU the process may use (a thousand
/// files are seconds of parsing on one); the error is the first failing file's, in that order.
fn load_files(files: &[PathBuf]) -> Result<Vec<(PathBuf, Results)>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_thread = files.len().div_ceil(threads).max(1);
    let parts: Vec<Result<Vec<(PathBuf, Results)>>> = std::thread::scope(|scope| {
        let parsing: Vec<_> = files
            .chunks(per_thread)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|f| Ok((f.clone(), Results::load(f)?)))
                        .collect()
                })
            })
            .collect();
        parsing
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut loaded = Vec::with_capacity(files.len());
    for part in parts {
        loaded.extend(part?);
    }
    Ok(loaded)
}

/// The stored runs `selector` picks, oldest first, with their ids.
pub fn select(selector: &Selector, store: &StoreArgs) -> Result<Vec<(String, Results)>> {
    let url = store.required()?;
    block_on(async {
        let started = std::time::Instant::now();
        let mut db = open_for_reading(&url)
            .await
            .map_err(|e| e.context(format!("results store {}", url.shown())))?;
        let runs = db.select(selector).await?;
        super::timing("read", started, runs.len());
        Ok(runs)
    })
}

/// A run id as shown: enough of it to select the run by.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_terms_joined_by_commas() {
        let s = Selector::parse("label:nightly,kernel:6.12*,meta:commit=ab*,last:5")
            .unwrap()
            .unwrap();
        assert_eq!(
            s.terms,
            [
                Term::Column(Column::Label, "nightly".into()),
                Term::Column(Column::Kernel, "6.12*".into()),
                Term::Meta("commit".into(), "ab*".into()),
            ]
        );
        assert_eq!(s.last, Some(5));
        assert_eq!(
            Selector::parse("baseline:main").unwrap().unwrap().terms,
            [Term::Baseline("main".into())]
        );
        assert_eq!(
            Selector::parse("older-than:30d,label:ci")
                .unwrap()
                .unwrap()
                .terms,
            [
                Term::OlderThan(std::time::Duration::from_secs(30 * 86400)),
                Term::Column(Column::Label, "ci".into())
            ]
        );
    }

    #[test]
    fn paths_are_no_selectors_and_bad_terms_say_what_to_write() {
        for path in ["results/a.json", "a.json", "c:/x", "./label:x"] {
            assert!(Selector::parse(path).is_none(), "{path}");
        }
        for (bad, says) in [
            ("label:x,nope:1", "unknown key 'nope'"),
            ("label:x,y", "not KEY:VALUE"),
            ("last:0", "give a count"),
            ("last:2,last:3", "given twice"),
            ("meta:commit", "meta:KEY=VALUE"),
            ("label:", "gives no value"),
            ("older-than:30", "give an age"),
            ("older-than:soon", "give an age"),
        ] {
            let e = Selector::parse(bad).unwrap().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
