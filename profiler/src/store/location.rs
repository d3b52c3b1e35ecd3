//! Which results store a command uses: `--store URL`, else `$HOOKPROF_STORE`, else the
//! embedded SQLite database under the XDG data directory; `--no-store` or
//! `HOOKPROF_STORE=off` for none.
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

/// Names the store instead of `--store`; `off` records nothing.
pub const ENV: &str = "HOOKPROF_STORE";

/// Where the results store is, for every command that reads or writes it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StoreArgs {
    /// The results store: sqlite://PATH or postgres://USER@HOST[:PORT]/DB [default:
    /// $HOOKPROF_STORE, else sqlite under $XDG_DATA_HOME/hookprof/store.db, else
    /// ~/.local/share/hookprof/store.db].
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

/// A store's address, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Url {
    /// As given (with `?mode=rwc` added to a SQLite file), for messages and the spool.
    url: String,
    /// As the driver is given it: a PostgreSQL IPv6 literal is also passed as `hostaddr`,
    /// which the driver takes as an address (it looks `[::1]` up as a host name).
    connect: String,
}

/// The SQLite query parameters a store may have, and the values of each that keep the
/// database in its file: anything else (`mode=memory`, `vfs=memdb`, a parameter SQLite
/// ignores) would keep a run nowhere, or somewhere else than the file named.
const SQLITE_PARAMETERS: &[(&str, &[&str])] = &[
    ("mode", &["ro", "rw", "rwc"]),
    ("cache", &["shared", "private"]),
    ("immutable", &["0", "1", "true", "false"]),
    (
        "vfs",
        &[
            "unix",
            "unix-dotfile",
            "unix-excl",
            "unix-none",
            "unix-namedsem",
        ],
    ),
];

impl Url {
    /// `url` if it names SQLite or PostgreSQL; a SQLite file is created when missing.
    pub fn parse(url: &str) -> Result<Url> {
        if let Some(path) = sqlite_path(url) {
            return parse_sqlite(url, path);
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return parse_postgres(url);
        }
        bail!(
            "store '{}': give sqlite://PATH or postgres://USER@HOST/DB (or --no-store)",
            crate::safety::secrets::without_passwords(url)
        )
    }

    pub fn as_str(&self) -> &str {
        &self.connect
    }

    pub fn is_sqlite(&self) -> bool {
        sqlite_path(&self.url).is_some()
    }

    /// An SQLite database in memory (`sqlite::memory:`): gone when hookprof exits, so it
    /// keeps no run.
    pub fn is_in_memory(&self) -> bool {
        sqlite_path(&self.url).is_some_and(|path| {
            let file = path.split_once('?').map_or(path, |(file, _)| file);
            file.trim_start_matches("file:") == ":memory:"
        })
    }

    /// The SQLite database file (percent-decoded, as SQLite is given it), for creating its
    /// directory and locking migrations.
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        let path = sqlite_path(&self.url)?;
        let file = path.split_once('?').map_or(path, |(file, _)| file);
        let decoded = percent_encoding::percent_decode_str(file).decode_utf8_lossy();
        Some(PathBuf::from(decoded.as_ref()))
    }

    /// The address without its password, for messages and the spool.
    pub fn shown(&self) -> String {
        crate::safety::secrets::without_passwords(&self.url)
    }
}

/// A SQLite address: a file (a regular one if it exists) and only parameters that keep the
/// database in it.
fn parse_sqlite(url: &str, path: &str) -> Result<Url> {
    let (file, query) = path.split_once('?').unwrap_or((path, ""));
    anyhow::ensure!(
        !file.is_empty(),
        "store {url}: give the database file, e.g. sqlite:///var/lib/hookprof/store.db"
    );
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let Some((_, values)) = SQLITE_PARAMETERS.iter().find(|(k, _)| *k == key) else {
            bail!(
                "store {url}: the parameter '{key}' is not one a store on disk takes: use {}",
                sqlite_parameters()
            );
        };
        if !values.contains(&value.as_ref()) {
            bail!(
                "store {url}: {key}={value} keeps nothing in the file (or is not SQLite's): use \
                 {}; for a database in memory, sqlite::memory: with -o FILE",
                sqlite_parameters()
            );
        }
    }
    let url = Url::at(if query.is_empty() {
        format!("{url}?mode=rwc")
    } else {
        url.to_string()
    });
    // A database is a regular file: SQLite given a device, FIFO or directory fails late,
    // after making its journal beside it (in /dev for /dev/zero).
    if let Some(file) = url.sqlite_file().filter(|_| !url.is_in_memory()) {
        if let Ok(meta) = std::fs::metadata(&file) {
            anyhow::ensure!(
                meta.is_file(),
                "store {}: {} is not a regular file: name a database file",
                url.url,
                file.display()
            );
        }
    }
    Ok(url)
}

fn sqlite_parameters() -> String {
    let each: Vec<String> = SQLITE_PARAMETERS
        .iter()
        .map(|(key, values)| format!("{key}={}", values.join("|")))
        .collect();
    each.join(", ")
}

/// A PostgreSQL address, read by a URL parser as psql reads it: an IPv6 literal
/// (`[::1]:5432`), percent-encoded user, password and database, a unix socket directory as
/// the host (`%2Frun%2Fpostgresql`) or as `?host=/run/postgresql`.
fn parse_postgres(given: &str) -> Result<Url> {
    let shown = crate::safety::secrets::without_passwords(given);
    let parsed = url::Url::parse(given)
        .map_err(|e| anyhow::anyhow!("store {shown}: {e}: give postgres://USER@HOST[:PORT]/DB"))?;
    let mut connect = parsed.clone();
    if let Some(url::Host::Ipv6(address)) = parsed.host() {
        connect
            .query_pairs_mut()
            .append_pair("hostaddr", &address.to_string());
    }
    let url = Url {
        url: given.to_string(),
        connect: connect.to_string(),
    };
    // Parsed as the connection will be (a port out of range, a bad host), so the mistake
    // ends the command before anything runs, not after the measuring.
    if let Err(e) = url.connect.parse::<sqlx::postgres::PgConnectOptions>() {
        bail!("store {shown}: {e}");
    }
    Ok(url)
}

impl Url {
    /// An address the driver takes as it is written.
    fn at(url: String) -> Url {
        Url {
            connect: url.clone(),
            url,
        }
    }
}

fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
}

impl StoreArgs {
    /// The store to use, or None with `no_store` or `HOOKPROF_STORE=off`.
    pub fn resolve(&self, no_store: bool) -> Result<Option<Url>> {
        if no_store {
            return Ok(None);
        }
        let env = std::env::var(ENV).ok().filter(|v| !v.is_empty());
        let url = match (&self.store, env) {
            (Some(url), _) => Url::parse(url)?,
            (None, Some(off)) if off == "off" => return Ok(None),
            (None, Some(url)) => Url::parse(&url).with_context(|| format!("${ENV}"))?,
            (None, None) => default_sqlite()?,
        };
        Ok(Some(url))
    }

    /// The store to read from; an error when there is none.
    pub fn required(&self) -> Result<Url> {
        self.resolve(false)?
            .with_context(|| format!("{ENV}=off: no results store to read (give --store URL)"))
    }
}

/// hookprof's directory under the XDG data directory.
pub fn data_dir() -> Result<PathBuf> {
    let env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(data) = env("XDG_DATA_HOME") {
        return Ok(data.join("hookprof"));
    }
    let home = env("HOME").context(
        "no data directory for the results store: set XDG_DATA_HOME or HOME, give --store URL, \
         or --no-store",
    )?;
    Ok(home.join(".local/share/hookprof"))
}

fn default_sqlite() -> Result<Url> {
    let file = data_dir()?.join("store.db");
    let shown = file
        .to_str()
        .context("the data directory's path is not UTF-8")?;
    Url::parse(&format!("sqlite://{shown}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_files_are_created_and_passwords_never_shown() {
        let s = Url::parse("sqlite:///tmp/x/store.db").unwrap();
        assert_eq!(s.as_str(), "sqlite:///tmp/x/store.db?mode=rwc");
        assert_eq!(s.sqlite_file().unwrap(), PathBuf::from("/tmp/x/store.db"));
        assert!(s.is_sqlite());
        let p = Url::parse("postgres://ci:secret@db.example:5432/hookprof").unwrap();
        assert!(!p.is_sqlite());
        assert_eq!(p.shown(), "postgres://ci:***@db.example:5432/hookprof");
        let e = Url::parse("postgres://ci:secret@db:99999/h")
            .unwrap_err()
            .to_string();
        assert!(e.contains("port") && !e.contains("secret"), "{e}");
        let q = Url::parse("postgres://db/h?user=ci&password=secret&sslmode=require").unwrap();
        assert_eq!(
            q.shown(),
            "postgres://db/h?user=ci&password=***&sslmode=require"
        );
        for memory in ["sqlite::memory:", "sqlite://file::memory:"] {
            assert!(Url::parse(memory).unwrap().is_in_memory(), "{memory}");
        }
        assert!(!s.is_in_memory() && !p.is_in_memory());
        for bad in ["mysql://x/y", "/tmp/store.db", "sqlite://"] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_postgres_address_connects_where_psql_would() {
        let options = |url: &str| {
            Url::parse(url)
                .unwrap()
                .as_str()
                .parse::<sqlx::postgres::PgConnectOptions>()
                .unwrap()
        };
        let v6 = options("postgres://u:p@[::1]:5499/db");
        assert_eq!(
            (v6.get_host(), v6.get_port(), v6.get_database()),
            ("::1", 5499, Some("db"))
        );
        let v6 = Url::parse("postgresql://u:p@[fe80::1%25eth0]/db");
        assert!(v6.is_err() || v6.unwrap().as_str().contains("hostaddr"));
        let encoded = options("postgres://us%65r:p%40ss@h/my%20db");
        assert_eq!(
            (encoded.get_username(), encoded.get_database()),
            ("user", Some("my db"))
        );
        let socket = options("postgres://u@%2Frun%2Fpostgresql/db");
        assert_eq!(socket.get_socket(), Some(&PathBuf::from("/run/postgresql")));
        let socket = options("postgres:///db?host=/run/postgresql");
        assert_eq!(socket.get_socket(), Some(&PathBuf::from("/run/postgresql")));
        // What is shown and spooled is what was given, its password masked.
        let given = Url::parse("postgres://u:p@[::1]:5499/db").unwrap();
        assert_eq!(given.shown(), "postgres://u:***@[::1]:5499/db");
        let e = Url::parse("postgres://u:secret@[::1/db")
            .unwrap_err()
            .to_string();
        assert!(e.contains("IPv6") && !e.contains("secret"), "{e}");
    }

    #[test]
    fn sqlite_parameters_that_keep_nothing_on_disk_are_refused_and_named() {
        for bad in [
            "sqlite:///tmp/x.db?vfs=memdb",
            "sqlite:///tmp/x.db?mode=memory",
            "sqlite://x.db?mode=rwc&vfs=memdb",
            "sqlite://x.db?mode=%6D%65mory",
        ] {
            let e = Url::parse(bad).unwrap_err().to_string();
            assert!(e.contains("keeps nothing in the file"), "{bad}: {e}");
            assert!(e.contains("mode=ro|rw|rwc"), "{bad}: {e}");
        }
        let e = Url::parse("sqlite://x.db?journal_mode=off")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'journal_mode' is not one"), "{e}");
        for good in [
            "sqlite://x.db?mode=ro",
            "sqlite://x.db?cache=shared&mode=rwc",
            "sqlite://x.db?vfs=unix-excl",
        ] {
            assert!(Url::parse(good).is_ok(), "{good}");
        }
        // The file is the one SQLite opens: percent-escapes decoded.
        let spaced = Url::parse("sqlite:///tmp/a%20b.db").unwrap();
        assert_eq!(spaced.sqlite_file().unwrap(), PathBuf::from("/tmp/a b.db"));
    }

    use proptest::prelude::*;

    fn host() -> impl Strategy<Value = (String, String)> {
        prop_oneof![
            any::<[u8; 4]>().prop_map(|o| {
                let ip = std::net::Ipv4Addr::from(o).to_string();
                (ip.clone(), ip)
            }),
            any::<[u16; 8]>().prop_map(|s| {
                let ip = std::net::Ipv6Addr::from(s).to_string();
                (format!("[{ip}]"), ip)
            }),
            "[a-z][a-z0-9-]{0,10}(\\.[a-z]{2,5})?".prop_map(|h| (h.clone(), h)),
        ]
    }

    proptest! {
        /// Whatever the user, password, host and database hold, the driver is given them
        /// as written, and no message shows the password.
        #[test]
        fn a_postgres_address_reaches_the_driver_as_written_and_its_password_never_shows(
            user in "[a-zA-Z0-9 @:/%?#._-]{1,12}",
            password in "S3cr[a-zA-Z0-9 @:/%?#._-]{1,12}",
            (host, driver_host) in host(),
            port in 1u16..,
            // A name of dots alone is a path segment a URL resolves away ("." and ".."), as
            // any URL parser does: no database is named so.
            db in "[a-zA-Z0-9 @:/%?#._-]{1,12}".prop_filter("a dot segment", |d| {
                !d.chars().all(|c| c == '.')
            }),
        ) {
            let mut url = url::Url::parse(&format!("postgres://{host}:{port}")).unwrap();
            // As psql takes them: percent-encoded ('%' itself as %25).
            let encoded = |s: &str| percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string();
            url.set_username(&encoded(&user)).unwrap();
            url.set_password(Some(&encoded(&password))).unwrap();
            url.set_path(&encoded(&db));
            let parsed = Url::parse(url.as_str()).unwrap();
            let options: sqlx::postgres::PgConnectOptions = parsed.as_str().parse().unwrap();
            prop_assert_eq!(options.get_host(), driver_host.as_str());
            prop_assert_eq!(options.get_port(), port);
            prop_assert_eq!(options.get_username(), user.as_str());
            prop_assert_eq!(options.get_database(), Some(db.as_str()));
            prop_assert!(!parsed.shown().contains("S3cr"), "{}", parsed.shown());
        }

        /// A SQLite address is taken exactly when each of its parameters keeps the data on
        /// disk.
        #[test]
        fn a_sqlite_address_is_taken_only_with_parameters_that_keep_the_file(
            params in prop::collection::vec(
                (
                    prop::sample::select(vec!["mode", "cache", "immutable", "vfs", "nolock", "psow"]),
                    prop::sample::select(vec!["ro", "rw", "rwc", "memory", "shared", "private", "1", "memdb", "unix", "unix-excl"]),
                ),
                1..4,
            ),
        ) {
            let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let url = format!("sqlite:///nonexistent-dir/s.db?{}", query.join("&"));
            let keeps = params.iter().all(|(k, v)| {
                SQLITE_PARAMETERS.iter().any(|(key, values)| key == k && values.contains(v))
            });
            prop_assert_eq!(Url::parse(&url).is_ok(), keeps, "{}", url);
        }
    }
}
