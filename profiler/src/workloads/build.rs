//! A kernbench-like macro workload: `make -j N` of a generated, deterministic C tree (many
//! translation units sharing headers) with the system `cc`, reported like /usr/bin/time:
//! elapsed seconds, plus user and system seconds and CPU percent as extras.
use std::{
    fmt::Write as _,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{Extra, Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec};
use crate::results::Unit;

pub static SPECS: &[WorkloadSpec] = &[WorkloadSpec {
    name: "build",
    family: Family::Macro,
    metric: Metric::Seconds,
    description: "make -j N of a generated C tree of 300 units (kernbench-like); N = --jobs or \
                  4x CPUs, units = --build-units",
    suite: Suite::Full,
    create: |o| {
        Ok(Box::new(Build::new(
            o,
            TreeShape::with_units(o.setup.build_units),
        )?))
    },
}];

/// How big the generated tree is. DEFAULT is ~63 CPU-seconds of cc (gcc 12, -O2): ~32 s a
/// build on an idle 2-CPU machine, inside the 20-60 s kernbench-like target.
#[derive(Debug, Clone, Copy)]
pub struct TreeShape {
    pub units: usize,
    pub functions_per_unit: usize,
    pub headers: usize,
}

impl TreeShape {
    pub const DEFAULT: TreeShape = TreeShape {
        units: crate::results::DEFAULT_BUILD_UNITS,
        functions_per_unit: 4,
        headers: 40,
    };

    /// DEFAULT with `units` translation units (`--build-units`), if given.
    pub fn with_units(units: Option<usize>) -> TreeShape {
        TreeShape {
            units: units.unwrap_or(Self::DEFAULT.units),
            ..Self::DEFAULT
        }
    }
}

/// Writes the tree: include/h*.h, src/u*.c, src/main.c and a Makefile. The same shape always
/// gives byte-identical sources, so builds on two kernels compile the same code.
fn generate_tree(root: &Path, shape: TreeShape) -> anyhow::Result<()> {
    std::fs::create_dir_all(root.join("include"))?;
    std::fs::create_dir_all(root.join("src"))?;
    for h in 0..shape.headers {
        let mut s = format!("#ifndef H{h}_H\n#define H{h}_H\n#include <stddef.h>\n");
        let _ = write!(
            s,
            "struct rec{h} {{ int key; long val; unsigned char tag[{}]; }};\n\
             #define MIX{h}(a, b) (((a) * {} + (b)) ^ ((a) >> {}))\n\
             static inline long fold{h}(const struct rec{h} *r, size_t n) {{\n\
             \tlong acc = {h};\n\tfor (size_t i = 0; i < n; i++)\n\
             \t\tacc = MIX{h}(acc, r[i].key + r[i].val + r[i].tag[i % sizeof r[i].tag]);\n\
             \treturn acc;\n}}\n#endif\n",
            8 + h % 24,
            31 + 2 * h,
            1 + h % 7,
        );
        std::fs::write(root.join(format!("include/h{h}.h")), s)?;
    }
    for u in 0..shape.units {
        let mut s = String::from("#include <string.h>\n");
        let used: Vec<usize> = (0..4).map(|k| (u * 7 + k * 13) % shape.headers).collect();
        for h in &used {
            let _ = writeln!(s, "#include \"h{h}.h\"");
        }
        for f in 0..shape.functions_per_unit {
            let h = used[f % used.len()];
            let _ = write!(
                s,
                "static long u{u}_f{f}(long x) {{\n\tstruct rec{h} r[16];\n\tlong acc = x;\n\
                 \tmemset(r, 0, sizeof r);\n\tfor (int i = 0; i < 16; i++) {{\n\
                 \t\tr[i].key = (int)(acc + i * {f});\n\t\tr[i].val = MIX{h}(acc, i);\n\
                 \t\tswitch ((acc + i) & 7) {{\n"
            );
            for case in 0..8 {
                let _ = writeln!(
                    s,
                    "\t\tcase {case}: acc = acc * {} + fold{h}(r, (size_t)i + 1); break;",
                    3 + case * 2 + f
                );
            }
            s.push_str("\t\t}\n\t}\n\treturn acc;\n}\n");
        }
        let _ = write!(s, "long unit{u}(long x) {{\n\tlong acc = x;\n");
        for f in 0..shape.functions_per_unit {
            let _ = writeln!(s, "\tacc ^= u{u}_f{f}(acc + {f});");
        }
        s.push_str("\treturn acc;\n}\n");
        std::fs::write(root.join(format!("src/u{u}.c")), s)?;
    }
    let mut main = String::from("#include <stdio.h>\n");
    for u in 0..shape.units {
        let _ = writeln!(main, "long unit{u}(long);");
    }
    main.push_str("int main(void) {\n\tlong acc = 1;\n");
    for u in 0..shape.units {
        let _ = writeln!(main, "\tacc = unit{u}(acc);");
    }
    main.push_str("\tprintf(\"%ld\\n\", acc);\n\treturn 0;\n}\n");
    std::fs::write(root.join("src/main.c"), main)?;

    let objects: Vec<String> = (0..shape.units)
        .map(|u| format!("src/u{u}.o"))
        .chain(["src/main.o".to_string()])
        .collect();
    let makefile = format!(
        "CC = cc\nCFLAGS = -O2 -Wall -Iinclude\nOBJS = {}\n\n\
         prog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n\
         src/%.o: src/%.c $(wildcard include/*.h)\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n\
         clean:\n\trm -f $(OBJS) prog\n",
        objects.join(" ")
    );
    std::fs::write(root.join("Makefile"), makefile)?;
    Ok(())
}

/// Children's CPU time so far: (user, system).
fn children_cpu() -> (Duration, Duration) {
    // SAFETY: all-zero is a valid rusage out-buffer.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (time(usage.ru_utime), time(usage.ru_stime))
}

struct Build {
    root: PathBuf,
    jobs: usize,
    extras: Vec<Extra>,
}

impl Build {
    fn new(options: &WorkloadOptions, shape: TreeShape) -> anyhow::Result<Self> {
        let root = options.scratch_dir.join("build_tree");
        let build = Build {
            root,
            jobs: options
                .setup
                .jobs
                .unwrap_or_else(|| 4 * std::thread::available_parallelism().map_or(1, |n| n.get())),
            extras: Vec::new(),
        };
        // `build` is returned only once the tree is complete; Drop removes a partial one.
        generate_tree(&build.root, shape).context("generate the build tree")?;
        Ok(build)
    }

    fn make(&self, args: &[&str]) -> anyhow::Result<()> {
        let mut make = Command::new("make");
        // SAFETY: prctl is async-signal-safe; make dies with hookprof instead of outliving it.
        unsafe {
            make.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            })
        };
        let status = make
            .args(args)
            .current_dir(&self.root)
            .stdout(Stdio::null())
            .status()
            .context("run make (is make installed?)")?;
        anyhow::ensure!(status.success(), "make {} failed: {status}", args.join(" "));
        Ok(())
    }
}

impl Workload for Build {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let jobs = format!("-j{}", self.jobs);
        let mut elapsed = Duration::ZERO;
        let (mut user, mut system) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..ops {
            self.make(&["-s", "clean"])?;
            let (user0, system0) = children_cpu();
            let start = Instant::now();
            self.make(&["-s", &jobs])?;
            elapsed += start.elapsed();
            let (user1, system1) = children_cpu();
            user += user1 - user0;
            system += system1 - system0;
        }
        let cpu_percent = 100.0 * (user + system).as_secs_f64() / elapsed.as_secs_f64();
        let per_run = |d: Duration| d.as_secs_f64() / ops.max(1) as f64;
        self.extras = vec![
            Extra {
                name: "user".into(),
                unit: Unit::Seconds,
                value: per_run(user),
            },
            Extra {
                name: "system".into(),
                unit: Unit::Seconds,
                value: per_run(system),
            },
            Extra {
                name: "cpu_percent".into(),
                unit: Unit::Percent,
                value: cpu_percent,
            },
        ];
        Ok(elapsed)
    }

    fn extras(&mut self) -> Vec<Extra> {
        self.extras.clone()
    }
}

impl Drop for Build {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::options;

    const TINY: TreeShape = TreeShape {
        units: 6,
        functions_per_unit: 2,
        headers: 3,
    };

    #[test]
    fn a_tiny_tree_builds_its_objects_and_program() {
        let dir = tempfile::tempdir().unwrap();
        let mut build = Build::new(&options(dir.path()), TINY).unwrap();
        let t = build.run(1).unwrap();
        assert!(t > Duration::ZERO);
        for u in 0..TINY.units {
            assert!(build.root.join(format!("src/u{u}.o")).exists(), "u{u}.o");
        }
        let out = Command::new(build.root.join("prog")).output().unwrap();
        assert!(out.status.success() && !out.stdout.is_empty());
        let extras = build.extras();
        let get = |n: &str| extras.iter().find(|e| e.name == n).unwrap().value;
        assert!(get("user") > 0.0 && get("cpu_percent") > 0.0, "{extras:?}");
        // The second run starts from `make clean`, so it compiles again.
        build.run(1).unwrap();
        assert!(build.root.join("prog").exists());
        drop(build);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn build_units_sizes_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = options(dir.path());
        options.setup.build_units = Some(7);
        let _build = (SPECS[0].create)(&options).unwrap();
        let sources = std::fs::read_dir(dir.path().join("build_tree/src")).unwrap();
        // the units and main.c
        assert_eq!(sources.count(), 8);
        let makefile = std::fs::read_to_string(dir.path().join("build_tree/Makefile")).unwrap();
        assert!(makefile.contains("src/u6.o") && !makefile.contains("src/u7.o"));
    }

    #[test]
    #[ignore = "a full-size build: 20-60 s"]
    fn default_tree_build_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut build = Build::new(&options(dir.path()), TreeShape::DEFAULT).unwrap();
        let t = build.run(1).unwrap();
        eprintln!(
            "build: {:.1} s elapsed, extras {:?}",
            t.as_secs_f64(),
            build.extras()
        );
    }
}
