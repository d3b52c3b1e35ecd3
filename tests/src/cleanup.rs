//! What a hookprof run leaves behind: BPF objects, processes, scratch files. A [`Hookprof`] is
//! the binary started in its own process group and temp dir, so both can be checked after it.
use std::{
    collections::{BTreeSet, HashMap},
    fs::File,
    os::unix::{fs::MetadataExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    rc::Rc,
    time::{Duration, Instant},
};

use crate::hookprof_bin;

/// The BPF programs, links and maps loaded on this machine, and what is pinned in bpffs.
#[derive(Debug)]
pub struct BpfObjects {
    objects: Vec<BpfObject>,
    pinned: BTreeSet<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct BpfObject {
    pub kind: &'static str,
    pub id: u64,
    pub name: String,
    /// The processes holding it open.
    pub pids: Vec<i32>,
}

impl BpfObjects {
    pub fn now() -> BpfObjects {
        let holders = holders_by_id();
        let mut objects = Vec::new();
        for kind in ["prog", "link", "map"] {
            let list = bpftool_list(kind);
            for o in list.as_array().into_iter().flatten() {
                let id = o["id"].as_u64().expect("an id");
                objects.push(BpfObject {
                    kind,
                    id,
                    name: o["name"].as_str().unwrap_or("").to_string(),
                    pids: holders.get(&(kind, id)).cloned().unwrap_or_default(),
                });
            }
        }
        BpfObjects {
            objects,
            pinned: pinned_in(Path::new("/sys/fs/bpf")),
        }
    }

    pub fn count(&self, kind: &str) -> usize {
        self.objects.iter().filter(|o| o.kind == kind).count()
    }

    /// Objects that appeared since `before` and are held by `pid` or by no process at all
    /// (pinned, or leaked into the kernel). Other processes' new objects are theirs.
    pub fn leaked_since(&self, before: &BpfObjects, pid: i32) -> Vec<BpfObject> {
        self.objects
            .iter()
            .filter(|o| {
                !before
                    .objects
                    .iter()
                    .any(|b| b.kind == o.kind && b.id == o.id)
            })
            .filter(|o| o.pids.is_empty() || o.pids.contains(&pid))
            .cloned()
            .collect()
    }

    pub fn newly_pinned(&self, before: &BpfObjects) -> Vec<PathBuf> {
        self.pinned.difference(&before.pinned).cloned().collect()
    }
}

/// `bpftool --json KIND list`. It fails (EAGAIN) when an object goes away while it lists them,
/// as other processes' do at any time: ask again.
fn bpftool_list(kind: &str) -> serde_json::Value {
    let mut last = None;
    for _ in 0..20 {
        let out = Command::new("bpftool")
            .args(["--json", kind, "list"])
            .output()
            .expect("run bpftool (install it: apt-get install bpftool)");
        if out.status.success() {
            return serde_json::from_slice(&out.stdout).expect("bpftool prints JSON");
        }
        last = Some(out);
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("bpftool {kind} list keeps failing: {last:?}");
}

/// Which processes hold each BPF object open, from their fds' fdinfo (`prog_id:`, `link_id:`,
/// `map_id:`): bpftool reports holders only when built with that support.
fn holders_by_id() -> HashMap<(&'static str, u64), Vec<i32>> {
    let mut holders: HashMap<(&'static str, u64), Vec<i32>> = HashMap::new();
    for proc_entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = proc_entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let fdinfo = proc_entry.path().join("fdinfo");
        for fd in std::fs::read_dir(fdinfo).into_iter().flatten().flatten() {
            let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
            for line in info.lines() {
                for (field, kind) in [
                    ("prog_id:", "prog"),
                    ("link_id:", "link"),
                    ("map_id:", "map"),
                ] {
                    if let Some(id) = line.strip_prefix(field).and_then(|v| v.trim().parse().ok()) {
                        holders.entry((kind, id)).or_default().push(pid);
                    }
                }
            }
        }
    }
    holders
}

fn pinned_in(dir: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(pinned_in(&path));
        }
        found.insert(path);
    }
    found
}

/// The longest an ended run's processes and BPF objects may take to go. Only a leak takes
/// this long: the checks end as soon as everything is gone.
const SETTLE: Duration = Duration::from_secs(30);

/// Files a run shares with the next one: its temp dir and its output directory.
struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    fn temp(&self) -> PathBuf {
        self.root.path().join("tmp")
    }
    fn output(&self) -> PathBuf {
        self.root.path().join("out/r.json")
    }
}

/// `hookprof run --quiet -o DIR/out/r.json ARGS` as root, with TMPDIR=DIR/tmp, in a process
/// group of its own (so every process it forks can be found after it is gone).
pub struct Hookprof {
    dirs: Rc<Dirs>,
    child: Child,
    stderr: PathBuf,
    status: Option<ExitStatus>,
}

impl Hookprof {
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Hookprof {
        let root = tempfile::tempdir().expect("tempdir");
        for d in ["tmp", "out"] {
            std::fs::create_dir(root.path().join(d)).unwrap();
        }
        Self::start_in(Rc::new(Dirs { root }), args, env)
    }

    /// Another run in the same temp and output directories.
    pub fn next(&self, args: &[&str]) -> Hookprof {
        Self::start_in(Rc::clone(&self.dirs), args, &[])
    }

    pub fn next_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Hookprof {
        Self::start_in(Rc::clone(&self.dirs), args, env)
    }

    fn start_in(dirs: Rc<Dirs>, args: &[&str], env: &[(&str, &str)]) -> Hookprof {
        let bin = hookprof_bin();
        assert!(bin.exists(), "{} is missing: build it first", bin.display());
        let stderr = dirs
            .root
            .path()
            .join(format!("stderr-{}", std::process::id()));
        // One round unless asked, as `hookprof()`: these tests count samples and phases.
        let run = crate::one_round_unless_asked(&[&["run"], args].concat());
        let child = Command::new(&bin)
            .args(&run)
            .args(["--quiet", "-o"])
            .arg(dirs.output())
            .env("TMPDIR", dirs.temp())
            .envs(env.iter().copied())
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&stderr).unwrap())
            .spawn()
            .expect("start hookprof");
        Hookprof {
            dirs,
            child,
            stderr,
            status: None,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: our own unreaped child.
        unsafe { libc::kill(self.pid(), signal) };
    }

    pub fn running(&mut self) -> bool {
        self.poll().is_none()
    }

    fn poll(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("wait for hookprof");
        }
        self.status
    }

    /// Waits for the run to end; kills it and fails if it takes longer than `limit`.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.poll() {
                return status;
            }
            if Instant::now() > deadline {
                self.signal(libc::SIGKILL);
                panic!("hookprof still running after {limit:?}: {}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn output(&self) -> PathBuf {
        self.dirs.output()
    }

    /// What is in the run's temp dir.
    pub fn scratch_entries(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.dirs.temp())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect()
    }

    /// The scratch dirs of `workload` (`hookprof-<workload>-<pid>-<random>`).
    pub fn scratch_of(&self, workload: &str) -> Vec<PathBuf> {
        let prefix = format!("hookprof-{workload}-");
        self.scratch_entries()
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            })
            .collect()
    }

    /// Polls `condition` until it holds; fails, naming `what`, if the run ends first or it
    /// does not hold within `limit` (a bound for a stuck run, not a timing).
    pub fn wait_until(
        &mut self,
        what: &str,
        limit: Duration,
        mut condition: impl FnMut(&Self) -> bool,
    ) {
        let deadline = Instant::now() + limit;
        while !condition(self) {
            assert!(self.running(), "ended before {what}: {}", self.stderr());
            assert!(
                Instant::now() < deadline,
                "no {what} within {limit:?}: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The scratch dirs and the files in them, with their owners' uids.
    pub fn scratch_owners(&self) -> Vec<(PathBuf, u32)> {
        let mut owners = Vec::new();
        let mut todo = self.scratch_entries();
        // Each scratch directory and everything in it, not following links.
        while let Some(path) = todo.pop() {
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if m.is_dir() {
                let entries = std::fs::read_dir(&path).into_iter().flatten().flatten();
                todo.extend(entries.map(|e| e.path()));
            }
            owners.push((path, m.uid()));
        }
        owners
    }

    /// Asserts the ended run left no process, BPF object or bpffs pin behind.
    pub fn assert_left_nothing(&mut self, before: &BpfObjects, what: &str) {
        assert!(self.poll().is_some(), "{what}: hookprof is still running");
        let pgid = self.pid();
        // Orphans are reaped by init; give PR_SET_PDEATHSIG and the reaping a moment (a generous
        // one: on a busy machine the dying processes wait for a CPU like any other).
        let deadline = Instant::now() + SETTLE;
        // SAFETY: signal 0 only checks whether the group has members.
        while unsafe { libc::kill(-pgid, 0) } == 0 {
            assert!(
                Instant::now() < deadline,
                "{what}: processes of hookprof's group are still alive: {}",
                group_members(pgid)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // The kernel frees a dead process's objects shortly after, not at once.
        let deadline = Instant::now() + SETTLE;
        loop {
            let now = BpfObjects::now();
            let leaked = now.leaked_since(before, pgid);
            let pinned = now.newly_pinned(before);
            if leaked.is_empty() && pinned.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: BPF objects left: {leaked:?}, pinned: {pinned:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Hookprof {
    fn drop(&mut self) {
        if self.poll().is_none() {
            self.signal(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

pub use hookprof::runner::children_of;

fn group_members(pgid: i32) -> String {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid pgrp ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2) == Some(&pgid.to_string().as_str()) {
            members.push(stat.split(')').next().unwrap_or("").to_string() + ")");
        }
    }
    members.join(", ")
}
