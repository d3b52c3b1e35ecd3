//! `cargo xtask`: set-up, build, run and test hookprof on a fresh machine.
mod dist;
mod dist_test;
mod docs;
mod fuzz;
mod install;
mod licenses;
mod setup;
mod vm;

use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
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
        Cmd::VmMatrix(args) => {
            setup::ensure(Needs::Test)?;
            return Ok(exit_code(vm::vm_matrix(&args)?));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cargo xtask test`: set-up, lint and build, the host's tests, the fuzzers, the package test,
/// then (unless `no_vm`) the guests: the suite, the other architecture's smoke, the kernel
/// matrix and `hookprof ab`.
fn test_all(no_vm: bool) -> Result<()> {
    setup::ensure(Needs::Test)?;
    // The package test's clean root is made while the build runs (debootstrap mostly
    // waits on the mirror) and is ready before anything is timed; a failure to make
    // it fails the package test, not the tests before it.
    let clean_root = std::thread::spawn(dist_test::cached_root_tar);
    let built = lint_and_build();
    let root = clean_root
        .join()
        .map_err(|_| anyhow::anyhow!("making the clean root panicked"))?;
    built?;
    test_host()?;
    fuzz::run_all()?;
    root.context("the package test's clean root")?;
    dist_test::run()?;
    if !no_vm {
        // The other architecture's smoke is built on one CPU while the guest suite
        // and the kernel matrix run their TCG guests; it boots once both are done.
        let other = hookprof_guest::Arch::host().map(hookprof_guest::Arch::other);
        let prebuild = other.map(vm::Prebuild::start).transpose()?;
        let code = vm::vm_test(&vm::VmTestArgs::default())?;
        if code != 0 {
            bail!("tests in the guest failed (exit code {code})");
        }
        // Each TCG guest runs on one CPU: the other architecture's smoke boots on the
        // second while the kernel matrix boots its kernels one after another.
        let other_smoke = other.zip(prebuild).map(|(other, prebuild)| {
            std::thread::spawn(move || -> Result<()> {
                prebuild.wait()?;
                let code = vm::vm_test(&vm::VmTestArgs::of_arch(other))?;
                if code != 0 {
                    bail!("the {other} guest's smoke failed (exit code {code})");
                }
                Ok(())
            })
        });
        let matrix = kernel_matrix();
        if let Some(smoke) = other_smoke {
            smoke
                .join()
                .map_err(|_| anyhow::anyhow!("the other architecture's smoke panicked"))??;
        }
        matrix?;
        test_ab()?;
    }
    println!("xtask: all tests passed");
    Ok(())
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
fn lint_and_build() -> Result<()> {
    licenses::check()?;
    cargo(&["fmt", "--all", "--", "--check"])?;
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
    ])?;
    build_release()
}

fn test_host() -> Result<()> {
    // Release, like the binary: the integration tests measure, and share its build.
    // SAFETY: single-threaded at this point; the variable is read by the test processes.
    unsafe { std::env::set_var("HOOKPROF_BIN", hookprof_bin()) };
    cargo(&[
        "test",
        "--release",
        "--workspace",
        "--exclude",
        "profiler-ebpf",
    ])
}

/// The kernel matrix's smokes: each kernel of the matrix but the full suite's boots with the
/// smoke alone (the full suite, which passed, checks all the smoke does on its kernel). Prints the
/// table, then fails if any smoke did.
fn kernel_matrix() -> Result<()> {
    let tests = vm::build_guest_tests()?;
    let mut smokes = Vec::new();
    for &(label, kernel) in vm::matrix::MATRIX {
        smokes.push(if kernel == vm::matrix::FULL_SUITE_KERNEL {
            vm::matrix::Smoke::in_full_suite(label)
        } else {
            vm::matrix::smoke(label, kernel, &tests)?
        });
    }
    vm::matrix::print_table(&smokes);
    match vm::matrix::first_failure(&smokes) {
        0 => Ok(()),
        code => bail!("the kernel matrix's smoke failed (exit code {code})"),
    }
}

/// `hookprof ab` end to end: each test boots guests in turn, so one at a time.
fn test_ab() -> Result<()> {
    // SAFETY: single-threaded at this point; the variable is read by the test processes.
    unsafe { std::env::set_var("HOOKPROF_BIN", hookprof_bin()) };
    cargo(&[
        "test",
        "--release",
        "-p",
        "hookprof-tests",
        "--test",
        "ab",
        "--",
        "--test-threads=1",
    ])
}
