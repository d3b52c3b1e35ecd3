//! Boots the guest under qemu, streams its serial console to stdout, and stops it on the
//! guest's power-off, on a timeout or on Ctrl-C.
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The line init prints after the payload, with its exit code.
const EXIT_MARKER: &str = "HOOKPROF-VM-EXIT=";
/// The file init writes the exit code to in the share (robust against console noise).
pub const EXIT_FILE: &str = ".hookprof-vm-exit";

#[derive(clap::ValueEnum, Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum Accel {
    /// KVM when the CPU has VMX/SVM and /dev/kvm opens, else TCG.
    #[default]
    Auto,
    Kvm,
    Tcg,
}

/// How TCG runs the guest's vCPUs.
#[derive(clap::ValueEnum, Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum TcgThreads {
    /// One host thread for all vCPUs, taking turns (no guest soft lockups).
    // The default because with a thread each (qemu 7.2), a vCPU can keep running a stale
    // translation of kernel code another vCPU patched (attaching a probe flips static keys
    // with int3-based text_poke_bp) and loop on an int3 that memory no longer holds.
    #[default]
    Single,
    /// A host thread per vCPU.
    Multi,
}

use crate::debian::Arch;
use crate::{BootOptions, Log};

/// The qemu that runs a guest of `arch`, and the Debian package that has it.
fn qemu_for(arch: Arch) -> (&'static str, &'static str) {
    match arch {
        Arch::Amd64 => ("qemu-system-x86_64", "qemu-system-x86"),
        Arch::Arm64 => ("qemu-system-aarch64", "qemu-system-arm"),
    }
}

pub struct Guest<'a> {
    pub arch: Arch,
    pub image: &'a Path,
    pub initrd: &'a Path,
    pub share: &'a Path,
    pub options: &'a BootOptions,
}

pub enum Outcome {
    /// The payload's exit code, from the guest's marker line or the share.
    Exited(i32),
    /// qemu ended (guest powered off or crashed) without reporting an exit code.
    NoExitCode,
    /// The guest kernel panicked (a soft lockup panics it, see `run`); the console has the stack.
    Panicked,
    TimedOut,
    Interrupted,
}

pub fn run(g: &Guest) -> Result<Outcome> {
    let (o, log) = (g.options, &g.options.log);
    let (qemu_binary, qemu_package) = qemu_for(g.arch);
    let kvm = match o.accel {
        Accel::Kvm => {
            if Arch::host() != Some(g.arch) {
                bail!(
                    "--accel kvm: KVM runs guests of the host's own architecture, not {}",
                    g.arch
                );
            }
            true
        }
        Accel::Tcg => false,
        Accel::Auto => {
            let (usable, why) = kvm_usable(g.arch);
            log.say(why);
            usable
        }
    };
    let console = match g.arch {
        Arch::Amd64 => "ttyS0",
        Arch::Arm64 => "ttyAMA0", // the virt machine's PL011
    };
    // A soft lockup panics the guest instead of hanging it until the timeout: the panic prints
    // the stuck CPUs' stacks even under `quiet`, and panic=-1 ends qemu (-no-reboot) at once.
    let mut append = format!(
        "console={console} panic=-1 softlockup_panic=1 softlockup_all_cpu_backtrace=1 lsm={}",
        o.lsm
    );
    if !o.verbose {
        append += " quiet";
    }
    let mut qemu = Command::new(qemu_binary);
    qemu.args(["-nodefaults", "-no-user-config", "-no-reboot"])
        .args(["-display", "none", "-monitor", "none", "-serial", "stdio"])
        .args(["-m", "2G", "-smp", "2"]);
    if g.arch == Arch::Arm64 {
        // The generic virtual board: PL011 console, PSCI power-off, PCIe for virtio.
        qemu.args([
            "-machine",
            if kvm { "virt,gic-version=host" } else { "virt" },
        ]);
    }
    if kvm {
        qemu.args(["-accel", "kvm", "-cpu", "host"]);
    } else {
        let thread = match o.tcg_threads {
            TcgThreads::Single => "tcg,thread=single",
            TcgThreads::Multi => "tcg,thread=multi",
        };
        let cpu = match g.arch {
            Arch::Amd64 => "max",
            // pointer authentication with qemu's own cipher: the architected one (QARMA) costs
            // TCG dearly on every signed return
            Arch::Arm64 => "max,pauth-impdef=on",
        };
        qemu.args(["-accel", thread, "-cpu", cpu]);
        if g.arch == Arch::Amd64 {
            // otherwise the guest finds the TSC unstable and falls back to a slow clocksource
            append += " tsc=reliable";
        }
    }
    qemu.arg("-kernel")
        .arg(g.image)
        .arg("-initrd")
        .arg(g.initrd)
        .arg("-append")
        .arg(&append)
        .arg("-virtfs")
        .arg(format!(
            "local,path={},mount_tag=host0,security_model=none,id=host0",
            // qemu's option syntax escapes a comma by doubling it
            g.share.display().to_string().replace(',', ",,")
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Ctrl-C reaches our process alone; it stops qemu itself and cleans up.
        .process_group(0);
    // SAFETY: prctl is async-signal-safe; it makes qemu die with us, even on SIGKILL.
    unsafe {
        qemu.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    log.say(format_args!(
        "{qemu_binary} ({}), lsm={}, timeout {} s",
        if kvm { "kvm" } else { "tcg" },
        o.lsm,
        o.timeout.as_secs()
    ));
    let _ = std::fs::remove_file(g.share.join(EXIT_FILE));
    let start = Instant::now();
    let mut child = qemu.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow::anyhow!(
            "{qemu_binary} not found: install package {qemu_package} (`cargo xtask setup` does)"
        ),
        _ => anyhow::Error::new(e).context(format!("start {qemu_binary}")),
    })?;
    let console = child.stdout.take().context("qemu stdout")?;
    let console_log = log.clone();
    let reader = std::thread::spawn(move || stream_console(console, &console_log));

    let outcome = loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                log.say(format_args!("{qemu_binary} exited with {status}"));
            }
            break None;
        }
        if o.stop.load(Ordering::Relaxed) {
            break Some(Outcome::Interrupted);
        }
        if start.elapsed() >= o.timeout {
            break Some(Outcome::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if outcome.is_some() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let console = reader.join().unwrap_or_default();
    log.say(format_args!(
        "guest ran {:.1} s",
        start.elapsed().as_secs_f64()
    ));
    if let Some(o) = outcome {
        return Ok(o);
    }
    let from_share = std::fs::read_to_string(g.share.join(EXIT_FILE))
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let _ = std::fs::remove_file(g.share.join(EXIT_FILE));
    Ok(match from_share.or(console.exit_code) {
        Some(code) => Outcome::Exited(code),
        None if console.panicked => Outcome::Panicked,
        None => Outcome::NoExitCode,
    })
}

/// What the console told of the guest's end.
#[derive(Default)]
struct ConsoleEnd {
    /// The last exit code marker seen.
    exit_code: Option<i32>,
    /// The kernel printed a panic.
    panicked: bool,
}

/// Copies the console to the log line by line, watching for the exit code marker and a panic.
fn stream_console(console: impl std::io::Read, log: &Log) -> ConsoleEnd {
    let mut reader = BufReader::new(console);
    let mut line = Vec::new();
    let mut end = ConsoleEnd::default();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return end,
            Ok(_) => {}
        }
        log.raw(&line);
        let text = String::from_utf8_lossy(&line);
        if let Some(rest) = text.trim().strip_prefix(EXIT_MARKER) {
            end.exit_code = rest.parse().ok();
        }
        end.panicked |= text.contains("Kernel panic - not syncing");
    }
}

/// KVM runs guests of the host's own architecture only, and works only with hardware
/// virtualisation behind it: on x86 a /dev/kvm that opens is not enough (e.g. kvm-pvm cannot
/// boot a stock kernel), so the CPU flags must show VMX or SVM too.
pub fn kvm_usable(arch: Arch) -> (bool, String) {
    if Arch::host() != Some(arch) {
        return (
            false,
            format!(
                "accel tcg: an {arch} guest on an {} host",
                std::env::consts::ARCH
            ),
        );
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hw = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    if arch == Arch::Amd64 && !hw {
        return (false, "accel tcg: the CPU has no vmx/svm flag".into());
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        Ok(_) => (
            true,
            "accel kvm: /dev/kvm opens (and vmx/svm on x86)".into(),
        ),
        Err(e) => (false, format!("accel tcg: /dev/kvm: {e}")),
    }
}

/// Fails early with a clear message if the lsm list is not something a kernel could take.
pub fn check_lsm(list: &str) -> Result<()> {
    let ok = !list.is_empty()
        && list
            .split(',')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    if !ok {
        bail!("--lsm {list:?}: expected a comma-separated list of LSM names");
    }
    Ok(())
}
