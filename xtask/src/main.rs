//! `cargo xtask`: set-up, build, run and test hookprof on a fresh machine.
mod dist;
mod dist_test;
mod docs;
mod fuzz;
mod guest_lanes;
mod install;
mod lanes;
mod licenses;
mod phases;
mod setup;
mod vm;

use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use phases::Phases;
use setup::Needs;

#[derive(Parser)]
#[command(about = "Set up, build, run and test hookprof")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install whatever is missing of the toolchain and of what the tests use (apt packages,
    /// the `debian` toolchain link, bpf-linker, the checkers). Idempotent; needs root.
    Setup,
    /// The build's set-up if needed, then a release build (target/release/hookprof); with
    /// `--arch` of the other architecture, a statically linked cross build
    /// (target/cross/TRIPLE/release/hookprof).
    Build {
        /// amd64 (x86_64) or arm64 (aarch64) [default: this host's].
        #[arg(long, value_enum, value_name = "ARCH")]
        arch: Option<hookprof_guest::Arch>,
    },
    /// The build's set-up and the build, then run hookprof as root (`cargo xtask run -- run
    /// --workloads stat`); after it, the man pages and completions installed as `install` does.
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The build's set-up and the build, then install hookprof into PREFIX/bin, its man pages
    /// (`man hookprof-run`) and its bash, zsh and fish completions. Needs root for /usr/local.
    Install {
        #[arg(long, value_name = "DIR", default_value = install::DEFAULT_PREFIX)]
        prefix: std::path::PathBuf,
    },
    /// Set-up, fmt check, clippy, unit tests, integration tests on this kernel, a short fuzz run
    /// of the parsers, the package test (`dist-test`, which builds both architectures'
    /// packages), then the VM tests, the other architecture's guest smoke (`vm-test --arch`)
    /// and the `hookprof ab` tests (which boot guests).
    Test {
        /// Skip the tests that boot qemu guests.
        #[arg(long)]
        no_vm: bool,
    },
    /// Fuzz each parser of outside input briefly (part of `test`).
    Fuzz,
    /// Build the manual (docs/, mdBook) into target/book, with the results schema it
    /// publishes written from the binary; installs mdBook first if it is missing.
    Docs,
    /// Build the release artifacts into target/dist, for x86_64 and arm64 each: a statically
    /// linked hookprof and a Debian package with its man pages and shell completions; prints
    /// their sha256.
    Dist,
    /// `dist`, then install the package into a clean Debian root (no Rust, no LLVM) and run
    /// hookprof there, chrooted (part of `test`; needs root).
    DistTest,
    /// Boot a kernel under qemu and run COMMAND in it as root.
    Vm(vm::VmArgs),
    /// Build the integration tests and run the kernel-level ones inside the guest.
    VmTest(vm::VmTestArgs),
    /// Download and unpack every kernel `test` boots, with its base initramfs, into the guests'
    /// cache (what `test` does beside the build).
    PrepareGuests,
    /// The kernel matrix: the guest smoke (`kernels::` tests) on 5.10, 6.1, 6.12 and sid's
    /// newest kernel, one boot each, and a table of what each kernel took.
    VmMatrix(vm::VmMatrixArgs),
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Cmd::Setup => setup::ensure(Needs::Test)?,
        Cmd::Build { arch } => match arch.filter(|a| Some(*a) != hookprof_guest::Arch::host()) {
            None => {
                setup::ensure(Needs::Run)?;
                build_release()?
            }
            Some(arch) => {
                setup::ensure(Needs::Cross)?;
                let binary = dist::build_static(dist::Target(arch))?;
                println!("xtask build: {}", binary.display());
            }
        },
        Cmd::Run { args } => {
            setup::ensure(Needs::Run)?;
            build_release()?;
            let status = Command::new(hookprof_bin())
                .args(&args)
                .status()
                .context("run hookprof")?;
            // After the run: generating the pages builds the dist_assets example (minutes on
            // a fresh machine), which must not delay the first answer.
            install_docs_for_run();
            return Ok(exit_code(status.code().unwrap_or(1)));
        }
        Cmd::Install { prefix } => {
            setup::ensure(Needs::Run)?;
            build_release()?;
            install::install(&prefix)?;
        }
        Cmd::Test { no_vm } => test_all(no_vm)?,
        Cmd::Fuzz => fuzz::run_all()?,
        Cmd::Docs => docs::build()?,
        Cmd::Dist => {
            setup::ensure(Needs::Cross)?;
            dist::dist(&dist::Target::ALL)?;
        }
        Cmd::DistTest => {
            setup::ensure(Needs::Test)?;
            dist_test::run()?;
        }
        Cmd::Vm(args) => {
            setup::ensure(Needs::Test)?;
            return Ok(exit_code(vm::vm(&args)?));
        }
        Cmd::VmTest(args) => {
            setup::ensure(Needs::Test)?;
            return Ok(exit_code(vm::vm_test(&args)?));
        }
        Cmd::PrepareGuests => {
            setup::ensure(Needs::Test)?;
            vm::prepare_all()?;
        }
        Cmd::VmMatrix(args) => {
            setup::ensure(Needs::Test)?;
            return Ok(exit_code(vm::vm_matrix(&args)?));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cargo xtask test`: set-up, lint and build, the host's tests, the fuzzers, the package test,
/// then (unless `no_vm`) the guests: the suite, the other architecture's smoke, the kernel
/// matrix and `hookprof ab`. Ends with the table of each part's wall time, pass or fail.
fn test_all(no_vm: bool) -> Result<()> {
    let phases = Phases::new();
    let result = test_parts(no_vm, &phases);
    phases.print();
    result?;
    println!("xtask: all tests passed");
    Ok(())
}

fn test_parts(no_vm: bool, phases: &Phases) -> Result<()> {
    // The host's tests and `ab` run this binary.
    // SAFETY: no other thread runs yet; the variable is read by the test processes.
    unsafe { std::env::set_var("HOOKPROF_BIN", hookprof_bin()) };
    phases.time("set-up", || setup::ensure(Needs::Test))?;
    // Made while the build has the CPUs (both mostly wait on the mirror), ready before anything
    // is timed: the package test's clean root and every kernel the guests boot. A failure to
    // make them fails the part that needs them, not the tests before it.
    let clean_root = beside(
        phases,
        "clean root (beside the build)",
        dist_test::cached_root_tar,
    );
    let kernels =
        (!no_vm).then(|| beside(phases, "guest kernels (beside the build)", vm::prepare_all));
    let built = lint_and_build(phases);
    let root = joined(clean_root, "making the clean root");
    let kernels = kernels.map(|k| joined(k, "preparing the guest kernels"));
    built?;
    phases.time("host tests", test_host)?;
    // The fuzzers and the package test want the second CPU the guests leave (a TCG guest keeps
    // about one busy); both build in target dirs of their own or wait on cargo's lock.
    let package = beside_guests(phases, root);
    let guests = match kernels {
        Some(kernels) => kernels
            .context("the guests' kernels")
            .and_then(|()| test_guests(phases)),
        None => Ok(()),
    };
    let package = joined(package, "the fuzzers and the package test");
    guests.and(package)
}

/// The fuzzers, then the package test in its clean root, on a thread of their own.
fn beside_guests(
    phases: &Phases,
    root: Result<std::path::PathBuf>,
) -> std::thread::JoinHandle<Result<()>> {
    let phases = phases.clone();
    std::thread::spawn(move || {
        phases.time("fuzz (beside the guests)", fuzz::run_all)?;
        root.context("the package test's clean root")?;
        phases.time("dist-test (beside the guests)", dist_test::run)
    })
}

/// `part` on a thread of its own, timed as `name`.
fn beside<T: Send + 'static>(
    phases: &Phases,
    name: &'static str,
    part: fn() -> Result<T>,
) -> std::thread::JoinHandle<Result<T>> {
    let phases = phases.clone();
    std::thread::spawn(move || phases.time(name, part))
}

fn joined<T>(handle: std::thread::JoinHandle<Result<T>>, what: &str) -> Result<T> {
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("{what} panicked"))?
}

/// The guest suite, with the other architecture's smoke built beside it; then the boots that
/// follow it, side by side (`guest_lanes`).
fn test_guests(phases: &Phases) -> Result<()> {
    let other = match hookprof_guest::Arch::host().map(hookprof_guest::Arch::other) {
        Some(arch) => Some(guest_lanes::OtherSmoke {
            arch,
            started: Instant::now(),
            build: vm::Prebuild::start(arch)?,
        }),
        None => None,
    };
    let code = phases.time("guest suite", || vm::vm_test(&vm::VmTestArgs::default()))?;
    if code != 0 {
        bail!("tests in the guest failed (exit code {code})");
    }
    guest_lanes::after_the_suite(phases, other)
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Where cargo puts the build (honours CARGO_TARGET_DIR).
pub fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(Into::into)
        .unwrap_or_else(|| workspace_root().join("target"))
}

pub fn hookprof_bin() -> std::path::PathBuf {
    target_dir().join("release/hookprof")
}

/// Runs a command in the workspace root, failing with its name if it fails.
pub fn cargo(args: &[&str]) -> Result<()> {
    println!("xtask: cargo {}", args.join(" "));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("run cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

fn build_release() -> Result<()> {
    cargo(&["build", "--release", "--bin", "hookprof"])
}

/// The man pages and completions `run` installs beside its build, under the default prefix;
/// one line instead where it cannot (not root, or a failure), which leaves the run's exit code
/// as hookprof's.
fn install_docs_for_run() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("xtask run: not root: man pages not installed (sudo cargo xtask install)");
        return;
    }
    if let Err(e) = install::install_docs(std::path::Path::new(install::DEFAULT_PREFIX)) {
        eprintln!("xtask run: man pages not installed: {e:#}");
    }
}

/// The licence check, fmt, clippy and the release build: what `test_host` needs first.
fn lint_and_build(phases: &Phases) -> Result<()> {
    phases.time("licences and fmt", || {
        licenses::check()?;
        cargo(&["fmt", "--all", "--", "--check"])
    })?;
    phases.time("clippy", || {
        cargo(&["clippy", "--all-targets", "--", "-D", "warnings"])?;
        // --all-targets leaves out `test = false` targets: lint the guest tests explicitly.
        cargo(&[
            "clippy",
            "-p",
            "hookprof-tests",
            "--test",
            "guest",
            "--test",
            "ab",
            "--test",
            "guest_smoke",
            "--",
            "-D",
            "warnings",
        ])
    })?;
    phases.time("release build", build_release)
}

fn test_host() -> Result<()> {
    // Release, like the binary: the integration tests measure, and share its build.
    cargo(&[
        "test",
        "--release",
        "--workspace",
        "--exclude",
        "profiler-ebpf",
    ])
}
