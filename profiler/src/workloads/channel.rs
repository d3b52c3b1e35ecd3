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

    /// Loopback TCP with lmbench's bw_tcp socket buffers: `bytes` to send and to receive on the
    /// client, set before it connects (so the window scale allows them), and to send on the
    /// server. Fixed buffers turn the kernel's buffer autotuning off, as lmbench's do.
    pub fn tcp_with_buffers(bytes: i32) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1")?;
        set_buffer(listener.as_raw_fd(), libc::SO_SNDBUF, bytes)?;
        let std::net::SocketAddr::V4(addr) = listener.local_addr()? else {
            anyhow::bail!("127.0.0.1 gave a non-IPv4 address");
        };
        // SAFETY: a new socket, owned at once.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        anyhow::ensure!(fd >= 0, "socket: {}", io::Error::last_os_error());
        // SAFETY: socket() just returned this fd and nothing else owns it.
        let client = unsafe { OwnedFd::from_raw_fd(fd) };
        set_buffer(fd, libc::SO_RCVBUF, bytes)?;
        set_buffer(fd, libc::SO_SNDBUF, bytes)?;
        let to = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: addr.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*addr.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: `to` is a valid sockaddr_in of the size given.
        let connected = unsafe {
            libc::connect(
                fd,
                (&to as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        anyhow::ensure!(connected == 0, "connect: {}", io::Error::last_os_error());
        let (server, _) = listener.accept().context("accept")?;
        set_buffer(server.as_raw_fd(), libc::SO_SNDBUF, bytes)?;
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

/// Sets a socket's SO_SNDBUF or SO_RCVBUF (the kernel caps it at its wmem_max / rmem_max).
fn set_buffer(fd: RawFd, option: libc::c_int, bytes: i32) -> anyhow::Result<()> {
    // SAFETY: a valid int option value of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&bytes as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
    anyhow::ensure!(r == 0, "setsockopt: {}", io::Error::last_os_error());
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(fd: RawFd, option: libc::c_int) -> i32 {
        let (mut value, mut len) = (0i32, size_of::<i32>() as libc::socklen_t);
        // SAFETY: an int out-buffer of the size given.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                option,
                (&mut value as *mut i32).cast(),
                &mut len,
            )
        };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        value
    }

    #[test]
    fn bw_tcp_sockets_get_lmbench_buffers_and_carry_data() {
        let default = Channel::tcp().unwrap();
        let sized = Channel::tcp_with_buffers(1 << 20).unwrap();
        // The kernel doubles what was asked (for its own overhead), capped by the sysctls:
        // either way the sized buffers differ from the autotuned defaults.
        for option in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
            assert_ne!(
                buffer(sized.client.rx(), option),
                buffer(default.client.rx(), option)
            );
        }
        write_all(sized.server.tx(), b"lmbench").unwrap();
        let mut got = [0u8; 7];
        assert!(read_exact(sized.client.rx(), &mut got).unwrap());
        assert_eq!(&got, b"lmbench");
    }
}
