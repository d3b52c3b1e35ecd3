//! The two ends of a two-process workload: a pipe pair, a socketpair, or connected loopback TCP
//! or UDP sockets, and exact reads and writes on raw fds that a forked child may call.
use std::{
    io,
    net::{TcpListener, TcpStream, UdpSocket},
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
        unix::net::UnixStream,
    },
};

use anyhow::Context;

/// One end of a channel: where it sends and where it receives (the same fd for sockets).
pub struct End {
    tx: OwnedFd,
    rx: Option<OwnedFd>,
}

impl End {
    fn socket(fd: impl Into<OwnedFd>) -> Self {
        End {
            tx: fd.into(),
            rx: None,
        }
    }

    pub fn tx(&self) -> RawFd {
        self.tx.as_raw_fd()
    }

    pub fn rx(&self) -> RawFd {
        self.rx.as_ref().unwrap_or(&self.tx).as_raw_fd()
    }
}

/// A bidirectional channel between a client (the workload) and a server (a forked peer).
pub struct Channel {
    pub client: End,
    pub server: End,
}

impl Channel {
    /// Two pipes, one each way.
    pub fn pipes() -> anyhow::Result<Self> {
        let (server_rx, client_tx) = pipe()?;
        let (client_rx, server_tx) = pipe()?;
        Ok(Channel {
            client: End {
                tx: client_tx,
                rx: Some(client_rx),
            },
            server: End {
                tx: server_tx,
                rx: Some(server_rx),
            },
        })
    }

    /// An AF_UNIX stream socketpair.
    pub fn unix() -> anyhow::Result<Self> {
        let (a, b) = UnixStream::pair().context("socketpair")?;
        Ok(Channel {
            client: End::socket(a),
            server: End::socket(b),
        })
    }

    /// A TCP connection on 127.0.0.1 (Nagle off: each message goes out at once).
    pub fn tcp() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1")?;
        let client = TcpStream::connect(listener.local_addr()?).context("connect")?;
        let (server, _) = listener.accept().context("accept")?;
        client.set_nodelay(true)?;
        server.set_nodelay(true)?;
        Ok(Channel {
            client: End::socket(client),
            server: End::socket(server),
        })
    }

    /// Two UDP sockets on 127.0.0.1 connected to each other.
    pub fn udp() -> anyhow::Result<Self> {
        let a = UdpSocket::bind("127.0.0.1:0").context("bind 127.0.0.1")?;
        let b = UdpSocket::bind("127.0.0.1:0").context("bind 127.0.0.1")?;
        a.connect(b.local_addr()?)?;
        b.connect(a.local_addr()?)?;
        Ok(Channel {
            client: End::socket(a),
            server: End::socket(b),
        })
    }
}

/// A pipe, both ends close-on-exec: (read end, write end).
pub fn pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two fds pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        anyhow::bail!("pipe2: {}", io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these fds and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads exactly `buf.len()` bytes; Ok(false) on end of file before the first byte.
pub fn read_exact(fd: RawFd, buf: &mut [u8]) -> io::Result<bool> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length stay within `buf`.
        let n = unsafe { libc::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        match n {
            0 if done == 0 => return Ok(false),
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n if n < 0 => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
            n => done += n as usize,
        }
    }
    Ok(true)
}

/// Writes all of `buf`.
pub fn write_all(fd: RawFd, buf: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length stay within `buf`.
        let n = unsafe { libc::write(fd, buf[done..].as_ptr().cast(), buf.len() - done) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        } else {
            done += n as usize;
        }
    }
    Ok(())
}
