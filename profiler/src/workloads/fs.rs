//! lmbench's "0K/10K File Create/Delete" columns (lat_fs): per file, creat + write + close, and
//! unlink, in the workload's scratch directory with at most 100 files a directory.
use std::{
    ffi::CString,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec};
use crate::scope::untracked;

const FILES_PER_DIR: usize = 100;

macro_rules! churn {
    ($name:literal, $what:literal, $kb:literal, $timed:expr, $suite:expr) => {
        WorkloadSpec {
            name: $name,
            family: Family::FileVm,
            metric: Metric::LatencyUs,
            description: concat!($what, " of a ", $kb, " KB file"),
            suite: $suite,
            create: |o| Ok(Box::new(FileChurn::new(o, $kb * 1024, $timed)?)),
        }
    };
}

pub static SPECS: &[WorkloadSpec] = &[
    churn!(
        "fs_create_0k",
        "creat + write + close",
        0,
        Phase::Create,
        Suite::Quick
    ),
    churn!("fs_delete_0k", "unlink", 0, Phase::Delete, Suite::Quick),
    churn!(
        "fs_create_10k",
        "creat + write + close",
        10,
        Phase::Create,
        Suite::Default
    ),
    churn!("fs_delete_10k", "unlink", 10, Phase::Delete, Suite::Default),
];

/// Which half of the create/delete cycle is timed; the other half runs untimed.
#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Create,
    Delete,
}

struct FileChurn {
    root: PathBuf,
    data: Vec<u8>,
    timed: Phase,
    /// Paths of files 0..n, built ahead so the timed loops do not allocate.
    paths: Vec<CString>,
    /// Files 0..existing are on disk now.
    existing: usize,
}

impl FileChurn {
    fn new(options: &WorkloadOptions, size: usize, timed: Phase) -> anyhow::Result<Self> {
        let root = options.scratch_dir.join("fs_churn");
        std::fs::create_dir(&root).with_context(|| format!("mkdir {}", root.display()))?;
        Ok(FileChurn {
            root,
            data: vec![0x5a; size],
            timed,
            paths: Vec::new(),
            existing: 0,
        })
    }

    /// Makes paths (and their directories) for files 0..n.
    fn prepare(&mut self, n: usize) -> anyhow::Result<()> {
        for i in self.paths.len()..n {
            let dir = self.root.join(format!("d{}", i / FILES_PER_DIR));
            if i % FILES_PER_DIR == 0 {
                std::fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
            }
            let path = dir.join(format!("f{}", i % FILES_PER_DIR));
            self.paths
                .push(CString::new(path.into_os_string().into_encoded_bytes())?);
        }
        Ok(())
    }

    fn create_files(&mut self, n: usize) -> anyhow::Result<()> {
        for path in &self.paths[self.existing..n] {
            // SAFETY: a valid C path; the data buffer outlives the write.
            let ok = unsafe {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                );
                fd >= 0
                    && (self.data.is_empty()
                        || libc::write(fd, self.data.as_ptr().cast(), self.data.len())
                            == self.data.len() as isize)
                    && libc::close(fd) == 0
            };
            anyhow::ensure!(ok, "create {path:?}: {}", std::io::Error::last_os_error());
            self.existing += 1;
        }
        Ok(())
    }

    fn delete_files(&mut self) -> anyhow::Result<()> {
        while self.existing > 0 {
            let path = &self.paths[self.existing - 1];
            // SAFETY: a valid C path.
            if unsafe { libc::unlink(path.as_ptr()) } != 0 {
                anyhow::bail!("unlink {path:?}: {}", std::io::Error::last_os_error());
            }
            self.existing -= 1;
        }
        Ok(())
    }

    #[cfg(test)]
    fn root(&self) -> &std::path::Path {
        &self.root
    }
}

impl Workload for FileChurn {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let n = ops as usize;
        untracked(|| -> anyhow::Result<()> {
            self.prepare(n)?;
            // Files stay after a timed create (until the next run), so their creation is visible.
            self.delete_files()?;
            if self.timed == Phase::Delete {
                self.create_files(n)?;
            }
            Ok(())
        })?;
        let start = Instant::now();
        match self.timed {
            Phase::Create => self.create_files(n)?,
            Phase::Delete => self.delete_files()?,
        }
        Ok(start.elapsed())
    }
}

impl Drop for FileChurn {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::{options, run_and_drop};
    use std::path::Path;

    fn files_under(root: &Path) -> Vec<(PathBuf, u64)> {
        let mut files = Vec::new();
        for dir in std::fs::read_dir(root).unwrap() {
            for f in std::fs::read_dir(dir.unwrap().path()).unwrap() {
                let f = f.unwrap();
                files.push((f.path(), f.metadata().unwrap().len()));
            }
        }
        files
    }

    #[test]
    fn create_leaves_the_files_and_delete_removes_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut create = FileChurn::new(&options(dir.path()), 10240, Phase::Create).unwrap();
        create.run(150).unwrap();
        let files = files_under(create.root());
        assert_eq!(files.len(), 150);
        assert!(files.iter().all(|(_, len)| *len == 10240));
        // A second run starts from a clean directory: still 150, not 300.
        create.run(150).unwrap();
        assert_eq!(files_under(create.root()).len(), 150);
        drop(create);

        let mut delete = FileChurn::new(&options(dir.path()), 0, Phase::Delete).unwrap();
        delete.run(150).unwrap();
        assert_eq!(files_under(delete.root()).len(), 0);
        assert_eq!(
            std::fs::read_dir(delete.root()).unwrap().count(),
            2,
            "<= 100 per dir"
        );
        drop(delete);
        for spec in SPECS {
            run_and_drop(spec.name, 20);
        }
    }
}
