//! `cargo xtask install`: the release build, its man pages and its shell completions under a
//! prefix (/usr/local by default), where man, bash-completion, zsh and fish look for them.
//! `cargo xtask run` installs the pages and completions the same way, so `man hookprof-run`
//! works after the README's first command. The pages and completions are the ones the Debian
//! package carries (`dist::write_assets`).
use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

/// Where a source build installs unless told otherwise: the local administrator's tree, which
/// Debian's man and shells search and its packages never write.
pub const DEFAULT_PREFIX: &str = "/usr/local";

/// Each completion file the assets hold, and where under the prefix its shell looks for it.
const COMPLETIONS: &[(&str, &str)] = &[
    (
        "hookprof.bash",
        "share/bash-completion/completions/hookprof",
    ),
    ("_hookprof", "share/zsh/site-functions/_hookprof"),
    (
        "hookprof.fish",
        "share/fish/vendor_completions.d/hookprof.fish",
    ),
];
const MAN_DIR: &str = "share/man/man1";

/// `cargo xtask install`: the binary into PREFIX/bin, then the pages and completions.
pub fn install(prefix: &Path) -> Result<()> {
    let bin = prefix.join("bin/hookprof");
    copy(&crate::hookprof_bin(), &bin, 0o755)?;
    println!("xtask install: {}", bin.display());
    install_docs(prefix)
}

/// The man pages and completions, generated from this build's command line, under `prefix`.
pub fn install_docs(prefix: &Path) -> Result<()> {
    let assets = crate::target_dir().join("install-assets");
    crate::dist::write_assets(&assets)?;
    let installed = copy_assets(&assets, prefix)?;
    println!(
        "xtask install: {} man pages in {} (man hookprof-run), completions for bash, zsh, fish",
        installed,
        prefix.join(MAN_DIR).display()
    );
    Ok(())
}

/// Copies the assets in `assets` (man/*.1.gz, completions/) under `prefix`; hookprof's pages
/// there that this build no longer has (a removed command's) are removed, and nothing else.
/// Returns how many pages it installed.
fn copy_assets(assets: &Path, prefix: &Path) -> Result<usize> {
    let pages = files(&assets.join("man"))?;
    let man = prefix.join(MAN_DIR);
    let names: Vec<&std::ffi::OsStr> = pages.iter().filter_map(|p| p.file_name()).collect();
    for old in files(&man).unwrap_or_default() {
        let name = old.file_name().unwrap_or_default();
        let ours = name.to_string_lossy().starts_with("hookprof");
        if ours && !names.contains(&name) {
            std::fs::remove_file(&old).with_context(|| format!("remove {}", old.display()))?;
        }
    }
    for (page, name) in pages.iter().zip(&names) {
        copy(page, &man.join(name), 0o644)?;
    }
    for (file, at) in COMPLETIONS {
        copy(
            &assets.join("completions").join(file),
            &prefix.join(at),
            0o644,
        )?;
    }
    Ok(pages.len())
}

/// The regular files in `dir`, sorted.
fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

/// `from` copied to `to` with `mode`, its directory made first.
fn copy(from: &Path, to: &Path, mode: u32) -> Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("copy {} to {}", from.display(), to.display()))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Assets as `dist::write_assets` lays them out: two gzipped pages and three completions.
    fn assets(dir: &Path) {
        std::fs::create_dir_all(dir.join("man")).unwrap();
        std::fs::create_dir_all(dir.join("completions")).unwrap();
        for page in ["hookprof", "hookprof-run"] {
            let roff = format!(".TH {page} 1\n.SH NAME\n{page} \\- test page\n");
            let gz = dir.join(format!("man/{page}.1.gz"));
            std::fs::write(dir.join(format!("man/{page}.1")), roff).unwrap();
            let status = Command::new("gzip")
                .args(["-n", "-f"])
                .arg(dir.join(format!("man/{page}.1")))
                .status()
                .unwrap();
            assert!(status.success() && gz.is_file());
        }
        for (file, _) in COMPLETIONS {
            std::fs::write(dir.join("completions").join(file), file).unwrap();
        }
    }

    #[test]
    fn pages_and_completions_go_where_man_and_the_shells_look_and_stale_pages_go() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, prefix) = (tmp.path().join("assets"), tmp.path().join("prefix"));
        assets(&from);
        // A page of a command this build no longer has, and another program's page.
        let man = prefix.join(MAN_DIR);
        std::fs::create_dir_all(&man).unwrap();
        std::fs::write(man.join("hookprof-gone.1.gz"), "old").unwrap();
        std::fs::write(man.join("other.1.gz"), "theirs").unwrap();

        assert_eq!(copy_assets(&from, &prefix).unwrap(), 2);
        let mut left: Vec<String> = files(&man)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["hookprof-run.1.gz", "hookprof.1.gz", "other.1.gz"]);
        for (file, at) in COMPLETIONS {
            let installed = prefix.join(at);
            assert_eq!(std::fs::read_to_string(&installed).unwrap(), *file);
            let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o644, "{}", installed.display());
        }
        // man itself finds the page in the prefix's tree.
        let found = Command::new("man")
            .arg("-M")
            .arg(prefix.join("share/man"))
            .args(["-w", "hookprof-run"])
            .output()
            .expect("man (Debian's man-db, which set-up installs)");
        assert_eq!(
            String::from_utf8_lossy(&found.stdout).trim(),
            man.join("hookprof-run.1.gz").display().to_string(),
            "{}",
            String::from_utf8_lossy(&found.stderr)
        );
    }
}
