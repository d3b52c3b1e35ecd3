//! `report --format folded`: each workload's sampled kernel stacks as `STACK COUNT` lines (root
//! frame first, frames joined by ';'), the input FlameGraph's flamegraph.pl, inferno and
//! speedscope read. With several workloads each stack's root is the workload's name, and with
//! several files the file's label above that, so one flame graph holds them all.
use std::{collections::BTreeSet, fmt::Write};

use anyhow::{bail, Result};

use crate::results::{Results, StackProfile};

/// The folded lines of every profiled workload in `results`; an error as `check` gives one.
pub fn render(results: &[Results]) -> Result<String> {
    check(results)?;
    let workloads: usize = results.iter().map(|r| profiled(r).count()).sum();
    let mut out = String::new();
    for r in results {
        for (name, profile) in profiled(r) {
            let mut prefix = String::new();
            if results.len() > 1 {
                prefix.push_str(&frame(&r.label));
                prefix.push(';');
            }
            if workloads > 1 {
                prefix.push_str(&frame(name));
                prefix.push(';');
            }
            for (stack, count) in &profile.folded {
                let _ = writeln!(out, "{prefix}{stack} {count}");
            }
        }
    }
    Ok(out)
}

/// What every export of the stacks refuses, naming the file: one that holds no sampled stacks
/// at all (its run did not sample them), stacks whose frames all have one name (hidden kernel
/// addresses), and two files of one label, whose stacks could not be told apart.
pub fn check(results: &[Results]) -> Result<()> {
    for r in results {
        if profiled(r).next().is_none() {
            bail!(
                "results '{}' hold no sampled kernel stacks: run with --probes auto or \
                 --probes stacks to sample them",
                r.label
            );
        }
    }
    for r in results {
        for w in &r.workloads {
            if let Some(name) = w.profile.as_ref().and_then(|p| p.names_hidden()) {
                bail!(
                    "results '{}': {}'s sampled stacks name every frame {name}: the run read \
                     kallsyms with its addresses hidden (kernel.kptr_restrict), so they are no \
                     profile; sample again where root can read them",
                    r.label,
                    w.name
                );
            }
        }
    }
    let mut labels = BTreeSet::new();
    if let Some(twice) = results.iter().find(|r| !labels.insert(&r.label)) {
        bail!(
            "two results files are labelled '{}': give the runs distinct labels (run --label) \
             so their stacks stay apart",
            twice.label
        );
    }
    Ok(())
}

/// The workloads of `r` with sampled stacks, in run order.
fn profiled(r: &Results) -> impl Iterator<Item = (&str, &StackProfile)> {
    r.workloads.iter().filter_map(|w| {
        w.profile
            .as_ref()
            .filter(|p| !p.folded.is_empty())
            .map(|p| (w.name.as_str(), p))
    })
}

/// A label or a workload's name as one frame: ';' would split it, a line break end the line.
fn frame(name: &str) -> String {
    name.replace([';', '\n', '\r'], "_")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::results::fixtures::sample_results;

    /// A profile of a few stacks: openat through security_file_open into AppArmor and Landlock,
    /// a probe, user mode and the stacks past the limit.
    pub(crate) fn profile(scale: u64) -> StackProfile {
        let openat = "entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_openat;\
                      do_sys_openat2;do_filp_open;path_openat;do_open;vfs_open;do_dentry_open;\
                      security_file_open";
        StackProfile {
            period_ns: 1_000_000,
            stack_passes: None,
            samples: 100 * scale,
            user_samples: 20 * scale,
            probe_samples: 5 * scale,
            lost_stacks: 0,
            ops: 1000,
            on_cpu_ns_per_op: 4000.0,
            round_samples: Vec::new(),
            paths: Vec::new(),
            folded: vec![
                (format!("{openat};apparmor_file_open"), 30 * scale),
                ("[user]".into(), 20 * scale),
                (format!("{openat};hook_file_open"), 15 * scale),
                (format!("{openat};security_file_open"), 10),
                (
                    "entry_SYSCALL_64_after_hwframe;do_syscall_64;__bpf_trace_sys_enter;\
                     bpf_trace_run2;bpf_prog_0123456789abcdef_sys_enter"
                        .into(),
                    5 * scale,
                ),
                (
                    "entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_close;__fput;\
                     security_file_free;cap_file_free"
                        .into(),
                    4,
                ),
                ("[other stacks]".into(), 1),
            ],
            groups: Vec::new(),
            places: Vec::new(),
        }
    }

    fn profiled_results(label: &str) -> Results {
        let mut r = sample_results();
        r.label = label.into();
        r.workloads[0].profile = Some(profile(1));
        r
    }

    #[test]
    fn one_workload_s_stacks_are_written_as_they_are() {
        let text = render(&[profiled_results("base")]).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 7, "{text}");
        assert!(lines[0].starts_with("entry_SYSCALL_64_after_hwframe;do_syscall_64;"));
        assert!(
            lines[0].ends_with(";security_file_open;apparmor_file_open 30"),
            "{text}"
        );
        assert_eq!(lines[1], "[user] 20");
        assert_eq!(lines[6], "[other stacks] 1");
        // Every line is a stack, one space and a count, as stackcollapse writes them (the
        // count is after the last space: `[other stacks]` has one of its own).
        for line in lines {
            let (stack, count) = line.rsplit_once(' ').unwrap();
            assert!(
                count.parse::<u64>().is_ok() && !stack.ends_with(' '),
                "{line}"
            );
            assert!(!stack.contains(' ') || stack == "[other stacks]", "{line}");
        }
    }

    #[test]
    fn several_workloads_and_files_are_rooted_at_their_names() {
        let mut r = profiled_results("base");
        let mut second = profile(2);
        second.folded.truncate(2);
        r.workloads[1].profile = Some(second);
        let text = render(std::slice::from_ref(&r)).unwrap();
        assert!(text.starts_with("open_close;entry_SYSCALL_64"), "{text}");
        assert!(text.contains("\nbuild;[user] 40\n"), "{text}");
        assert_eq!(text.lines().count(), 9);

        let mut other = profiled_results("new;kernel");
        other.workloads[0]
            .profile
            .as_mut()
            .unwrap()
            .folded
            .truncate(1);
        let text = render(&[r, other]).unwrap();
        assert!(text.contains("\nbase;build;[user] 40\n"), "{text}");
        // One workload in the second file, but two files: both names root its stacks, and the
        // label's ';' does not split it into two frames.
        assert!(
            text.ends_with(
                "new_kernel;open_close;entry_SYSCALL_64_after_hwframe;do_syscall_64;\
                            __x64_sys_openat;do_sys_openat2;do_filp_open;path_openat;do_open;\
                            vfs_open;do_dentry_open;security_file_open;apparmor_file_open 30\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_file_without_stacks_is_refused_by_its_label() {
        let e = render(&[profiled_results("with"), sample_results()])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "results 'base' hold no sampled kernel stacks: run with --probes auto or --probes \
             stacks to sample them"
        );
        assert!(!e.contains('\n'));
        let e = render(&[profiled_results("x"), profiled_results("x")]).unwrap_err();
        assert!(e.to_string().contains("labelled 'x'"), "{e}");
    }
}
