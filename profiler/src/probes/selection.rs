//! Which kernel functions a run times. `default`: the hooks the selected workloads are known to
//! call, each with the active LSMs' functions under it, plus the task paths for workloads that
//! create processes. `all`: every `security_*` hook of the kernel. Otherwise a list of names.
use anyhow::{bail, Result};

use super::{
    catalog::{hook_with_lsms, security_hooks, task_paths, Target},
    KernelBtf, USER_SLOTS,
};

/// The hooks each workload's operation calls (mainline 6.x), so a default run attaches tens of
/// pairs, not hundreds.
const HOOKS_BY_WORKLOAD: &[(&str, &[&str])] = &[
    ("null_io", &["security_file_permission"]),
    ("stat", &["security_inode_getattr"]),
    (
        "open_close",
        &[
            "security_file_open",
            "security_file_alloc",
            "security_file_free",
            "security_inode_permission",
        ],
    ),
    ("sig_catch", &["security_task_kill"]),
    (
        "fork_proc",
        &[
            "security_task_alloc",
            "security_task_free",
            "security_prepare_creds",
            "security_cred_free",
        ],
    ),
    ("exec_proc", EXEC_HOOKS),
    ("sh_proc", EXEC_HOOKS),
    (
        "fork_exit_storm",
        &[
            "security_task_alloc",
            "security_task_free",
            "security_prepare_creds",
        ],
    ),
    ("build", EXEC_HOOKS),
    ("lat_pipe", &["security_file_permission"]),
    ("bw_pipe", &["security_file_permission"]),
    ("lat_unix", SOCKET_IO_HOOKS),
    ("bw_unix", SOCKET_IO_HOOKS),
    ("lat_udp", SOCKET_IO_HOOKS),
    ("lat_rpc_udp", SOCKET_IO_HOOKS),
    ("lat_tcp", SOCKET_IO_HOOKS),
    ("lat_rpc_tcp", SOCKET_IO_HOOKS),
    ("bw_tcp", SOCKET_IO_HOOKS),
    (
        "lat_tcp_connect",
        &[
            "security_socket_create",
            "security_socket_post_create",
            "security_socket_connect",
            "security_sk_alloc",
            "security_sk_free",
        ],
    ),
    ("fs_create_0k", FS_CREATE_HOOKS),
    ("fs_create_10k", FS_CREATE_HOOKS),
    (
        "fs_delete_0k",
        &["security_path_unlink", "security_inode_unlink"],
    ),
    (
        "fs_delete_10k",
        &["security_path_unlink", "security_inode_unlink"],
    ),
    (
        "mmap_latency",
        &["security_mmap_file", "security_mmap_addr"],
    ),
    ("page_fault", &["security_mmap_file"]),
    ("bw_file_reread", &["security_file_permission"]),
    ("bw_mmap_reread", &["security_mmap_file"]),
    ("ctx_2p_0k", &["security_file_permission"]),
];

const EXEC_HOOKS: &[&str] = &[
    "security_task_alloc",
    "security_bprm_creds_for_exec",
    "security_bprm_check",
    "security_bprm_committing_creds",
    "security_bprm_committed_creds",
    "security_file_open",
    "security_mmap_file",
];
const SOCKET_IO_HOOKS: &[&str] = &[
    "security_socket_sendmsg",
    "security_socket_recvmsg",
    "security_file_permission",
];
const FS_CREATE_HOOKS: &[&str] = &[
    "security_path_mknod",
    "security_inode_create",
    "security_file_open",
    "security_inode_init_security",
];

/// Workloads that create processes also get the fork/exit/exec task paths.
const PROCESS_WORKLOADS: &[&str] = &[
    "fork_proc",
    "exec_proc",
    "sh_proc",
    "fork_exit_storm",
    "build",
];

/// The functions to time for `--hooks` (`default`, `all`, or names).
pub fn select(
    kernel: &KernelBtf,
    hooks: &[String],
    workloads: &[&str],
    active_lsms: &[String],
) -> Result<Vec<Target>> {
    let mut targets: Vec<Target> = Vec::new();
    let mut add = |new: Vec<Target>| {
        for t in new {
            if !targets.iter().any(|x| x.function == t.function) {
                targets.push(t);
            }
        }
    };
    match hooks {
        [one] if one == "all" => add(security_hooks(kernel)
            .iter()
            .map(|h| Target::top(h))
            .collect()),
        [one] if one == "default" => {
            for name in default_hooks(workloads) {
                if kernel.has_function(name) {
                    add(hook_with_lsms(kernel, name, active_lsms));
                }
            }
            if workloads.iter().any(|w| PROCESS_WORKLOADS.contains(w)) {
                add(task_paths(kernel));
            }
        }
        names => {
            for name in names {
                if !kernel.has_function(name) {
                    bail!("hook '{name}' does not exist on this kernel (not in its BTF); see `hookprof hooks`");
                }
                add(hook_with_lsms(kernel, name, active_lsms));
            }
        }
    }
    if targets.len() > USER_SLOTS {
        bail!(
            "{} functions to time, but hookprof has {USER_SLOTS} fentry/fexit slots: name fewer with --hooks",
            targets.len()
        );
    }
    Ok(targets)
}

/// The known hooks of the given workloads, in first-seen order.
pub fn default_hooks(workloads: &[&str]) -> Vec<&'static str> {
    let mut hooks: Vec<&'static str> = Vec::new();
    for w in workloads {
        let known = HOOKS_BY_WORKLOAD
            .iter()
            .find(|(name, _)| name == w)
            .map_or(&[][..], |(_, h)| *h);
        for h in known {
            if !hooks.contains(h) {
                hooks.push(h);
            }
        }
    }
    hooks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_hooks_follow_the_workloads() {
        assert_eq!(default_hooks(&["stat"]), ["security_inode_getattr"]);
        let exec = default_hooks(&["open_close", "exec_proc"]);
        assert!(exec.contains(&"security_bprm_check") && exec.contains(&"security_file_open"));
        assert_eq!(
            exec.iter().filter(|h| **h == "security_file_open").count(),
            1
        );
        assert!(default_hooks(&["null_call"]).is_empty());
    }
}
