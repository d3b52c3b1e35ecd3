//! What can be timed on this kernel: every `security_*` hook in its BTF, the functions each
//! active LSM runs under a hook, and the fork/exit/exec task paths (copy_process, do_exit and
//! the per-subsystem steps that are today's "task watchers").
use super::{kallsyms::FunctionNames, KernelBtf};
use crate::results::{HookLookup, LsmLookup, Missing};

/// Each LSM's prefix for its hook implementations (`security_file_open` -> `apparmor_file_open`).
/// Functions the compiler inlined are not in BTF, so they are simply not found.
const LSM_PREFIXES: &[(&str, &str)] = &[
    ("capability", "cap_"),
    ("landlock", "hook_"),
    ("yama", "yama_"),
    ("apparmor", "apparmor_"),
    ("selinux", "selinux_"),
    ("smack", "smack_"),
    ("tomoyo", "tomoyo_"),
    ("bpf", "bpf_lsm_"),
    ("lockdown", "lockdown_"),
    ("safesetid", "safesetid_"),
    ("loadpin", "loadpin_"),
    ("ipe", "ipe_"),
];

/// Fork-side steps run under copy_process, exit-side under do_exit, exec under bprm_execve.
/// do_exit never returns, so its fexit never fires: it is a parent label, not probed itself.
const UNTIMABLE_PARENTS: &[&str] = &["do_exit"];
const TASK_PATHS: &[(&str, &[&str])] = &[
    (
        "copy_process",
        &[
            "sched_fork",
            "copy_creds",
            "audit_alloc",
            "copy_semundo",
            "copy_files",
            "copy_fs",
            "copy_sighand",
            "copy_signal",
            "copy_mm",
            "copy_namespaces",
            "copy_io",
            "copy_thread",
            "cgroup_fork",
            "cgroup_can_fork",
            "cgroup_post_fork",
            "cpuset_fork",
            "perf_event_init_task",
            "__mpol_dup",
            "proc_fork_connector",
        ],
    ),
    (
        "do_exit",
        &[
            "exit_signals",
            "taskstats_exit",
            "__audit_free",
            "exit_mm",
            "exit_sem",
            "exit_files",
            "exit_fs",
            "exit_task_namespaces",
            "exit_thread",
            "perf_event_exit_task",
            "cgroup_exit",
            "proc_exit_connector",
            "exit_io_context",
            "exit_notify",
        ],
    ),
    (
        "bprm_execve",
        &["begin_new_exec", "setup_new_exec", "proc_exec_connector"],
    ),
];

/// A function to time and where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub function: String,
    /// The hook or task path it runs under (None for top-level functions).
    pub parent: Option<String>,
    /// For LSM functions: which LSM.
    pub lsm: Option<String>,
}

impl Target {
    pub fn top(function: &str) -> Target {
        Target {
            function: function.into(),
            parent: None,
            lsm: None,
        }
    }
}

/// Every `security_*` function the kernel's BTF describes, sorted.
pub fn security_hooks(kernel: &KernelBtf) -> Vec<String> {
    kernel
        .function_names()
        .filter(|f| f.starts_with("security_"))
        .map(String::from)
        .collect()
}

/// The LSM hook names a `security_*` function (or bare hook name) may run: most share its
/// name, some carry a `_security` suffix it lacks (security_bprm_check runs the
/// bprm_check_security hooks), one is renamed.
pub fn hook_names(function: &str) -> [String; 2] {
    let name = function.strip_prefix("security_").unwrap_or(function);
    let renamed = match name {
        "prepare_creds" => "cred_prepare",
        other => other,
    };
    [renamed.to_string(), format!("{name}_security")]
}

/// The functions the active LSMs run under `hook` (a `security_*` name), in LSM order.
pub fn lsm_functions(kernel: &KernelBtf, hook: &str, active_lsms: &[String]) -> Vec<Target> {
    if !hook.starts_with("security_") {
        return Vec::new();
    }
    active_lsms
        .iter()
        .filter_map(|lsm| {
            let prefix = LSM_PREFIXES.iter().find(|(name, _)| name == lsm)?.1;
            let function = hook_names(hook)
                .into_iter()
                .map(|name| format!("{prefix}{name}"))
                .find(|f| kernel.has_function(f))?;
            Some(Target {
                function,
                parent: Some(hook.into()),
                lsm: Some(lsm.clone()),
            })
        })
        .collect()
}

/// What the plan looked for under `hook` on this kernel: each active LSM's names and the one
/// in BTF (the one `lsm_functions` times) or why there is none; then each inactive LSM whose
/// function is built in.
pub fn lsm_lookup(
    kernel: &KernelBtf,
    symbols: &FunctionNames,
    hook: &str,
    active_lsms: &[String],
) -> HookLookup {
    let look = |lsm: &str, prefix: &str| -> LsmLookup {
        let looked_for: Vec<String> = hook_names(hook)
            .into_iter()
            .map(|name| format!("{prefix}{name}"))
            .collect();
        let in_btf = looked_for.iter().find(|f| kernel.has_function(f)).cloned();
        let active = active_lsms.iter().any(|a| a == lsm);
        let in_kallsyms = looked_for.iter().any(|f| symbols.has(f));
        let missing = if !active && (in_btf.is_some() || in_kallsyms) {
            Some(Missing::NotActive)
        } else if in_btf.is_some() {
            None
        } else if in_kallsyms {
            Some(Missing::NotInBtf)
        } else if looked_for.iter().any(|f| symbols.only_copied(f)) {
            Some(Missing::CompilerCopy)
        } else {
            Some(Missing::NotInKernel)
        };
        LsmLookup {
            lsm: lsm.into(),
            looked_for,
            found: in_btf.filter(|_| active),
            missing,
        }
    };
    let mut lsms: Vec<LsmLookup> = active_lsms
        .iter()
        .filter_map(|lsm| {
            let prefix = LSM_PREFIXES.iter().find(|(name, _)| name == lsm)?.1;
            Some(look(lsm, prefix))
        })
        .collect();
    lsms.extend(
        LSM_PREFIXES
            .iter()
            .filter(|(lsm, _)| !active_lsms.iter().any(|a| a == lsm))
            .map(|(lsm, prefix)| look(lsm, prefix))
            .filter(|l| l.missing == Some(Missing::NotActive)),
    );
    HookLookup {
        hook: hook.into(),
        lsms,
    }
}

/// `lsm_lookup` for each `security_*` hook among `found` (LSM functions and task paths left
/// out).
pub fn lsm_lookups(
    kernel: &KernelBtf,
    symbols: &FunctionNames,
    found: &[Target],
    active_lsms: &[String],
) -> Vec<HookLookup> {
    found
        .iter()
        .filter(|t| t.parent.is_none() && t.function.starts_with("security_"))
        .map(|t| lsm_lookup(kernel, symbols, &t.function, active_lsms))
        .collect()
}

/// The task paths present on this kernel: each top-level path, then its steps.
pub fn task_paths(kernel: &KernelBtf) -> Vec<Target> {
    let mut targets = Vec::new();
    for (path, steps) in TASK_PATHS {
        if !kernel.has_function(path) {
            continue;
        }
        if !UNTIMABLE_PARENTS.contains(path) {
            targets.push(Target::top(path));
        }
        targets.extend(
            steps
                .iter()
                .filter(|s| kernel.has_function(s))
                .map(|s| Target {
                    function: s.to_string(),
                    parent: Some(path.to_string()),
                    lsm: None,
                }),
        );
    }
    targets
}

/// The LSM whose hook function `function` is by its name (`hook_file_open` -> landlock), for
/// a function seen right under a `security_*` frame of a sampled stack.
pub fn lsm_of(function: &str) -> Option<&'static str> {
    LSM_PREFIXES
        .iter()
        .find(|(_, prefix)| function.starts_with(prefix))
        .map(|&(lsm, _)| lsm)
}

/// Where `function` sits among the task paths: Some(None) for a top-level path, Some(path)
/// for a step under it, None for any other function.
pub fn task_path_of(function: &str) -> Option<Option<&'static str>> {
    TASK_PATHS.iter().find_map(|&(path, steps)| {
        if path == function {
            Some(None)
        } else {
            steps.contains(&function).then_some(Some(path))
        }
    })
}

/// A hook with the LSM functions under it.
pub fn hook_with_lsms(kernel: &KernelBtf, hook: &str, active_lsms: &[String]) -> Vec<Target> {
    let mut targets = vec![Target::top(hook)];
    targets.extend(lsm_functions(kernel, hook, active_lsms));
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the running kernel, with its real kallsyms and BTF: an active LSM's function under
    /// security_file_open is found by the name the plan times, an active LSM with no such
    /// hook says why, and an LSM left out of the active list is said to be inactive.
    #[test]
    fn the_lookup_names_what_it_looked_for_and_why_one_is_missing_on_this_kernel() {
        let kernel = KernelBtf::load().expect("this kernel's BTF");
        let symbols = FunctionNames::read().expect("/proc/kallsyms");
        assert!(symbols.has("security_file_open"), "kallsyms read");
        // capability has no file_open hook; bpf has one on every kernel with the BPF LSM.
        let active = vec!["capability".to_string(), "bpf".to_string()];
        let l = lsm_lookup(&kernel, &symbols, "security_file_open", &active);
        let of = |lsm: &str| l.lsms.iter().find(|x| x.lsm == lsm);
        let bpf = of("bpf").expect("bpf looked at");
        assert_eq!(bpf.found.as_deref(), Some("bpf_lsm_file_open"), "{l:?}");
        assert_eq!(bpf.missing, None);
        let timed: Vec<String> = lsm_functions(&kernel, "security_file_open", &active)
            .into_iter()
            .map(|t| t.function)
            .collect();
        assert_eq!(
            timed,
            ["bpf_lsm_file_open"],
            "the plan times what the lookup found"
        );
        let cap = of("capability").expect("capability looked at");
        assert_eq!(cap.looked_for, ["cap_file_open", "cap_file_open_security"]);
        assert_eq!(
            (cap.found.as_ref(), cap.missing),
            (None, Some(Missing::NotInKernel))
        );
        // An LSM built in but left out of the list: every one found is said to be inactive.
        for other in l.lsms.iter().filter(|x| !active.contains(&x.lsm)) {
            assert_eq!(other.missing, Some(Missing::NotActive), "{other:?}");
            assert!(other
                .looked_for
                .iter()
                .any(|f| symbols.has(f) || kernel.has_function(f)));
        }
        let built_in = ["apparmor", "landlock", "selinux", "tomoyo", "smack"]
            .into_iter()
            .filter(|lsm| {
                let prefix = LSM_PREFIXES.iter().find(|(n, _)| n == lsm).unwrap().1;
                kernel.has_function(&format!("{prefix}file_open"))
            })
            .count();
        assert!(
            l.lsms.len() >= 2 + built_in,
            "each built-in LSM with a file_open function is listed: {l:?}"
        );
    }

    #[test]
    fn a_compiler_copy_in_kallsyms_is_told_from_a_function_not_there() {
        let text = "ffffffff81000000 T security_file_open\n\
                    ffffffff81000100 t apparmor_file_open.isra.0\n";
        let symbols = FunctionNames::from_text(text.as_bytes()).unwrap();
        assert!(symbols.only_copied("apparmor_file_open"));
        assert!(!symbols.only_copied("security_file_open") && symbols.has("security_file_open"));
        assert!(!symbols.only_copied("tomoyo_file_open"));
    }
}
