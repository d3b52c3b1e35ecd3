//! lmbench's "0K/10K File Create/Delete" columns (lat_fs): per file, creat + write + close, and
//! unlink, with at most 100 files a directory. As lat_fs, every sample gets a fresh directory
//! tree (made and removed untimed) and takes its names from the last to the first, in both
//! phases: unlink then finds each name near the front of its (unindexed) directory, as
//! lmbench's does. Deleting in the other order scans past every remaining entry first.
use std::{
    ffi::CString,
    ops::Range,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec};
use crate::workloads::tracking_window::untracked;

const FILES_PER_DIR: usize = 100;

macro_rules! churn {
    ($name:literal, $what:literal, $kb:literal, $timed:expr, $suite:expr) => {
        WorkloadSpec {
            name: $name,
            family: Family::FileVm,
            metric: Metric::LatencyUs,
            description: concat!($what, " of a ", $kb, " KB file"),
            suite: $suite,
            create: |o| Ok(Box::new(FileChurn::new(o, $kb * 1024, $timed))),
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
    /// Samples so far: each one's tree is named after it.
    samples: usize,
    /// The current sample's tree, its directories and its files' paths (built ahead so the
    /// timed loops do not allocate).
    tree: Option<PathBuf>,
    dirs: Vec<PathBuf>,
    paths: Vec<CString>,
    /// The files on disk now: made from the last down, unmade from the last down.
    on_disk: Range<usize>,
}

impl FileChurn {
    fn new(options: &WorkloadOptions, size: usize, timed: Phase) -> Self {
        FileChurn {
            // Trees sit right in the scratch directory, with lat_fs's short numeric names:
            // every path component is one more lookup in each timed create and unlink.
            root: options.scratch_dir.clone(),
            data: vec![0x5a; size],
            timed,
            samples: 0,
            tree: None,
            dirs: Vec::new(),
            paths: Vec::new(),
            on_disk: 0..0,
        }
    }

    /// Removes the last sample's tree and makes a fresh one for n files.
    fn new_tree(&mut self, n: usize) -> anyhow::Result<()> {
        self.remove_tree()?;
        let tree = self.root.join(self.samples.to_string());
        self.samples += 1;
        std::fs::create_dir(&tree).with_context(|| format!("mkdir {}", tree.display()))?;
        self.tree = Some(tree.clone());
        for i in 0..n {
            if i % FILES_PER_DIR == 0 {
                let dir = tree.join((i / FILES_PER_DIR).to_string());
                std::fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
                self.dirs.push(dir);
            }
            let path = self.dirs[i / FILES_PER_DIR].join((i % FILES_PER_DIR).to_string());
            self.paths
                .push(CString::new(path.into_os_string().into_encoded_bytes())?);
        }
        Ok(())
    }

    fn remove_tree(&mut self) -> anyhow::Result<()> {
        self.delete_files()?;
        for dir in self.dirs.drain(..).chain(self.tree.take()) {
            std::fs::remove_dir(&dir).with_context(|| format!("rmdir {}", dir.display()))?;
        }
        self.paths.clear();
        self.on_disk = 0..0;
        Ok(())
    }

    /// Creates files n-1 down to 0, as lat_fs's benchmark_mk.
    fn create_files(&mut self) -> anyhow::Result<()> {
        self.on_disk = self.paths.len()..self.paths.len();
        for path in self.paths.iter().rev() {
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
            self.on_disk.start -= 1;
        }
        Ok(())
    }

    /// Unlinks files n-1 down to 0 (the order they were made in), as lat_fs's benchmark_rm.
    fn delete_files(&mut self) -> anyhow::Result<()> {
        while self.on_disk.end > self.on_disk.start {
            let path = &self.paths[self.on_disk.end - 1];
            // SAFETY: a valid C path.
            if unsafe { libc::unlink(path.as_ptr()) } != 0 {
                anyhow::bail!("unlink {path:?}: {}", std::io::Error::last_os_error());
            }
            self.on_disk.end -= 1;
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
        untracked(|| -> anyhow::Result<()> {
            // Files stay after a timed create (until the next run), so their creation is visible.
            self.new_tree(ops as usize)?;
            if self.timed == Phase::Delete {
                self.create_files()?;
            }
            Ok(())
        })?;
        let start = Instant::now();
        match self.timed {
            Phase::Create => self.create_files()?,
            Phase::Delete => self.delete_files()?,
        }
        Ok(start.elapsed())
    }
}

impl Drop for FileChurn {
    fn drop(&mut self) {
        // The scratch directory itself is its owner's to remove.
        if let Some(tree) = &self.tree {
            let _ = std::fs::remove_dir_all(tree);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::{options, run_and_drop};
    use std::path::Path;

    fn entries(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    }

    /// The sample trees under root, and the (path, length) of every file in them.
    fn trees_and_files(root: &Path) -> (usize, Vec<(PathBuf, u64)>) {
        let trees = entries(root);
        let mut files = Vec::new();
        for dir in trees.iter().flat_map(|t| entries(t)) {
            assert!(entries(&dir).len() <= FILES_PER_DIR, "<= 100 per dir");
            for f in entries(&dir) {
                files.push((f.clone(), f.metadata().unwrap().len()));
            }
        }
        (trees.len(), files)
    }

    #[test]
    fn create_leaves_the_files_and_delete_removes_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut create = FileChurn::new(&options(dir.path()), 10240, Phase::Create);
        create.run(150).unwrap();
        let (trees, files) = trees_and_files(create.root());
        assert_eq!((trees, files.len()), (1, 150));
        assert!(files.iter().all(|(_, len)| *len == 10240));
        // A second run starts from a fresh tree: the first one is gone, 150 files, not 300.
        create.run(150).unwrap();
        let (trees, files) = trees_and_files(create.root());
        assert_eq!((trees, files.len()), (1, 150));
        assert!(files
            .iter()
            .all(|(p, _)| p.starts_with(create.root().join("1"))));
        drop(create);

        let mut delete = FileChurn::new(&options(dir.path()), 0, Phase::Delete);
        delete.run(150).unwrap();
        let (trees, files) = trees_and_files(delete.root());
        assert_eq!((trees, files.len()), (1, 0));
        assert_eq!(
            entries(&delete.root().join("0")).len(),
            2,
            "150 files in 2 dirs"
        );
        drop(delete);
        for spec in SPECS {
            run_and_drop(spec.name, 20);
        }
    }
}
