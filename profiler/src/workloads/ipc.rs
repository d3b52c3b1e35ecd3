//! lmbench's "*Local* Communication latencies": round trips between the workload and a forked
//! server over a pipe pair, an AF_UNIX socketpair, UDP and TCP on 127.0.0.1, ONC RPC null calls
//! over UDP and TCP, and TCP connection set-up.
use std::{
    net::{SocketAddr, TcpListener, TcpStream},
    os::fd::{AsRawFd, RawFd},
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{
    channel::{read_exact, write_all, Channel, End},
    peer::{second_cpu, Peer},
    rpc, Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec,
};

const fn latency(
    name: &'static str,
    description: &'static str,
    suite: Suite,
    create: fn(&WorkloadOptions) -> anyhow::Result<Box<dyn Workload>>,
) -> WorkloadSpec {
    WorkloadSpec {
        name,
        family: Family::LocalLatency,
        metric: Metric::LatencyUs,
        description,
        suite,
        create,
    }
}

pub static SPECS: &[WorkloadSpec] = &[
    latency(
        "lat_pipe",
        "1-byte round trip over a pair of pipes",
        Suite::Quick,
        |o| RoundTrip::create(o, Channel::pipes(), Exchange::Echo { len: 1 }),
    ),
    latency(
        "lat_unix",
        "1-byte round trip over an AF_UNIX stream socketpair",
        Suite::Default,
        |o| RoundTrip::create(o, Channel::unix(), Exchange::Echo { len: 1 }),
    ),
    latency(
        "lat_udp",
        "1-word round trip over UDP on 127.0.0.1",
        Suite::Default,
        |o| RoundTrip::create(o, Channel::udp(), Exchange::Echo { len: 4 }),
    ),
    latency(
        "lat_rpc_udp",
        "ONC RPC null call over UDP on 127.0.0.1 (hookprof's own XDR: unlike lmbench, no \
         libtirpc poll() before each receive, no rpcbind)",
        Suite::Default,
        |o| RoundTrip::create(o, Channel::udp(), Exchange::RpcDatagram),
    ),
    latency(
        "lat_tcp",
        "1-byte round trip over TCP on 127.0.0.1",
        Suite::Quick,
        |o| RoundTrip::create(o, Channel::tcp(), Exchange::Echo { len: 1 }),
    ),
    latency(
        "lat_rpc_tcp",
        "ONC RPC null call over TCP (record marking) on 127.0.0.1 (hookprof's own XDR: unlike \
         lmbench, no libtirpc poll() before each receive, no rpcbind)",
        Suite::Default,
        |o| RoundTrip::create(o, Channel::tcp(), Exchange::RpcRecord),
    ),
    latency(
        "lat_tcp_connect",
        "TCP socket() + connect() + close() to a listener on 127.0.0.1 (backlog 65535, not \
         lmbench's 100, so no SYN is dropped and retransmitted 1 s later)",
        Suite::Default,
        Connect::create,
    ),
];

/// What one round trip sends and expects back.
#[derive(Clone, Copy)]
enum Exchange {
    /// `len` bytes echoed back unchanged.
    Echo { len: usize },
    /// An RPC null call and its reply, one datagram each.
    RpcDatagram,
    /// An RPC null call and its reply, each one TCP record.
    RpcRecord,
}

impl Exchange {
    /// The server's loop (in the forked peer): answers until the client goes away.
    fn serve(self, end: &End) -> i32 {
        let mut buf = [0u8; 512];
        loop {
            let answered = match self {
                Exchange::Echo { len } => match read_exact(end.rx(), &mut buf[..len]) {
                    Ok(true) => write_all(end.tx(), &buf[..len]).map(Some),
                    Ok(false) => Ok(None),
                    Err(e) => Err(e),
                },
                Exchange::RpcDatagram => {
                    // SAFETY: reads into `buf`, within its length.
                    let n = unsafe { libc::read(end.rx(), buf.as_mut_ptr().cast(), buf.len()) };
                    if n <= 0 {
                        return 0;
                    }
                    match rpc::decode_call(&buf[..n as usize]) {
                        Some(xid) => {
                            let mut reply = [0; rpc::REPLY_LEN];
                            rpc::encode_reply(xid, &mut reply);
                            write_all(end.tx(), &reply).map(Some)
                        }
                        None => return 2,
                    }
                }
                Exchange::RpcRecord => serve_record(end, &mut buf),
            };
            match answered {
                Ok(Some(())) => {}
                Ok(None) => return 0, // the client closed its end
                Err(_) => return 1,
            }
        }
    }

    /// One round trip from the client; `seq` varies the message so a stale answer is caught.
    fn round_trip(self, end: &End, seq: u32) -> anyhow::Result<()> {
        match self {
            Exchange::Echo { len } => {
                let sent = [seq as u8; 4];
                let mut got = [0u8; 4];
                write_all(end.tx(), &sent[..len])?;
                anyhow::ensure!(read_exact(end.rx(), &mut got[..len])?, "server went away");
                anyhow::ensure!(got[..len] == sent[..len], "echo {got:?} != sent {sent:?}");
            }
            Exchange::RpcDatagram | Exchange::RpcRecord => {
                let mut call = [0; rpc::CALL_LEN];
                rpc::encode_call(seq, &mut call);
                let mut reply = [0; rpc::REPLY_LEN];
                if let Exchange::RpcRecord = self {
                    let mut record = [0; 4 + rpc::CALL_LEN];
                    record[..4].copy_from_slice(&rpc::record_mark(rpc::CALL_LEN));
                    record[4..].copy_from_slice(&call);
                    write_all(end.tx(), &record)?;
                    let mut mark = [0; 4];
                    anyhow::ensure!(read_exact(end.rx(), &mut mark)?, "server went away");
                    anyhow::ensure!(rpc::fragment_len(mark) == Some(rpc::REPLY_LEN));
                    read_exact(end.rx(), &mut reply)?;
                } else {
                    write_all(end.tx(), &call)?;
                    // SAFETY: reads into `reply`, within its length.
                    let n = unsafe { libc::read(end.rx(), reply.as_mut_ptr().cast(), reply.len()) };
                    anyhow::ensure!(n == reply.len() as isize, "short RPC reply ({n} bytes)");
                }
                let xid = rpc::decode_reply(&reply);
                anyhow::ensure!(xid == Some(seq), "RPC reply {xid:?} to call {seq}");
            }
        }
        Ok(())
    }
}

/// Reads one RPC record, answers it with one record; Ok(None) when the client closed.
fn serve_record(end: &End, buf: &mut [u8]) -> std::io::Result<Option<()>> {
    let mut mark = [0; 4];
    if !read_exact(end.rx(), &mut mark)? {
        return Ok(None);
    }
    let bad = || std::io::Error::from(std::io::ErrorKind::InvalidData);
    let len = rpc::fragment_len(mark)
        .filter(|&l| l <= buf.len())
        .ok_or_else(bad)?;
    read_exact(end.rx(), &mut buf[..len])?;
    let xid = rpc::decode_call(&buf[..len]).ok_or_else(bad)?;
    let mut reply = [0; rpc::REPLY_LEN];
    rpc::encode_reply(xid, &mut reply);
    let mut record = [0; 4 + rpc::REPLY_LEN];
    record[..4].copy_from_slice(&rpc::record_mark(rpc::REPLY_LEN));
    record[4..].copy_from_slice(&reply);
    write_all(end.tx(), &record).map(Some)
}

struct RoundTrip {
    client: End,
    exchange: Exchange,
    seq: u32,
    server: Peer,
}

impl RoundTrip {
    fn create(
        options: &WorkloadOptions,
        channel: anyhow::Result<Channel>,
        exchange: Exchange,
    ) -> anyhow::Result<Box<dyn Workload>> {
        let Channel { client, server } = channel?;
        let second = second_cpu(&options.setup.pin);
        let peer = Peer::spawn(second, || exchange.serve(&server))?;
        drop(server); // only the peer holds the server end now
        Ok(Box::new(RoundTrip {
            client,
            exchange,
            seq: 0,
            server: peer,
        }))
    }
}

impl Workload for RoundTrip {
    fn settle(&mut self) -> anyhow::Result<()> {
        self.server.wait_until_idle()
    }

    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for _ in 0..ops {
            self.seq = self.seq.wrapping_add(1);
            self.exchange.round_trip(&self.client, self.seq)?;
        }
        Ok(start.elapsed())
    }
}

/// socket() + connect() + close() against a forked server that accepts, waits for the client's
/// close and closes too (as lmbench's lat_connect). connect() does not wait for accept(), so
/// when the server is descheduled for a while the accept queue fills; a full queue drops the
/// SYN and that connect stalls for the 1 s SYN retransmit (seen at listen(128) on a loaded
/// machine: ListenOverflows). Hence the largest backlog the kernel allows.
struct Connect {
    addr: SocketAddr,
    server: Peer,
}

impl Connect {
    fn create(options: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        let listener = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let fd: RawFd = listener.as_raw_fd();
        // SAFETY: re-listening on our listening socket only changes its backlog (capped by
        // net.core.somaxconn).
        if unsafe { libc::listen(fd, 65535) } != 0 {
            anyhow::bail!("listen: {}", std::io::Error::last_os_error());
        }
        let second = second_cpu(&options.setup.pin);
        let peer = Peer::spawn(second, || loop {
            // SAFETY: accept on the listening socket the peer inherited; the read returns at the
            // client's close (EOF); then close what accept returned.
            let conn = unsafe { libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut()) };
            if conn >= 0 {
                let mut byte = [0u8; 1];
                let _ = read_exact(conn, &mut byte);
                unsafe { libc::close(conn) };
            } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return 1;
            }
        })?;
        drop(listener);
        Ok(Box::new(Connect { addr, server: peer }))
    }
}

impl Workload for Connect {
    fn settle(&mut self) -> anyhow::Result<()> {
        self.server.wait_until_idle()
    }

    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for _ in 0..ops {
            drop(TcpStream::connect(self.addr).context("connect")?);
        }
        Ok(start.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use crate::workloads::tests::{my_children, options, run_and_drop};

    #[test]
    fn every_exchange_really_round_trips() {
        // run() fails unless each answer matches its request (echoed bytes, RPC xids).
        for name in [
            "lat_pipe",
            "lat_unix",
            "lat_udp",
            "lat_rpc_udp",
            "lat_tcp",
            "lat_rpc_tcp",
        ] {
            run_and_drop(name, 50);
        }
        run_and_drop("lat_tcp_connect", 20);
    }

    #[test]
    fn the_server_end_runs_on_the_second_pinned_cpu() {
        let cpus = std::thread::available_parallelism().unwrap().get();
        let second = cpus.min(2) - 1;
        let dir = tempfile::tempdir().unwrap();
        let mut opts = options(dir.path());
        opts.setup.pin = vec![0, second];
        let spec = crate::workloads::find("lat_tcp").unwrap();
        let mut w = (spec.create)(&opts).unwrap();
        w.run(5).unwrap();
        let server = &my_children()[0];
        let status = std::fs::read_to_string(format!("/proc/{server}/status")).unwrap();
        let allowed = status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap();
        assert_eq!(
            allowed.split_whitespace().nth(1),
            Some(second.to_string().as_str())
        );
    }
}
