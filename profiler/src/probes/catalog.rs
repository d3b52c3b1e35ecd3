//! What can be timed on this kernel: every `security_*` hook in its BTF, the functions each
//! active LSM runs under a hook, and the fork/exit/exec task paths (copy_process, do_exit and
//! the per-subsystem steps that are today's "task watchers").
use super::KernelBtf;

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
