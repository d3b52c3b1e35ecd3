//! The results store on the running kernel, with the embedded SQLite and a real PostgreSQL
//! server (started here from Debian's package): concurrent writers, selectors against the
//! same files, and a server that goes away mid-run. Every command runs with its own data
//! directory, so nothing is written into the user's.
use std::{
    path::PathBuf,
    process::{Command, Output},
    time::Duration,
};

use hookprof::{
    results::Results,
    store::{select::Selector, StoreArgs},
};
use hookprof_tests::{hookprof_bin, one_at_a_time, postgres::Postgres, require_root, STORE_ENV};
use serde_json::Value;

/// A data directory (default store, spool) of the test's own.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn sqlite(&self) -> String {
        format!("sqlite://{}", self.path("store.db").display())
    }

    fn spooled(&self) -> Vec<PathBuf> {
        hookprof::results::json_files(&self.path("data/hookprof/spool")).unwrap_or_default()
    }

    /// hookprof with this data directory and no store from the environment.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(hookprof_bin());
        cmd.args(args)
            .env("XDG_DATA_HOME", self.path("data"))
            .env_remove(STORE_ENV)
            .env_remove("HOOKPROF_SPOOL");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run hookprof")
    }

    /// Runs hookprof and asserts it exited 0.
    fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "hookprof {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `hookprof runs --store URL --format json`.
    fn runs(&self, store: &str) -> Vec<Value> {
        let out = self.ok(&["runs", "--store", store, "--format", "json"]);
        serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("runs JSON")
    }
}

/// A short clean run of null_call: no probes, one round of two samples.
const SHORT: &[&str] = &[
    "run",
    "--quiet",
    "--probes",
    "none",
    "--workloads",
    "null_call",
    "--rounds",
    "1",
    "--samples",
    "2",
];

fn labels(runs: &[Value]) -> Vec<String> {
    let mut labels: Vec<String> = runs
        .iter()
        .map(|r| r["label"].as_str().expect("label").to_string())
        .collect();
    labels.sort();
    labels
}

/// 4 writers x 5 runs into `store` at once: each run stored once, none spooled.
fn four_writers_five_runs_each(home: &Home, store: &str) {
    std::thread::scope(|s| {
        for writer in 0..4 {
            s.spawn(move || {
                for run in 0..5 {
                    let label = format!("w{writer}-r{run}");
                    home.ok(&[SHORT, &["--label", &label, "--store", store]].concat());
                }
            });
        }
    });
    let runs = home.runs(store);
    let mut expected: Vec<String> = (0..4)
        .flat_map(|w| (0..5).map(move |r| format!("w{w}-r{r}")))
        .collect();
    expected.sort();
    assert_eq!(labels(&runs), expected, "{store}: {runs:#?}");
    let mut ids: Vec<&str> = runs.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 20, "{store}: run ids repeat");
    assert!(home.spooled().is_empty(), "{store}: {:?}", home.spooled());
}

#[test]
fn four_concurrent_writers_store_each_of_their_runs_exactly_once_in_sqlite_and_postgres() {
    let _serial = one_at_a_time();
    let home = Home::new();
    four_writers_five_runs_each(&home, &home.sqlite());
    let pg = Postgres::start();
    four_writers_five_runs_each(&home, &pg.url());
}

#[test]
fn the_default_store_is_sqlite_in_the_data_directory_and_no_store_records_nothing() {
    let _serial = one_at_a_time();
    let home = Home::new();
    home.ok(&[SHORT, &["--label", "default", "--meta", "commit=abc123"]].concat());
    assert!(home.path("data/hookprof/store.db").is_file());
    home.ok(&[SHORT, &["--label", "unrecorded", "--no-store"]].concat());
    let db = format!("sqlite://{}", home.path("data/hookprof/store.db").display());
    let runs = home.runs(&db);
    assert_eq!(labels(&runs), ["default"]);
    assert_eq!(runs[0]["command"], "run");
    // Selected by its meta, and listed as a table.
    let table = home.ok(&["runs", "meta:commit=abc*", "--store", &db]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("default") && table.contains("1 run(s)"),
        "{table}"
    );
    let none = home.ok(&["runs", "meta:commit=zzz", "--store", &db]);
    assert!(String::from_utf8_lossy(&none.stdout).contains("0 run(s)"));
    // A store that is no database is refused before anything runs.
    let out = home.run(&[SHORT, &["--store", "mysql://h/db"]].concat());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sqlite://PATH or postgres://"), "{stderr}");
}

/// The verdicts of `compare OLD NEW --format json`.
fn compare(home: &Home, args: &[&str]) -> Value {
    let out = home.run(&[&["compare", "--format", "json"], args].concat());
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "compare {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("comparison JSON")
}

/// `history --format json` with each point's file name left out (a file's name, a run's id).
fn history(home: &Home, args: &[&str]) -> Value {
    let out = home.ok(&[&["history", "--format", "json"], args].concat());
    let mut history: Value = serde_json::from_slice(&out.stdout).expect("history JSON");
    for point in history["points"].as_array_mut().expect("points") {
        point["file"] = Value::Null;
    }
    history
}

fn verdicts(comparison: &Value) -> Vec<(String, String)> {
    comparison["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .map(|w| (w["name"].to_string(), w["verdict"].to_string()))
        .collect()
}

#[test]
fn history_and_compare_over_store_selectors_judge_as_over_the_same_files() {
    // Every test here runs the profiler, this one's verdict would take another's load (a
    // baseline run at 2x beside four concurrent writers made +205% read p = 0.050).
    let _serial = one_at_a_time();
    require_root(); // --inject syscall: loads a BPF program
    let home = Home::new();
    let sqlite = home.sqlite();
    let dir = |side: &str| {
        let d = home.path(side);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let (base, slow) = (dir("base"), dir("slow"));
    let baselines = home.path("baselines");
    // Three runs as they were, then three with every getppid 2 us slower.
    for (side, inject) in [
        (&base, "syscall:getppid=0"),
        (&slow, "syscall:getppid=2000"),
    ] {
        let label = side.file_name().unwrap().to_str().unwrap();
        for i in 0..3 {
            let file = side.join(format!("{i}.json"));
            let mut args = vec!["--label", label, "--store", &sqlite, "--inject", inject];
            args.extend(["--rounds", "2", "-o", file.to_str().unwrap()]);
            if label == "base" {
                args.extend(["--append-baseline", "main", "--baseline-dir"]);
                args.push(baselines.to_str().unwrap());
            }
            home.ok(&[&SHORT[..SHORT.len() - 4], &args[..]].concat());
            std::thread::sleep(Duration::from_millis(1100)); // distinct start times
        }
    }
    let (base_s, slow_s) = (base.to_str().unwrap(), slow.to_str().unwrap());
    let by_files = compare(&home, &[base_s, slow_s]);
    let by_labels = compare(&home, &["label:base", "label:slow", "--store", &sqlite]);
    assert_eq!(verdicts(&by_files)[0].1, "\"regressed\"", "{by_files:#}");
    assert_eq!(by_labels, by_files);
    // The store's baseline, when there is no baseline directory of that name.
    let empty = home.path("no-baselines");
    let by_baseline = compare(
        &home,
        &["--baseline", "main", "label:slow", "--store", &sqlite],
    );
    let args = ["--baseline-dir", empty.to_str().unwrap()];
    let by_store_baseline = compare(
        &home,
        &[
            &["--baseline", "main", slow_s, "--store", &sqlite][..],
            &args,
        ]
        .concat(),
    );
    assert_eq!(verdicts(&by_baseline), verdicts(&by_files));
    assert_eq!(by_store_baseline, by_files);
    let files_history = history(&home, &[base_s, slow_s]);
    assert_eq!(
        history(&home, &["kernel:*,last:6", "--store", &sqlite]),
        files_history
    );
    assert_eq!(
        history(&home, &["label:base", "label:slow", "--store", &sqlite]),
        files_history
    );

    // The same files added to PostgreSQL: the same answers, and a second add stores nothing.
    let pg = Postgres::start();
    let url = pg.url();
    for _ in 0..2 {
        home.ok(&["runs", "--store", &url, "--add", base_s, slow_s]);
    }
    assert_eq!(home.runs(&url).len(), 6);
    assert_eq!(
        compare(&home, &["label:base", "label:slow", "--store", &url]),
        by_files
    );
    assert_eq!(
        history(&home, &["label:b*", "label:s?ow", "--store", &url]),
        files_history
    );
}

#[test]
fn a_server_stopped_mid_run_leaves_the_run_spooled_and_the_next_call_pushes_it_once() {
    let _serial = one_at_a_time();
    let home = Home::new();
    let mut pg = Postgres::start();
    let url = pg.url();
    let file = home.path("r.json");
    // Samples of 400 ms: the run lasts seconds, and the server stops during it.
    let args = [
        SHORT,
        &["--label", "mid", "--store", &url, "--min-sample-ms", "400"],
        &["-o", file.to_str().unwrap()],
    ]
    .concat();
    let run = home
        .command(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start hookprof run");
    std::thread::sleep(Duration::from_millis(300));
    pg.stop();
    let out = run.wait_with_output().expect("wait for the run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(stderr.contains("spooled"), "{stderr}");
    let written = Results::load(&file).expect("the -o file is written");
    assert_eq!(home.spooled().len(), 1, "{stderr}");

    pg.resume();
    // The next call pushes it; the one after finds nothing more to push.
    for _ in 0..2 {
        let runs = home.runs(&url);
        assert_eq!(labels(&runs), ["mid"]);
        assert!(home.spooled().is_empty());
    }
    // What was stored loads back as the file it was written to.
    let store = StoreArgs {
        store: Some(url.clone()),
    };
    let selector = Selector::parse("label:mid").unwrap().unwrap();
    let stored = hookprof::store::select::select(&selector, &store).expect("select");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].1, written);
}

/// Copies of the results `seed` as `(label, days ago)` runs, written into `dir`.
fn aged_copies(seed: &Value, dir: &std::path::Path, runs: &[(&str, u64)]) {
    std::fs::create_dir_all(dir).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for (label, days) in runs {
        let mut run = seed.clone();
        run["label"] = Value::from(*label);
        run["environment"]["started_at"] = Value::from(now - days * 86400);
        std::fs::write(dir.join(format!("{label}.json")), run.to_string()).unwrap();
    }
}

/// `runs --prune` on `store`: old runs go, recent ones and the baseline's stay, a dry run first.
fn prune_keeps_recent_runs_and_baselines(home: &Home, store: &str, seed: &Value) {
    let files = home.path("aged");
    aged_copies(
        seed,
        &files,
        &[("old-1", 90), ("old-2", 45), ("new-1", 1), ("new-2", 0)],
    );
    let base = home.path("aged-base");
    aged_copies(seed, &base, &[("old-base", 60)]);
    home.ok(&["runs", "--store", store, "--add", files.to_str().unwrap()]);
    home.ok(&[
        "runs",
        "--store",
        store,
        "--append-baseline",
        "main",
        "--add",
    ]
    .iter()
    .copied()
    .chain([base.to_str().unwrap()])
    .collect::<Vec<_>>());
    let all = ["new-1", "new-2", "old-1", "old-2", "old-base"];
    assert_eq!(labels(&home.runs(store)), all);
    let prune = |extra: &[&str]| {
        let out = home.ok(&[
            &["runs", "--store", store, "--prune", "older-than:30d"],
            extra,
        ]
        .concat());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    // Without --yes: what would go, and nothing gone.
    let dry = prune(&[]);
    assert!(dry.contains("would remove 2 run(s)"), "{dry}");
    assert!(dry.contains("kept 1 run(s) in baselines (main)"), "{dry}");
    assert!(dry.contains("give --yes"), "{dry}");
    let json: Value = serde_json::from_str(&prune(&["--format", "json"])).expect("prune JSON");
    assert_eq!(json["removed"], false);
    assert_eq!(labels(json["runs"].as_array().unwrap()), ["old-1", "old-2"]);
    assert_eq!(json["kept_in_baselines"][0][0]["label"], "old-base");
    assert_eq!(labels(&home.runs(store)), all);

    // With --yes: the two old runs are gone, and selected by nothing.
    let removed = prune(&["--yes"]);
    assert!(removed.contains("removed 2 run(s)"), "{removed}");
    assert_eq!(labels(&home.runs(store)), ["new-1", "new-2", "old-base"]);
    let gone = home.ok(&["runs", "label:old-?", "--store", store]);
    assert!(String::from_utf8_lossy(&gone.stdout).contains("0 run(s)"));
    // A second prune finds nothing more; the baseline still holds its run.
    assert!(prune(&["--yes"]).contains("removed 0 run(s)"));
    let main = home.ok(&["runs", "baseline:main", "--store", store]);
    assert!(String::from_utf8_lossy(&main.stdout).contains("old-base"));

    // Asked to, the baseline's old run goes too, and the baseline is empty.
    let with_baselines = prune(&["--yes", "--include-baselines"]);
    assert!(
        with_baselines.contains("removed 1 run(s)"),
        "{with_baselines}"
    );
    assert_eq!(labels(&home.runs(store)), ["new-1", "new-2"]);
    let main = home.ok(&["runs", "baseline:main", "--store", store]);
    assert!(String::from_utf8_lossy(&main.stdout).contains("0 run(s)"));
}

#[test]
fn prune_removes_old_runs_keeps_baselines_and_is_a_dry_run_without_yes_in_sqlite_and_postgres() {
    let _serial = one_at_a_time();
    let home = Home::new();
    let seed_file = home.path("seed.json");
    home.ok(&[SHORT, &["--no-store", "-o", seed_file.to_str().unwrap()]].concat());
    let seed: Value = serde_json::from_slice(&std::fs::read(&seed_file).unwrap()).unwrap();
    prune_keeps_recent_runs_and_baselines(&home, &home.sqlite(), &seed);
    let pg = Postgres::start();
    prune_keeps_recent_runs_and_baselines(&home, &pg.url(), &seed);

    // Bad input: a clear error and exit 2.
    for (args, says) in [
        (&["runs", "--prune", "older-than:soon"][..], "give an age"),
        (
            &["runs", "--prune", "older-than:30d", "label:x"][..],
            "cannot be used with",
        ),
        (&["runs", "--yes"][..], "--prune"),
    ] {
        let out = home.run(&[args, &["--store", &home.sqlite()]].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// The address forms psql takes reach the same server: an IPv6 literal (the driver looked
/// `[::1]` up as a host name) and a unix-socket directory as the host.
#[test]
fn an_ipv6_literal_and_a_unix_socket_host_reach_the_server_as_psql_does() {
    let _serial = one_at_a_time();
    require_root();
    let home = Home::new();
    let pg = Postgres::start();
    home.ok(&[SHORT, &["--label", "v6", "--store", &pg.url_ipv6()]].concat());
    assert!(home.spooled().is_empty(), "spooled: {:?}", home.spooled());
    home.ok(&[SHORT, &["--label", "socket", "--store", &pg.url_socket()]].concat());
    assert!(home.spooled().is_empty(), "spooled: {:?}", home.spooled());
    // Both runs are in the one database, whichever way it is reached.
    assert_eq!(labels(&home.runs(&pg.url())), ["socket", "v6"]);
    assert_eq!(home.runs(&pg.url_socket()).len(), 2);
}
