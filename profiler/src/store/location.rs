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
    url: String,
}

impl Url {
    /// `url` if it names SQLite or PostgreSQL; a SQLite file is created when missing.
    pub fn parse(url: &str) -> Result<Url> {
        if let Some(path) = sqlite_path(url) {
            anyhow::ensure!(
                !path.is_empty(),
                "store {url}: give the database file, e.g. sqlite:///var/lib/hookprof/store.db"
            );
            // A database is a regular file: SQLite given a device, FIFO or directory fails
            // late, after making its journal beside it (in /dev for /dev/zero).
            let file = path.split('?').next().unwrap_or(path);
            if let Ok(meta) = std::fs::metadata(file) {
                anyhow::ensure!(
                    meta.is_file(),
                    "store {url}: {file} is not a regular file: name a database file"
                );
            }
            let url = if url.contains('?') {
                url.to_string()
            } else {
                format!("{url}?mode=rwc")
            };
            return Ok(Url { url });
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let url = Url {
                url: url.to_string(),
            };
            // Parsed as the connection will be (a port out of range, a bad host), so the
            // mistake ends the command before anything runs, not after the measuring.
            if let Err(e) = url.url.parse::<sqlx::postgres::PgConnectOptions>() {
                bail!("store {}: {e}", url.shown());
            }
            return Ok(url);
        }
        bail!("store '{url}': give sqlite://PATH or postgres://USER@HOST/DB (or --no-store)")
    }

    pub fn as_str(&self) -> &str {
        &self.url
    }

    pub fn is_sqlite(&self) -> bool {
        sqlite_path(&self.url).is_some()
    }

    /// An SQLite database in memory (`sqlite::memory:`, `mode=memory`): gone when hookprof
    /// exits, so it keeps no run.
    pub fn is_in_memory(&self) -> bool {
        let Some(path) = sqlite_path(&self.url) else {
            return false;
        };
        let (file, query) = path.split_once('?').unwrap_or((path, ""));
        file.trim_start_matches("file:") == ":memory:"
            || query.split('&').any(|p| p == "mode=memory")
    }

    /// The SQLite database file, for creating its directory and locking migrations.
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        sqlite_path(&self.url).map(|p| PathBuf::from(p.split('?').next().unwrap_or(p)))
    }

    /// The address without its password, for messages and the spool.
    pub fn shown(&self) -> String {
        crate::secrets::without_passwords(&self.url)
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
        for memory in [
            "sqlite::memory:",
            "sqlite://file::memory:",
            "sqlite://x.db?mode=memory",
        ] {
            assert!(Url::parse(memory).unwrap().is_in_memory(), "{memory}");
        }
        assert!(!s.is_in_memory() && !p.is_in_memory());
        for bad in ["mysql://x/y", "/tmp/store.db", "sqlite://"] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }
}
