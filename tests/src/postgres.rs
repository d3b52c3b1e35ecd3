//! A real PostgreSQL server for the store's tests: Debian's postgresql package (installed by
//! `cargo xtask setup`), a cluster made by initdb in a temporary directory, run as an
//! unprivileged user (the server refuses root) on a loopback port with its socket in that
//! directory, and stopped when dropped.
use std::{
    net::TcpListener,
    os::unix::{fs::chown, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// The user the server runs as: the package's `postgres`, else nobody.
fn server_user() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == "postgres")
        .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
        .unwrap_or((65534, 65534))
}

/// The newest installed server's bin directory.
fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server in /usr/lib/postgresql: install Debian's postgresql package \
             (`cargo xtask setup` does)"
        )
    })
}

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    user: (u32, u32),
    server: Option<Child>,
}

impl Postgres {
    /// A new cluster, started.
    pub fn start() -> Postgres {
        let dir = tempfile::Builder::new()
            .prefix("hookprof-pg-")
            .tempdir()
            .expect("tempdir");
        let user = server_user();
        chown(dir.path(), Some(user.0), Some(user.1)).expect("chown the cluster's directory");
        let bin = bin_dir();
        let mut pg = Postgres {
            port: free_port(),
            dir,
            bin,
            user,
            server: None,
        };
        let status = pg
            .as_server_user(&pg.bin.join("initdb"))
            .args([
                "-D",
                &pg.data(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
            ])
            .arg("--no-sync")
            .stdout(Stdio::null())
            .status()
            .expect("run initdb");
        assert!(status.success(), "initdb failed: {status}");
        pg.resume();
        pg
    }

    /// The URL of the server's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The same database by the IPv6 loopback literal, as psql takes it.
    pub fn url_ipv6(&self) -> String {
        format!("postgres://postgres@[::1]:{}/postgres", self.port)
    }

    /// The same database through the server's unix socket, its directory as the URL's host
    /// (percent-encoded, as psql takes it).
    pub fn url_socket(&self) -> String {
        let dir: String = self
            .dir
            .path()
            .display()
            .to_string()
            .replace('%', "%25")
            .replace('/', "%2F");
        format!("postgres://postgres@{dir}:{}/postgres", self.port)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn as_server_user(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.uid(self.user.0)
            .gid(self.user.1)
            .current_dir(self.dir.path());
        cmd
    }

    /// Starts the server (again, after `stop`) and waits until it takes connections.
    pub fn resume(&mut self) {
        assert!(self.server.is_none(), "the server is running");
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("log file");
        chown(self.dir.path().join("server.log"), Some(self.user.0), None).ok();
        let port = self.port.to_string();
        let socket_dir = self.dir.path().display().to_string();
        let child = self
            .as_server_user(&self.bin.join("postgres"))
            // IPv6 loopback too, for the address forms the store tests connect by.
            .args(["-D", &self.data(), "-h", "127.0.0.1,::1", "-p", &port])
            .args(["-k", &socket_dir, "-F"])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start postgres");
        self.server = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &port, "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not start in 30 s: {}",
                std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the server (a fast shutdown: clients are disconnected) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.server.take() {
            // SAFETY: signals the server this helper started.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            child.wait().expect("wait for postgres");
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}
