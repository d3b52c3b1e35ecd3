//! The HTTP side of `--listen`: `GET /metrics` answered with the latest exposition, on one
//! thread whatever the clients do. A root process that anyone on the network can connect to
//! must not grow with them: at most [`MAX_CONNECTIONS`] are served at once (the rest get a
//! 503 and are closed), a request head must arrive whole within [`IDLE_TIMEOUT`] and be no
//! larger than [`MAX_HEAD`], and an answer the client does not read within
//! [`WRITE_TIMEOUT`] is dropped. Every connection is closed after one answer.
use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::Duration,
};

use anyhow::{anyhow, Context, Result};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{Notify, Semaphore},
};

use super::metrics::Exposition;

/// Connections served at once: Prometheus scrapes with one, a few scrapers and a curl fit.
pub const MAX_CONNECTIONS: usize = 16;
/// How long a client may take to send its request head.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to read the answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head read: a scraper's is a few hundred bytes.
pub const MAX_HEAD: usize = 16 * 1024;

const OPEN_METRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The HTTP endpoint: `GET /metrics` answers with the latest exposition.
pub struct Endpoint {
    exposition: Arc<Mutex<Exposition>>,
    address: SocketAddr,
    stop: Arc<Notify>,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Listens on `addr`, serving `first` until the first `publish`.
    pub fn listen(addr: SocketAddr, first: Exposition) -> Result<Endpoint> {
        let listener =
            std::net::TcpListener::bind(addr).map_err(|e| anyhow!("--listen {addr}: {e}"))?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let exposition = Arc::new(Mutex::new(first));
        let stop = Arc::new(Notify::new());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .context("start the metrics endpoint's event loop")?;
        let thread = {
            let (exposition, stop) = (Arc::clone(&exposition), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || {
                    rt.block_on(async {
                        let Ok(listener) = TcpListener::from_std(listener) else {
                            return;
                        };
                        tokio::select! {
                            _ = stop.notified() => {}
                            _ = accept(&listener, &exposition) => {}
                        }
                    });
                })
                .context("start the metrics endpoint's thread")?
        };
        Ok(Endpoint {
            exposition,
            address,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port, when `--listen` asked for port 0).
    pub fn address(&self) -> String {
        self.address.to_string()
    }

    pub fn publish(&self, exposition: Exposition) {
        if let Ok(mut e) = self.exposition.lock() {
            *e = exposition;
        }
    }
}

impl Drop for Endpoint {
    /// Stops accepting and drops every connection (the runtime goes with its thread).
    fn drop(&mut self) {
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept(listener: &TcpListener, exposition: &Arc<Mutex<Exposition>>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors or a connection reset before it was taken: try again soon.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let exposition = Arc::clone(exposition);
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => {
                tokio::spawn(async move {
                    answer(stream, &exposition).await;
                    drop(slot);
                });
            }
            // Full: said at once, never waited for.
            Err(_) => {
                tokio::spawn(async move {
                    let busy = response(503, TEXT, "hookprof: too many connections\n");
                    let _ = write(stream, &busy).await;
                });
            }
        }
    }
}

/// Reads one request head (bounded in time and size) and answers it.
async fn answer(mut stream: TcpStream, exposition: &Mutex<Exposition>) {
    let head = match tokio::time::timeout(IDLE_TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(head)) => head,
        // Too slow, too large, malformed or gone: closed without a word.
        _ => return,
    };
    let reply = {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {
                let path = request.path.unwrap_or_default();
                let path = path.split('?').next().unwrap_or_default();
                if request.method == Some("GET") && path == "/metrics" {
                    let open_metrics = request.headers.iter().any(|h| {
                        h.name.eq_ignore_ascii_case("Accept")
                            && String::from_utf8_lossy(h.value)
                                .contains("application/openmetrics-text")
                    });
                    let e = exposition.lock().map(|e| e.clone()).unwrap_or_default();
                    if open_metrics {
                        response(200, OPEN_METRICS, &e.open_metrics)
                    } else {
                        response(200, TEXT, &e.text)
                    }
                } else {
                    response(404, TEXT, "hookprof serves /metrics\n")
                }
            }
            _ => response(400, TEXT, "hookprof: a bad request\n"),
        }
    };
    // A scraper that hung up or stalled is its own problem.
    let _ = write(stream, &reply).await;
}

/// The bytes up to and including the blank line that ends a request head; None if the client
/// closed first or sent more than [`MAX_HEAD`] without one.
async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        let n = stream.read(&mut buf).await.ok().filter(|&n| n > 0)?;
        head.extend_from_slice(&buf[..n]);
        let end = head
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|e| e + 4);
        if end.unwrap_or(head.len()) > MAX_HEAD {
            return None;
        }
        if let Some(end) = end {
            head.truncate(end);
            return Some(head);
        }
    }
}

async fn write(mut stream: TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(bytes).await?;
        stream.shutdown().await
    })
    .await
    .map_err(|_| std::io::ErrorKind::TimedOut)?
}

fn response(status: u16, kind: &str, body: &str) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    fn get(addr: &str, head: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn metrics_are_served_by_format_and_anything_else_is_not() {
        let e = Endpoint::listen(
            "127.0.0.1:0".parse().unwrap(),
            Exposition {
                open_metrics: "om\n# EOF\n".into(),
                text: "text\n".into(),
            },
        )
        .unwrap();
        let addr = e.address();
        let text = get(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(
            text.ends_with("\r\n\r\ntext\n") && text.contains(TEXT),
            "{text}"
        );
        let om = get(
            &addr,
            "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
        );
        assert!(
            om.ends_with("om\n# EOF\n") && om.contains(OPEN_METRICS),
            "{om}"
        );
        e.publish(Exposition {
            open_metrics: String::new(),
            text: "newer\n".into(),
        });
        assert!(get(&addr, "GET /metrics?x=1 HTTP/1.0\r\n\r\n").ends_with("newer\n"));
        assert!(get(&addr, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(&addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(&addr, "\u{1}\u{2} nonsense\r\n\r\n").starts_with("HTTP/1.1 400"));
        // A head past the bound is cut off without an answer.
        let huge = format!(
            "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(huge.as_bytes());
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    }
}
