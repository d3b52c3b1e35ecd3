//! The store's database through sqlx's `Any` driver, SQLite or PostgreSQL by the URL: the
//! schema's migrations, a run's insert (one transaction, keyed by its run id, so a second
//! insert of the same run stores nothing), the queries behind selectors and `runs`, and the
//! removal of runs (`runs --prune`).
use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet, HashMap},
    time::Duration,
};

use anyhow::{bail, Context, Result};
use futures_util::TryStreamExt;
use sqlx::{
    any::{AnyArguments, AnyRow},
    migrate::{Migration, MigrationType, Migrator},
    query::Query,
    Any, AnyConnection, AssertSqlSafe, Connection, Row,
};

use super::{
    location::Url,
    select::{Selector, Term},
    Recorded,
};
use crate::{
    results::{PathKind, Results, WorkloadResult},
    safety::owned_files::{Dir, Writers},
    stats,
    stats::replication,
};

/// How long a store may take to answer a connection: a runner whose server is down spools
/// its run after this, not after sqlx's default 30 s.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema, one migration per version; never edit one that has shipped, add the next.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "runs, workloads, paths, meta and baselines",
        include_str!("migrations/0001_runs.sql"),
    ),
    (
        2,
        "runs in selector order, baselines by run",
        include_str!("migrations/0002_run_order.sql"),
    ),
    (
        3,
        "a path's share may be absent",
        include_str!("migrations/0003_share_absent.sql"),
    ),
];

/// Documents read per statement by `select`: a few MB of text at a time.
const DOCUMENT_CHUNK: usize = 20;

/// Runs deleted per statement by `prune` (a bound value each, well under either engine's
/// limit).
const DELETE_CHUNK: usize = 500;

/// Where the applied migrations are listed (a shared PostgreSQL database may hold others').
const MIGRATIONS_TABLE: &str = "hookprof_migrations";

pub struct Store {
    conn: AnyConnection,
    sqlite: bool,
}

/// A stored run's columns, as `hookprof runs` lists them.
#[derive(Debug, serde::Serialize)]
pub struct RunRow {
    pub run_id: String,
    pub command: String,
    pub started_at: i64,
    pub label: String,
    pub complete: bool,
    pub machine_id: String,
    pub hostname: String,
    pub kernel_release: String,
    pub lsm: String,
    pub hookprof_version: String,
    pub workloads: i64,
}

/// What `prune` removed (or, in a dry run, would remove) and what it kept.
#[derive(Debug, serde::Serialize)]
pub struct Pruned {
    /// Whether the runs are gone (false: a dry run).
    pub removed: bool,
    pub runs: Vec<RunRow>,
    /// Picked by the selector but kept: in these named baselines.
    pub kept_in_baselines: Vec<(RunRow, Vec<String>)>,
}

impl Store {
    /// Connects and brings the schema up to date.
    pub async fn open(url: &Url) -> Result<Store> {
        sqlx::any::install_default_drivers();
        let file = url.sqlite_file().filter(|_| !url.is_in_memory());
        if let Some(file) = &file {
            store_dir(file)?;
        }
        // SQLite's migrator takes no lock (PostgreSQL's takes an advisory one): writers that
        // open a new file at once take turns on a lock file beside it, taken before the
        // database is opened (or made).
        let _lock = match &file {
            Some(file) => Some(FileLock::wait(file).await?),
            None => None,
        };
        if let Some(file) = &file {
            database_file(file)?;
        }
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, AnyConnection::connect(url.as_str()))
            .await
            .map_err(|_| anyhow::anyhow!("no answer in {} s", CONNECT_TIMEOUT.as_secs()))?
            .context("cannot connect")?;
        let mut store = Store {
            conn,
            sqlite: url.is_sqlite(),
        };
        let mut migrator = Migrator::with_migrations(
            MIGRATIONS
                .iter()
                .map(|&(version, description, sql)| {
                    Migration::new(
                        version,
                        Cow::Borrowed(description),
                        MigrationType::Simple,
                        sqlx::SqlSafeStr::into_sql_str(sql),
                        false,
                    )
                })
                .collect(),
        );
        migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
        migrator
            .run(&mut store.conn)
            .await
            .context("cannot bring the schema up to date")?;
        Ok(store)
    }

    /// Stores `run` with its workloads, paths, meta and baseline entry in one transaction;
    /// a run whose id is already stored is left as it is.
    pub async fn insert(&mut self, run: &Recorded) -> Result<()> {
        let r = &run.results;
        let e = &r.environment;
        let mut tx = self.conn.begin().await.context("cannot begin")?;
        let inserted = sqlx::query(
            "INSERT INTO runs (run_id, command, started_at, stored_at, label, complete, source, \
             machine_id, hostname, kernel_release, kernel_version, command_line, lsm, lockdown, \
             cpu_model, hookprof_version, options, document) VALUES ($1, $2, $3, $4, $5, $6, $7, \
             $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) ON CONFLICT (run_id) DO NOTHING",
        )
        .bind(&run.run_id)
        .bind(&run.command)
        .bind(e.started_at as i64)
        .bind(now())
        .bind(&r.label)
        .bind(i64::from(r.complete))
        .bind(r.source.to_string())
        .bind(&run.machine_id)
        .bind(&e.hostname)
        .bind(&e.kernel_release)
        .bind(&e.kernel_version)
        .bind(serde_json::to_string(&run.command_line)?)
        .bind(e.active_lsms.join(","))
        .bind(&e.lockdown)
        .bind(&e.cpu_model)
        .bind(&e.hookprof_version)
        .bind(serde_json::to_string(&r.options)?)
        .bind(serde_json::to_string(r)?)
        .execute(&mut *tx)
        .await
        .context("cannot insert the run")?
        .rows_affected();
        if inserted == 0 {
            tx.rollback().await?;
            return Ok(()); // stored before (a spooled run pushed twice)
        }
        for (key, value) in &run.meta {
            sqlx::query("INSERT INTO run_meta (run_id, key, value) VALUES ($1, $2, $3)")
                .bind(&run.run_id)
                .bind(key)
                .bind(value)
                .execute(&mut *tx)
                .await?;
        }
        for w in &r.workloads {
            insert_workload(&mut tx, &run.run_id, w).await?;
        }
        if let Some(b) = &run.baseline {
            if b.replace {
                sqlx::query("DELETE FROM baselines WHERE name = $1")
                    .bind(&b.name)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query("INSERT INTO baselines (name, run_id, added_at) VALUES ($1, $2, $3)")
                .bind(&b.name)
                .bind(&run.run_id)
                .bind(now())
                .execute(&mut *tx)
                .await?;
            // A rolling window: the newest `keep` runs by start time stay.
            sqlx::query(
                "DELETE FROM baselines WHERE name = $1 AND run_id NOT IN (SELECT b.run_id FROM \
                 baselines b JOIN runs r ON r.run_id = b.run_id WHERE b.name = $1 \
                 ORDER BY r.started_at DESC, b.run_id DESC LIMIT $2)",
            )
            .bind(&b.name)
            .bind(i64::from(b.keep))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await.context("cannot commit the run")?;
        Ok(())
    }

    /// The runs `selector` picks, oldest first, with their results. The order is decided on
    /// the ids alone, then the documents are read by id, a chunk at a time, each parsed as it
    /// arrives: sorting whole rows made SQLite carry every picked document through its sorter
    /// (1,000 runs, 300 MB), and a thousand runs never sit in memory as text and results both.
    pub async fn select(&mut self, selector: &Selector) -> Result<Vec<(String, Results)>> {
        let ids: Vec<String> = self
            .query_runs("SELECT run_id FROM runs", selector)
            .await?
            .iter()
            .map(|row| row.try_get("run_id"))
            .collect::<Result<_, _>>()?;
        let mut runs = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(DOCUMENT_CHUNK) {
            let list: Vec<String> = (1..=chunk.len()).map(|k| format!("${k}")).collect();
            let sql = format!(
                "SELECT run_id, document FROM runs WHERE run_id IN ({})",
                list.join(", ")
            );
            let mut query: Query<'_, Any, AnyArguments> = sqlx::query(AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(id.as_str());
            }
            let mut parsed: HashMap<String, Results> = HashMap::with_capacity(chunk.len());
            let mut rows = query.fetch(&mut self.conn);
            while let Some(row) = rows.try_next().await? {
                let id: String = row.try_get("run_id")?;
                let text: String = row.try_get("document")?;
                let results = Results::parse(&text, &format!("store run {id}"))?;
                parsed.insert(id, results);
            }
            drop(rows);
            for id in chunk {
                // A run pruned between the two queries is simply not there.
                if let Some(results) = parsed.remove(id) {
                    runs.push((id.clone(), results));
                }
            }
        }
        Ok(runs)
    }

    /// The runs `selector` picks (every run for an empty one), oldest first, as `runs` lists
    /// them.
    pub async fn list(&mut self, selector: &Selector) -> Result<Vec<RunRow>> {
        let rows = self
            .query_runs(
                "SELECT run_id, command, started_at, label, complete, machine_id, hostname, \
                 kernel_release, lsm, hookprof_version, (SELECT COUNT(*) FROM workloads w \
                 WHERE w.run_id = runs.run_id) AS workloads FROM runs",
                selector,
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(RunRow {
                    run_id: row.try_get("run_id")?,
                    command: row.try_get("command")?,
                    started_at: row.try_get("started_at")?,
                    label: row.try_get("label")?,
                    complete: row.try_get::<i64, _>("complete")? != 0,
                    machine_id: row.try_get("machine_id")?,
                    hostname: row.try_get("hostname")?,
                    kernel_release: row.try_get("kernel_release")?,
                    lsm: row.try_get("lsm")?,
                    hookprof_version: row.try_get("hookprof_version")?,
                    workloads: row.try_get("workloads")?,
                })
            })
            .collect()
    }

    /// Removes the runs `selector` picks with their workloads, paths, meta and baseline
    /// entries, in one transaction; a run in a named baseline stays unless `with_baselines`.
    /// With `dry_run`, only says what it would remove.
    pub async fn prune(
        &mut self,
        selector: &Selector,
        with_baselines: bool,
        dry_run: bool,
    ) -> Result<Pruned> {
        let picked = self.list(selector).await?;
        let mut baselines: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in sqlx::query("SELECT name, run_id FROM baselines ORDER BY name")
            .fetch_all(&mut self.conn)
            .await?
        {
            let run_id: String = row.try_get("run_id")?;
            baselines
                .entry(run_id)
                .or_default()
                .push(row.try_get("name")?);
        }
        let mut runs = Vec::new();
        let mut kept_in_baselines = Vec::new();
        for run in picked {
            match baselines.remove(&run.run_id) {
                Some(names) if !with_baselines => kept_in_baselines.push((run, names)),
                _ => runs.push(run),
            }
        }
        if !dry_run {
            let ids: BTreeSet<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
            let ids: Vec<&str> = ids.into_iter().collect();
            let mut tx = self.conn.begin().await.context("cannot begin")?;
            for chunk in ids.chunks(DELETE_CHUNK) {
                let list: Vec<String> = (1..=chunk.len()).map(|k| format!("${k}")).collect();
                // Children first: SQLite cascades only where foreign keys are switched on.
                for table in ["paths", "workloads", "run_meta", "baselines", "runs"] {
                    let sql = format!("DELETE FROM {table} WHERE run_id IN ({})", list.join(", "));
                    let mut query: Query<'_, Any, AnyArguments> = sqlx::query(AssertSqlSafe(sql));
                    for id in chunk {
                        query = query.bind(*id);
                    }
                    query
                        .execute(&mut *tx)
                        .await
                        .with_context(|| format!("cannot remove runs from {table}"))?;
                }
            }
            tx.commit().await.context("cannot commit the removal")?;
        }
        Ok(Pruned {
            removed: !dry_run,
            runs,
            kept_in_baselines,
        })
    }

    /// `select` with the selector's conditions and order; rows oldest first.
    async fn query_runs(&mut self, select: &str, selector: &Selector) -> Result<Vec<AnyRow>> {
        let (sql, binds) = self.runs_sql(select, selector);
        // Only placeholders, fixed text and numbers are in the SQL; every value is bound.
        let mut query: Query<'_, Any, AnyArguments> = sqlx::query(AssertSqlSafe(sql));
        for b in binds {
            query = query.bind(b);
        }
        let mut rows = query.fetch_all(&mut self.conn).await?;
        if selector.last.is_some() {
            rows.reverse();
        }
        Ok(rows)
    }

    /// The SQL of `select` with the selector's conditions, order and limit (newest first
    /// with `last`, else oldest first), and the values its placeholders take.
    fn runs_sql(&self, select: &str, selector: &Selector) -> (String, Vec<String>) {
        let (conditions, binds) = self.conditions(selector);
        let mut sql = select.to_string();
        if !conditions.is_empty() {
            sql += &format!(" WHERE {}", conditions.join(" AND "));
        }
        let newest_first = selector.last.is_some();
        sql += if newest_first {
            " ORDER BY started_at DESC, run_id DESC"
        } else {
            " ORDER BY started_at, run_id"
        };
        if let Some(n) = selector.last {
            sql += &format!(" LIMIT {n}");
        }
        (sql, binds)
    }

    /// The WHERE conditions of `selector`'s terms, ANDed, with `$N` placeholders and the
    /// values they take.
    fn conditions(&self, selector: &Selector) -> (Vec<String>, Vec<String>) {
        let mut conditions = Vec::new();
        let mut binds: Vec<String> = Vec::new();
        let mut bind = |value: String| {
            binds.push(value);
            format!("${}", binds.len())
        };
        for term in &selector.terms {
            let condition = match term {
                Term::Column(column, pattern) => {
                    let (op, value) = self.matching(pattern);
                    format!("{} {op} {}", column.name(), bind(value))
                }
                Term::Run(prefix) => {
                    let (op, value) = self.matching(&format!("{prefix}*"));
                    format!("run_id {op} {}", bind(value))
                }
                Term::Meta(key, pattern) => {
                    let (op, value) = self.matching(pattern);
                    format!(
                        "EXISTS (SELECT 1 FROM run_meta m WHERE m.run_id = runs.run_id AND \
                         m.key = {} AND m.value {op} {})",
                        bind(key.clone()),
                        bind(value)
                    )
                }
                Term::Baseline(name) => format!(
                    "run_id IN (SELECT run_id FROM baselines WHERE name = {})",
                    bind(name.clone())
                ),
                // A number, not a bound text: PostgreSQL compares no BIGINT with TEXT.
                Term::OlderThan(age) => {
                    format!(
                        "started_at <= {}",
                        now().saturating_sub(age.as_secs() as i64)
                    )
                }
            };
            conditions.push(condition);
        }
        (conditions, binds)
    }

    /// The operator and operand that match a selector's value: `*` any text, `?` one
    /// character, case-sensitive in both engines (SQLite's GLOB, PostgreSQL's LIKE).
    fn matching(&self, pattern: &str) -> (&'static str, String) {
        if !pattern.contains(['*', '?']) {
            return ("=", pattern.to_string());
        }
        if self.sqlite {
            // GLOB's other specials, [ and ], stand for themselves.
            let escaped = pattern
                .chars()
                .map(|c| match c {
                    '[' => "[[]".to_string(),
                    ']' => "[]]".to_string(),
                    c => c.to_string(),
                })
                .collect();
            return ("GLOB", escaped);
        }
        let mut like = String::new();
        for c in pattern.chars() {
            match c {
                '*' => like.push('%'),
                '?' => like.push('_'),
                '%' | '_' | '\\' => {
                    like.push('\\');
                    like.push(c);
                }
                c => like.push(c),
            }
        }
        ("LIKE", like)
    }
}

async fn insert_workload(
    tx: &mut sqlx::Transaction<'_, Any>,
    run_id: &str,
    w: &WorkloadResult,
) -> Result<()> {
    let clean = stats::summarize(&w.clean);
    let probed = stats::summarize(&w.probed);
    let point = replication::point_value(&w.by_round(&w.clean)).map(|p| p.value);
    sqlx::query(
        "INSERT INTO workloads (run_id, workload, family, unit, samples, rounds, value, mean, \
         median, stdev, min, max, probed_mean, failure) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, \
         $9, $10, $11, $12, $13, $14) ON CONFLICT (run_id, workload) DO NOTHING",
    )
    .bind(run_id)
    .bind(&w.name)
    .bind(w.family.key())
    .bind(w.unit.symbol())
    .bind(w.clean.len() as i64)
    .bind(w.by_round(&w.clean).len() as i64)
    .bind(point)
    .bind(clean.as_ref().map(|s| s.mean))
    .bind(clean.as_ref().map(|s| s.median))
    .bind(clean.as_ref().map(|s| s.stdev))
    .bind(clean.as_ref().map(|s| s.min))
    .bind(clean.as_ref().map(|s| s.max))
    .bind(probed.as_ref().map(|s| s.mean))
    .bind(
        w.failure
            .as_ref()
            .map(|f| format!("{}: {}", f.phase, f.error)),
    )
    .execute(&mut **tx)
    .await
    .with_context(|| format!("cannot insert workload {}", w.name))?;
    // Many rows per statement: a default-suite run has hundreds of paths.
    const ROWS: usize = 200;
    for chunk in w.attribution.chunks(ROWS) {
        let mut sql = String::from(
            "INSERT INTO paths (run_id, workload, kind, name, parent, lsm, calls_per_op, \
             ns_per_call, ns_per_op, corrected_ns_per_op, share) VALUES ",
        );
        for i in 0..chunk.len() {
            let n = i * 11;
            let row: Vec<String> = (1..=11).map(|k| format!("${}", n + k)).collect();
            if i > 0 {
                sql.push_str(", ");
            }
            sql += &format!("({})", row.join(", "));
        }
        sql += " ON CONFLICT (run_id, workload, kind, name, parent) DO NOTHING";
        let mut query: Query<'_, Any, AnyArguments> = sqlx::query(AssertSqlSafe(sql));
        for row in chunk {
            query = query
                .bind(run_id)
                .bind(&w.name)
                .bind(path_kind(row.kind))
                .bind(&row.name)
                .bind(row.parent.clone().unwrap_or_default())
                .bind(row.lsm.clone().unwrap_or_default())
                .bind(row.calls_per_op)
                .bind(row.ns_per_call)
                .bind(row.ns_per_op)
                .bind(row.corrected_ns_per_op)
                .bind(row.share);
        }
        query
            .execute(&mut **tx)
            .await
            .with_context(|| format!("cannot insert the paths of {}", w.name))?;
    }
    Ok(())
}

fn path_kind(kind: PathKind) -> &'static str {
    match kind {
        PathKind::Syscall => "syscall",
        PathKind::Hook => "hook",
        PathKind::Lsm => "lsm",
        PathKind::TaskPath => "task_path",
        PathKind::Seccomp => "seccomp",
        PathKind::Audit => "audit",
        PathKind::Netfilter => "netfilter",
        PathKind::BpfProgram => "bpf_program",
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// An exclusive `flock` on the lock file beside a SQLite store (`STORE.db.lock`), released
/// when dropped. Its directory may be writable by others: the file is never followed through
/// a symlink, must be a regular file of the store's owner (mode 0600), and a holder that
/// keeps it past `CONNECT_TIMEOUT` is named, not waited for without end.
struct FileLock {
    _file: std::fs::File,
}

impl FileLock {
    async fn wait(store: &std::path::Path) -> Result<FileLock> {
        use std::os::{fd::AsRawFd, unix::fs::MetadataExt};
        let path = store.with_extension("db.lock");
        let shown = path.display();
        let file = lock_file(store, &path)?;
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        loop {
            // SAFETY: flock on a descriptor this function owns; LOCK_NB never waits.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(FileLock { _file: file });
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(e).with_context(|| format!("cannot lock {shown}"));
            }
            if tokio::time::Instant::now() >= deadline {
                let holder = file
                    .metadata()
                    .ok()
                    .and_then(|m| flock_holder(m.dev(), m.ino()))
                    .map_or(String::new(), |h| format!(" by {h}"));
                bail!(
                    "{shown} is held{holder} for over {} s: wait for it to end, or end it",
                    CONNECT_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// Checks, before any work, that the SQLite database `file` can be kept: its directory made
/// and no other user's to write, the file a plain one (made if missing).
pub fn prepare_file(file: &std::path::Path) -> Result<()> {
    store_dir(file)?;
    database_file(file)
}

/// Makes the directory of the database `file` (0700) and refuses one another user can write.
fn store_dir(file: &std::path::Path) -> Result<()> {
    let dir = crate::results::write::parent_dir(file);
    Dir::create(dir, 0o700)
        .with_context(|| format!("cannot create {}", dir.display()))?
        .refuse_shared("store directory")
}

/// Makes the database file `file` if it is missing (mode 0600, never through a link) and
/// checks it is a plain file: SQLite follows a link at the database's own name (its journals
/// it opens O_NOFOLLOW), so one planted where the store goes would have it make or write the
/// link's target. A link in a directory only this user (or root) can write is theirs, and
/// followed.
fn database_file(file: &std::path::Path) -> Result<()> {
    let shown = file.display();
    let (dir, name) = (
        Dir::open(crate::results::write::parent_dir(file))?,
        file.file_name().unwrap_or_default(),
    );
    // Judged before opening: in a shared sticky directory the kernel may refuse the open
    // itself (EACCES), which would say less.
    let is_link = dir
        .stat_at(name)
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK);
    let opened = if is_link {
        if dir.writers() != Writers::Private {
            bail!(
                "{shown} is a symlink in a directory other users can write: remove it (the \
                 store's database is never followed there)"
            );
        }
        std::fs::File::open(file).with_context(|| format!("cannot open {shown}"))?
    } else {
        dir.open_at(
            name,
            libc::O_RDONLY | libc::O_CREAT | libc::O_NONBLOCK,
            0o600,
        )
        .with_context(|| format!("cannot open {shown}"))?
    };
    let meta = opened.metadata()?;
    anyhow::ensure!(
        meta.is_file() && std::os::unix::fs::MetadataExt::nlink(&meta) == 1,
        "{shown} is not a plain file (a device, FIFO or hard link): remove it, or name another"
    );
    Ok(())
}

/// Opens (or creates, mode 0600) the lock file `path` of the SQLite database `store`, refusing
/// a symlink, anything but a regular file, and a file that is not the store's owner's.
fn lock_file(store: &std::path::Path, path: &std::path::Path) -> Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => {
                anyhow::anyhow!("{shown} is a symlink: remove it (the lock file is never followed)")
            }
            _ => anyhow::Error::new(e).context(format!("cannot open {shown}")),
        })?;
    let meta = file.metadata()?;
    anyhow::ensure!(
        meta.is_file() && meta.nlink() == 1,
        "{shown} is not a plain file (a device, FIFO or hard link): remove it"
    );
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let owner = std::fs::metadata(store).map_or(me, |m| m.uid());
    if meta.uid() != owner {
        if meta.uid() != me || me != 0 {
            bail!(
                "{shown} belongs to uid {}, not to the store's owner (uid {owner}): remove it",
                meta.uid()
            );
        }
        // Made just now by root for another user's store: theirs, as the store is.
        std::os::unix::fs::fchown(&file, Some(owner), None)?;
    }
    if meta.mode() & 0o077 != 0 && meta.uid() == me {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// The process holding a `flock` on the file (device, inode), from /proc/locks: "pid N
/// (COMM)".
fn flock_holder(dev: u64, ino: u64) -> Option<String> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let wanted = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    let pid = locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->".
        (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&wanted.as_str())).then(|| f[4])
    })?;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    Some(format!("pid {pid} ({})", comm.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's plan for the query a selector makes, one step per line.
    async fn plan(store: &mut Store, selector: &str) -> Result<String> {
        let selector = Selector::parse(selector).unwrap()?;
        let (sql, binds) = store.runs_sql("SELECT run_id, document FROM runs", &selector);
        let mut query: Query<'_, Any, AnyArguments> =
            sqlx::query(AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")));
        for b in binds {
            query = query.bind(b);
        }
        let steps: Vec<String> = query
            .fetch_all(&mut store.conn)
            .await?
            .iter()
            .map(|row| row.try_get("detail"))
            .collect::<Result<_, _>>()?;
        Ok(steps.join("\n"))
    }

    #[test]
    fn selectors_read_runs_through_an_index_and_last_sorts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let url = Url::parse(&format!("sqlite://{}", dir.path().join("s.db").display())).unwrap();
        super::super::block_on(async {
            let mut store = Store::open(&url).await?;
            for (selector, index) in [
                ("last:20", "runs_started_at_run_id"),
                ("older-than:30d", "runs_started_at_run_id"),
                ("label:nightly", "runs_label"),
                ("kernel:6.12.1", "runs_kernel_release"),
            ] {
                let plan = plan(&mut store, selector).await?;
                assert!(
                    plan.contains(&format!("INDEX {index}")),
                    "{selector}: {plan}"
                );
                assert!(
                    !plan.contains("SCAN runs\n") && !plan.ends_with("SCAN runs"),
                    "{selector}: {plan}"
                );
            }
            // The newest N are the index's last N entries read backwards, with no sort step
            // (version 1's index on the start time alone left ties to a sort).
            let last = plan(&mut store, "last:20").await?;
            assert!(!last.contains("TEMP B-TREE"), "{last}");
            Ok(())
        })
        .unwrap();
    }
}
