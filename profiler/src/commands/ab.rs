//! `hookprof ab KERNEL_A KERNEL_B`: boots the two kernels in turn under qemu (A B A B ...),
//! runs `hookprof run` in every boot, keeps each boot's results file, and compares the sides.
use std::{
    io::Write,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use clap::Parser;
use hookprof_guest::{Arch, GuestArgs, Log, Machine, Outcome, Payload};

use crate::{
    compare::{self, CompareOptions},
    run::MeasureArgs,
    workloads,
};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Kernels: a Debian suite (e.g. sid, trixie, bullseye: its current \
linux-image-amd64), a kernel package from a suite (e.g. linux-image-amd64@trixie, \
linux-image-6.12.117+deb13-amd64@trixie; without @SUITE, from bookworm), downloaded with apt \
lists of hookprof's own (~/.cache/hookprof-vm) and never installed; the path of a vmlinux or \
bzImage; or `running` (this host's /boot/vmlinuz).\n\n\
Exit codes: as compare's (0 no regression, inconclusive workloads warn; 1 regression; 2 bad \
input, an error or a failed boot; 3 inconclusive with --fail-on inconclusive); 130 interrupted."
)]
pub struct AbArgs {
    /// The baseline kernel.
    #[arg(value_name = "KERNEL_A")]
    pub kernel_a: String,
    /// The candidate kernel.
    #[arg(value_name = "KERNEL_B")]
    pub kernel_b: String,
    /// Boots of each kernel, alternating A B A B ...
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub boots: u32,
    /// Where the results go: a/boot-N.json and b/boot-N.json (compare them again with
    /// `hookprof compare DIR/a DIR/b`), with each boot's console in boot-N.log beside them.
    /// Must not hold files yet.
    #[arg(long, value_name = "DIR", default_value = "hookprof-ab")]
    pub out_dir: PathBuf,
    /// More run options for kernel A's boots only, split at whitespace
    /// (e.g. --a-args "--inject file_open=2000").
    #[arg(long, value_name = "OPTIONS", allow_hyphen_values = true)]
    pub a_args: Option<String>,
    /// More run options for kernel B's boots only.
    #[arg(long, value_name = "OPTIONS", allow_hyphen_values = true)]
    pub b_args: Option<String>,
    /// Kill a guest that runs longer than this many seconds.
    #[arg(long, value_name = "S", default_value_t = 3600)]
    pub timeout: u64,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub compare: CompareOptions,
    #[command(flatten)]
    pub guest: GuestArgs,
    /// Each boot's results are recorded in the store by this process (the guest records
    /// nothing).
    #[command(flatten)]
    pub store: crate::store::RecordArgs,
}

/// One kernel of the comparison.
struct Side {
    /// "A" or "B".
    name: &'static str,
    machine: Machine,
    /// The run options of its boots.
    run_args: Vec<String>,
    /// Its results files and boot logs.
    dir: PathBuf,
}

pub fn ab(args: &AbArgs) -> Result<ExitCode> {
    // The guests run this binary: they have its architecture (which hookprof is built for
    // x86_64 and aarch64 alone).
    let arch = Arch::host().context("hookprof ab boots guests of x86_64 and aarch64 only")?;
    // A file that is no kernel fails now, not after an initramfs is built and qemu booted.
    for (name, spec) in [("A", &args.kernel_a), ("B", &args.kernel_b)] {
        hookprof_guest::check_kernel_format(spec, arch)
            .with_context(|| format!("kernel {name}"))?;
    }
    let criteria = args.compare.criteria()?;
    args.store.location.resolve(args.store.no_store)?; // a bad --store fails before any boot
    let run_a = side_run_args(&args.measure, args.a_args.as_deref(), "--a-args")?;
    let run_b = side_run_args(&args.measure, args.b_args.as_deref(), "--b-args")?;
    let stop = hookprof_guest::stop_on_signals()?;
    let log = Log::new("hookprof ab", std::io::stderr());
    let options = args
        .guest
        .options(Duration::from_secs(args.timeout), log.clone(), stop)?;
    check_out_dir(&args.out_dir)?;

    let hookprof = SelfCopy::new()?;
    let mut sides = Vec::new();
    for (name, spec, run_args) in [("A", &args.kernel_a, run_a), ("B", &args.kernel_b, run_b)] {
        let prepared = Machine::prepare(Some(spec), arch, &log);
        if options.stop.load(Ordering::Relaxed) {
            return Ok(interrupted(&args.out_dir)); // apt-get got the Ctrl-C too
        }
        let machine = prepared.with_context(|| format!("kernel {name} ({spec})"))?;
        let dir = args.out_dir.join(name.to_lowercase());
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("create --out-dir {}", dir.display()))?;
        log.say(format_args!("kernel {name}: {}", machine.kernel.name));
        sides.push(Side {
            name,
            machine,
            run_args,
            dir: std::path::absolute(&dir)?,
        });
    }
    let (emulated, accel) = args.guest.emulated(arch);
    log.say(&accel);
    if emulated {
        warn_emulated();
    }

    let total = args.boots * 2;
    for boot in 1..=args.boots {
        for (i, side) in (1..).zip(&sides) {
            let n = (boot - 1) * 2 + i;
            if options.stop.load(Ordering::Relaxed) {
                return Ok(interrupted(&args.out_dir));
            }
            log.say(format_args!(
                "boot {n}/{total}: kernel {} ({}), run {boot} of {}",
                side.name, side.machine.kernel.name, args.boots
            ));
            match boot_and_run(side, boot, &hookprof.path(), &options)? {
                BootEnd::Done(seconds) => {
                    log.say(format_args!("boot {n}/{total}: done in {seconds:.0} s"));
                    let results = side.dir.join(format!("boot-{boot}.json"));
                    crate::store::record_file(&args.store, "ab", &results)?;
                }
                BootEnd::Interrupted => return Ok(interrupted(&args.out_dir)),
            }
        }
    }

    let old = compare::load_side(&sides[0].dir)?;
    let new = compare::load_side(&sides[1].dir)?;
    log.say(format_args!(
        "results in {} (compare them again: hookprof compare {} {})",
        args.out_dir.display(),
        sides[0].dir.display(),
        sides[1].dir.display()
    ));
    if emulated {
        warn_emulated();
    }
    std::io::stderr().flush()?;
    compare::print_comparison(&old, &new, &criteria, &args.compare)
}

/// This very executable, copied once: every boot runs the same hookprof as this process, even
/// if the file it was started from is rebuilt meanwhile.
struct SelfCopy {
    dir: tempfile::TempDir,
}

impl SelfCopy {
    fn new() -> Result<SelfCopy> {
        let dir = tempfile::Builder::new().prefix("hookprof-ab-").tempdir()?;
        std::fs::copy("/proc/self/exe", dir.path().join("hookprof"))
            .context("copy the hookprof executable")?;
        Ok(SelfCopy { dir })
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("hookprof")
    }
}

/// The run options of one side: the common ones, overridden or added to by the side's own
/// (a repeatable option such as --inject adds up), checked by parsing them as `run` would.
fn side_run_args(common: &MeasureArgs, extra: Option<&str>, flag: &str) -> Result<Vec<String>> {
    #[derive(Parser)]
    #[command(args_override_self = true)]
    struct Run {
        #[command(flatten)]
        measure: MeasureArgs,
    }
    let args = std::iter::once("run".to_string())
        .chain(common.to_args())
        .chain(
            extra
                .unwrap_or_default()
                .split_whitespace()
                .map(String::from),
        );
    let measure = Run::try_parse_from(args)
        .map_err(|e| {
            let rendered = e.to_string();
            let first = rendered.lines().next().unwrap_or_default();
            anyhow::anyhow!("{flag}: {}", first.trim_start_matches("error: "))
        })?
        .measure;
    // Unknown workload names fail here, not after the first boot.
    workloads::chosen(measure.workloads.as_deref(), measure.suite)?;
    Ok(measure.to_args())
}

/// The results directory must be new or empty: results of another comparison never mix in.
fn check_out_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(dir).with_context(|| format!("--out-dir {}", dir.display()))?;
        if entries.next().is_some() {
            bail!(
                "--out-dir {} already holds files: name a new directory",
                dir.display()
            );
        }
    }
    Ok(())
}

enum BootEnd {
    /// Seconds the boot took.
    Done(f64),
    Interrupted,
}

/// Boots the side's kernel, runs hookprof there and checks that its results file came back.
/// A guest kernel panic (an emulated vCPU can soft-lock on live-patched code) gets one more
/// boot; any other failure ends the comparison.
fn boot_and_run(
    side: &Side,
    boot: u32,
    hookprof: &Path,
    options: &hookprof_guest::BootOptions,
) -> Result<BootEnd> {
    let results = side.dir.join(format!("boot-{boot}.json"));
    let log_path = side.dir.join(format!("boot-{boot}.log"));
    let start = Instant::now();
    for attempt in 1..=2 {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("create {}", log_path.display()))?;
        let boot_options = hookprof_guest::BootOptions {
            log: Log::new("hookprof ab", log_file),
            ..options.clone()
        };
        let mut payload = Payload::for_arch(side.machine.kernel.arch);
        let mut command = vec![
            payload.add_file(hookprof)?,
            "run".to_string(),
            "--quiet".to_string(),
            "--no-store".to_string(),
            format!("--label={}{boot}", side.name),
            format!(
                "--output=/mnt/host/{}",
                results.file_name().unwrap().to_string_lossy()
            ),
        ];
        command.extend(side.run_args.iter().cloned());
        let outcome = side
            .machine
            .boot(&boot_options, payload, &command, &[], &side.dir)?;
        match outcome {
            Outcome::Exited(0) if results.is_file() => {
                return Ok(BootEnd::Done(start.elapsed().as_secs_f64()))
            }
            Outcome::Exited(0) => bail!(
                "kernel {} boot {boot}: hookprof run left no {} (console: {})",
                side.name,
                results.display(),
                log_path.display()
            ),
            Outcome::Exited(130) | Outcome::Interrupted => return Ok(BootEnd::Interrupted),
            Outcome::Exited(code) => bail!(
                "kernel {} boot {boot}: hookprof run exited with {code}: {} (console: {})",
                side.name,
                last_error(&log_path),
                log_path.display()
            ),
            Outcome::Panicked if attempt == 1 => {
                eprintln!(
                    "hookprof ab: warning: kernel {} boot {boot}: the guest kernel panicked; booting it once more (console: {})",
                    side.name,
                    log_path.display()
                );
            }
            Outcome::Panicked => bail!(
                "kernel {} boot {boot}: the guest kernel panicked twice (console: {})",
                side.name,
                log_path.display()
            ),
            Outcome::TimedOut => bail!(
                "kernel {} boot {boot}: still running after {} s, killed (raise --timeout; console: {})",
                side.name,
                options.timeout.as_secs(),
                log_path.display()
            ),
            Outcome::NoExitCode => bail!(
                "kernel {} boot {boot}: the guest stopped without reporting hookprof's exit code (console: {})",
                side.name,
                log_path.display()
            ),
        }
    }
    unreachable!("the second attempt returns or fails")
}

/// hookprof's own error line from a boot's console, for the one-line error.
fn last_error(log: &Path) -> String {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .rev()
        .find(|l| l.starts_with("hookprof: "))
        .map_or_else(
            || "no error line on the console".to_string(),
            |l| l.trim().to_string(),
        )
}

fn interrupted(out_dir: &Path) -> ExitCode {
    eprintln!(
        "hookprof ab: interrupted; the finished boots' results are in {}",
        out_dir.display()
    );
    ExitCode::from(crate::exit::INTERRUPTED)
}

fn warn_emulated() {
    eprintln!(
        "hookprof ab: warning: the guests run under TCG emulation (no usable KVM): times are \
         emulated, 30-60x a real machine's and noisy; only counts and large ratios mean something"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn common(args: &[&str]) -> MeasureArgs {
        #[derive(Parser)]
        struct Run {
            #[command(flatten)]
            measure: MeasureArgs,
        }
        Run::try_parse_from(std::iter::once(&"run").chain(args))
            .unwrap()
            .measure
    }

    #[test]
    fn a_side_overrides_common_options_and_adds_injections() {
        let common = common(&[
            "--samples=7",
            "--workloads=null_call",
            "--inject=task_alloc=5",
        ]);
        let b = side_run_args(
            &common,
            Some("--samples 3  --inject file_open=2000"),
            "--b-args",
        )
        .unwrap();
        assert!(b.contains(&"--samples=3".to_string()), "{b:?}");
        assert!(!b.contains(&"--samples=7".to_string()), "{b:?}");
        assert!(b.contains(&"--inject=task_alloc=5".to_string()), "{b:?}");
        assert!(b.contains(&"--inject=file_open=2000".to_string()), "{b:?}");
        assert_eq!(
            side_run_args(&common, None, "--a-args").unwrap(),
            common.to_args()
        );
    }

    #[test]
    fn bad_side_options_name_their_flag() {
        let common = common(&[]);
        let err = side_run_args(&common, Some("--samples 1"), "--b-args").unwrap_err();
        assert!(err.to_string().starts_with("--b-args: "), "{err}");
        let err = side_run_args(&common, Some("--workloads nope"), "--a-args").unwrap_err();
        assert!(err.to_string().contains("null_call"), "{err}");
    }
}
