//! Writes what the Debian package carries beside the binary, generated from the command line's
//! definition (`hookprof::cli`): a man page per command (`man hookprof-run`) and completions
//! for bash, zsh and fish. `cargo xtask dist` runs it:
//! `cargo run --release -p hookprof --example dist_assets -- OUT_DIR`.
use std::{path::Path, process::ExitCode};

use anyhow::Context;
use clap_complete::Shell;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        eprintln!("usage: dist_assets OUT_DIR");
        return ExitCode::from(2);
    };
    match write_assets(Path::new(&out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dist_assets: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// OUT/man/hookprof*.1 (hidden commands left out) and OUT/completions/, one file per shell,
/// named as each shell's completion directory expects.
fn write_assets(out: &Path) -> anyhow::Result<()> {
    let man = out.join("man");
    std::fs::create_dir_all(&man).with_context(|| format!("create {}", man.display()))?;
    clap_mangen::generate_to(hookprof::cli::command(), &man)
        .with_context(|| format!("write the man pages to {}", man.display()))?;
    let completions = out.join("completions");
    std::fs::create_dir_all(&completions)
        .with_context(|| format!("create {}", completions.display()))?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(
            shell,
            &mut hookprof::cli::command(),
            "hookprof",
            &completions,
        )
        .with_context(|| format!("write the {shell} completions to {}", completions.display()))?;
    }
    Ok(())
}
