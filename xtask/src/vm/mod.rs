//! The qemu test guest: `cargo xtask vm -- COMMAND` boots a stock kernel (by default the Debian
//! kernel bookworm's `linux-image-amd64` points to; for `--arch arm64`, trixie's
//! `linux-image-arm64`) with an initramfs-only root filesystem and runs COMMAND in it as root;
//! `cargo xtask vm-test` runs the `guest` integration tests that way (`smoke`: the short ones,
//! on either architecture), `cargo xtask vm-matrix` the kernel matrix's smoke.
pub mod matrix;
mod smoke;
mod test;
mod test_binary;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hookprof_guest::{Arch, GuestArgs, Log, Machine, Outcome, Payload};

pub use matrix::{vm_matrix, VmMatrixArgs};
pub use smoke::Prebuild;
pub use test::{build_guest_tests, vm_test, VmTestArgs};

const DEFAULT_TIMEOUT_S: u64 = 900;
/// `boot`'s exit code when the guest kernel panicked (a soft lockup panics it).
pub const GUEST_PANICKED: i32 = 125;

/// How to boot the guest (shared by `vm` and `vm-test`).
#[derive(clap::Args, Default, Clone)]
pub struct BootArgs {
    /// The guest's architecture: amd64 (x86_64, qemu-system-x86_64) or arm64 (aarch64,
    /// qemu-system-aarch64; emulated on an x86 host) [default: this host's].
    #[arg(long, value_enum, value_name = "ARCH")]
    pub arch: Option<Arch>,
    /// Kernel: a Debian suite (`sid`, `bullseye`: its current linux-image-ARCH), a package
    /// from a suite (`linux-image-amd64@trixie`; without `@SUITE`, from bookworm), the path of
    /// a vmlinux or bzImage (arm64: an Image), or `running` (this host's kernel, from /boot)
    /// [default: linux-image-amd64@bookworm; arm64: linux-image-arm64@trixie].
    #[arg(long, value_name = "SUITE|PKG[@SUITE]|PATH")]
    pub kernel: Option<String>,
    /// Kill the guest after this many seconds [default: 900; vm-test: 2400].
    #[arg(long, value_name = "S")]
    pub timeout: Option<u64>,
    /// Host directory shared read-write at /mnt/host in the guest (env VMTEST_SHARE)
    /// [default: a fresh temporary directory].
    #[arg(long, value_name = "DIR")]
    pub share: Option<PathBuf>,
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl BootArgs {
    /// The guest's architecture: the one asked for, else this host's.
    pub fn arch(&self) -> Result<Arch> {
        self.arch
            .or_else(Arch::host)
            .context("this host is neither x86_64 nor aarch64: name the guest's --arch")
    }
}

#[derive(clap::Args, Default)]
pub struct VmArgs {
    #[command(flatten)]
    pub boot: BootArgs,
    /// Also copy this host file (with its libraries) into the guest at the same path. Repeatable.
    #[arg(long = "bin", value_name = "PATH")]
    pub bins: Vec<PathBuf>,
    /// Set VAR=VALUE in COMMAND's environment. Repeatable.
    #[arg(long = "env", value_name = "VAR=VALUE")]
    pub env: Vec<String>,
    /// The command to run in the guest, as root.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

pub fn vm(args: &VmArgs) -> Result<i32> {
    let env = args
        .env
        .iter()
        .map(|e| match e.split_once('=') {
            Some((k, v)) if valid_env_name(k) => Ok((k.to_string(), v.to_string())),
            _ => bail!("--env {e:?}: expected VAR=VALUE"),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut payload = Payload::for_arch(args.boot.arch()?);
    let command = payload.add_command(&args.command)?;
    for bin in &args.bins {
        payload.add_file(bin)?;
    }
    boot(&args.boot, payload, &command, &env)
}

/// Boots the guest with `payload`, runs `command` there and returns its exit code
/// (124 on timeout, 130 on Ctrl-C, 125 when the guest kernel panicked).
fn boot(
    args: &BootArgs,
    payload: Payload,
    command: &[String],
    env: &[(String, String)],
) -> Result<i32> {
    let log = Log::stdout("xtask vm");
    let timeout = args.timeout.unwrap_or(DEFAULT_TIMEOUT_S);
    let options = args.guest.options(
        Duration::from_secs(timeout),
        log.clone(),
        hookprof_guest::stop_on_signals()?,
    )?;
    let machine = Machine::prepare(args.kernel.as_deref(), args.arch()?, &log)?;

    let work = tempfile::Builder::new().prefix("hookprof-vm-").tempdir()?;
    let share = match &args.share {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("create share {}", dir.display()))?;
            std::fs::canonicalize(dir)?
        }
        None => {
            let dir = work.path().join("share");
            std::fs::create_dir(&dir)?;
            dir
        }
    };
    Ok(
        match machine.boot(&options, payload, command, env, &share)? {
            Outcome::Exited(code) => {
                println!("xtask vm: command exited with {code}");
                code
            }
            Outcome::TimedOut => {
                eprintln!("xtask vm: error: guest still running after {timeout} s: killed it");
                124
            }
            Outcome::Interrupted => {
                eprintln!("xtask vm: interrupted: killed the guest");
                130
            }
            Outcome::Panicked => {
                eprintln!(
                    "xtask vm: error: the guest kernel panicked (its stack is on the console above)"
                );
                GUEST_PANICKED
            }
            Outcome::NoExitCode => {
                bail!("the guest stopped without reporting the command's exit code (see its console above)")
            }
        },
    )
}

/// Every kernel `cargo xtask test`'s guests boot (the suite's and `ab`'s default, the kernel
/// matrix's, the other architecture's default), downloaded and unpacked with its base initramfs
/// into the cache: done beside the build, so no guest waits on the mirror.
pub fn prepare_all() -> Result<()> {
    let host = Arch::host().context("the guests run on x86_64 and aarch64 hosts")?;
    let log = Log::stdout("xtask guests");
    let mut kernels: Vec<(Option<&str>, Arch)> = vec![(None, host), (None, host.other())];
    kernels.extend(matrix::MATRIX.iter().map(|&(_, k)| (Some(k), host)));
    for (kernel, arch) in kernels {
        Machine::prepare(kernel, arch, &log)?;
    }
    Ok(())
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
