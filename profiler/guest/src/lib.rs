//! A throw-away qemu guest: a stock kernel (a Debian package, an image file, or the running
//! kernel's) booted with an initramfs-only root filesystem that runs one command as root,
//! with a host directory shared read-write at /mnt/host (binaries in, results out).
//!
//! Used by `cargo xtask vm`/`vm-test` and by `hookprof ab`. It builds no eBPF, so xtask can
//! depend on it before the eBPF toolchain is installed.
mod archive;
pub mod debian;
mod initramfs;
mod kernel;
mod modules;
pub mod package;
mod qemu;

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};

pub use debian::Arch;
pub use initramfs::{which, Payload};
pub use kernel::{
    check_format as check_kernel_format, default_spec as default_kernel, Kernel, KernelSpec,
    DEFAULT_ARM64_SUITE, DEFAULT_SUITE,
};
pub use qemu::{check_lsm, kvm_usable, Accel, Outcome, TcgThreads};

/// The guest's LSM stack: the Debian default without tomoyo, with bpf for the BPF LSM.
pub const DEFAULT_LSM: &str = "lockdown,capability,landlock,yama,apparmor,bpf";

/// Where status lines and the guest's console go, each status line prefixed with a tag.
#[derive(Clone)]
pub struct Log {
    tag: String,
    out: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Log {
    pub fn new(tag: impl Into<String>, out: impl Write + Send + 'static) -> Self {
        Log {
            tag: tag.into(),
            out: Arc::new(Mutex::new(Box::new(out))),
        }
    }

    pub fn stdout(tag: impl Into<String>) -> Self {
        Self::new(tag, std::io::stdout())
    }

    /// A status line: `tag: message`.
    pub fn say(&self, message: impl Display) {
        self.raw(format!("{}: {message}\n", self.tag).as_bytes());
    }

    /// Console output as it comes.
    fn raw(&self, bytes: &[u8]) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(bytes);
        let _ = out.flush();
    }
}

/// The guest options a command line offers (`cargo xtask vm`, `hookprof ab`).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct GuestArgs {
    /// The guest kernel's `lsm=` list [default: lockdown,capability,landlock,yama,apparmor,bpf].
    #[arg(long, value_name = "LIST")]
    pub lsm: Option<String>,
    /// Accelerator: auto uses KVM only where it can boot a stock kernel.
    #[arg(long, value_enum, default_value_t)]
    pub accel: Accel,
    /// Under TCG: one host thread for all vCPUs, or one each.
    #[arg(long, value_enum, default_value_t)]
    pub tcg_threads: TcgThreads,
    /// Boot without `quiet`: every kernel message on the console.
    #[arg(long)]
    pub verbose: bool,
}

impl GuestArgs {
    /// Checks the options and adds what the caller decides: timeout, log, stop flag.
    pub fn options(
        &self,
        timeout: Duration,
        log: Log,
        stop: Arc<AtomicBool>,
    ) -> Result<BootOptions> {
        let lsm = self.lsm.clone().unwrap_or_else(|| DEFAULT_LSM.to_string());
        check_lsm(&lsm)?;
        Ok(BootOptions {
            lsm,
            accel: self.accel,
            tcg_threads: self.tcg_threads,
            timeout,
            verbose: self.verbose,
            log,
            stop,
        })
    }

    /// Whether guests of `arch` will be emulated (TCG), and why.
    pub fn emulated(&self, arch: Arch) -> (bool, String) {
        match self.accel {
            Accel::Kvm => (false, "accel kvm (--accel kvm)".into()),
            Accel::Tcg => (true, "accel tcg (--accel tcg)".into()),
            Accel::Auto => {
                let (kvm, why) = kvm_usable(arch);
                (!kvm, why)
            }
        }
    }
}

/// How to boot: the same for every boot of a session.
#[derive(Clone)]
pub struct BootOptions {
    /// The kernel's `lsm=` list.
    pub lsm: String,
    pub accel: Accel,
    pub tcg_threads: TcgThreads,
    /// The guest is killed after this long.
    pub timeout: Duration,
    /// Boot without `quiet`: every kernel message on the console.
    pub verbose: bool,
    pub log: Log,
    /// Set by SIGINT/SIGTERM (see `stop_on_signals`): the guest is killed.
    pub stop: Arc<AtomicBool>,
}

/// A flag that SIGINT and SIGTERM set, for `BootOptions::stop`. Register it once per process.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("install signal handler")?;
    }
    Ok(stop)
}

/// A kernel ready to boot: its image unpacked and its base initramfs built (both cached).
pub struct Machine {
    pub kernel: Kernel,
    base: PathBuf,
}

impl Machine {
    /// A guest of `arch`. `spec` (see `KernelSpec::parse`): a Debian kernel package or suite
    /// (default: `default_kernel(arch)`), the path of a kernel image, or `running` (this
    /// host's kernel from /boot).
    pub fn prepare(spec: Option<&str>, arch: Arch, log: &Log) -> Result<Machine> {
        let cache = cache_dir()?;
        let kernel = kernel::resolve(spec, arch, &cache, log)?;
        let base = initramfs::base(&kernel, &cache, log)?;
        Ok(Machine { kernel, base })
    }

    /// Boots the guest with `payload`, runs `command` there with `env`, `share` mounted at
    /// /mnt/host, and waits for the guest to power off, time out or be stopped.
    pub fn boot(
        &self,
        options: &BootOptions,
        payload: Payload,
        command: &[String],
        env: &[(String, String)],
        share: &Path,
    ) -> Result<Outcome> {
        check_lsm(&options.lsm)?;
        // Everything of this boot lives here and is removed on return.
        let work = tempfile::Builder::new().prefix("hookprof-vm-").tempdir()?;
        let initrd = work.path().join("initrd");
        payload.write_initrd(&self.base, command, env, &initrd)?;
        options.log.say(format_args!(
            "kernel {} ({})",
            self.kernel.name,
            self.kernel.image.display()
        ));
        qemu::run(&qemu::Guest {
            arch: self.kernel.arch,
            image: &self.kernel.image,
            initrd: &initrd,
            share,
            options,
        })
    }
}

/// `$HOOKPROF_VM_CACHE`, else `$XDG_CACHE_HOME/hookprof-vm`, else `~/.cache/hookprof-vm`.
pub fn cache_dir() -> Result<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let dir = if let Some(d) = var("HOOKPROF_VM_CACHE") {
        PathBuf::from(d)
    } else if let Some(d) = var("XDG_CACHE_HOME") {
        PathBuf::from(d).join("hookprof-vm")
    } else if let Some(home) = var("HOME") {
        PathBuf::from(home).join(".cache/hookprof-vm")
    } else {
        bail!("no cache directory: set HOOKPROF_VM_CACHE");
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}

/// A short hex digest, for cache keys.
fn short_hash(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex(&Sha256::digest(data))
}

/// The first 8 bytes of a digest in hex: plenty to tell cache entries apart.
fn hex(digest: &[u8]) -> String {
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}
