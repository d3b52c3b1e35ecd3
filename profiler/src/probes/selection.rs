//! Which kernel functions a run times, by `--hooks`. `default`: what each selected workload
//! calls on this kernel, found by the discovery pass (`crate::discovery`) among every hook and
//! task path, then among the active LSMs' functions under the hooks found. `all`: every
//! `security_*` hook. Otherwise the named functions, each hook with its LSM functions under it.
use anyhow::{bail, Result};

use super::{
    catalog::{hook_with_lsms, lsm_functions, security_hooks, task_paths, Target},
    KernelBtf, USER_SLOTS,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Discover what each workload calls.
    Discover,
    /// Time these functions in every workload.
    Listed(Vec<Target>),
}

/// Reads `--hooks` (`default`, `all`, or names); a name this kernel lacks is an error.
pub fn from_hooks_option(
    kernel: &KernelBtf,
    hooks: &[String],
    active_lsms: &[String],
) -> Result<Selection> {
    let targets: Vec<Target> = match hooks {
        [one] if one == "default" => return Ok(Selection::Discover),
        [one] if one == "all" => security_hooks(kernel)
            .iter()
            .map(|h| Target::top(h))
            .collect(),
        names => {
            let mut targets = Vec::new();
            for name in names {
                if !kernel.has_function(name) {
                    bail!("hook '{name}' does not exist on this kernel (not in its BTF); see `hookprof hooks`");
                }
                targets.extend(hook_with_lsms(kernel, name, active_lsms));
            }
            dedup(targets)
        }
    };
    if targets.len() > USER_SLOTS {
        bail!(
            "{} functions to time, but hookprof has {USER_SLOTS} fentry/fexit slots: name fewer with --hooks",
            targets.len()
        );
    }
    Ok(Selection::Listed(targets))
}

/// Discovery's first round: every `security_*` hook and every task path of this kernel.
pub fn hook_candidates(kernel: &KernelBtf) -> Vec<Target> {
    let mut targets: Vec<Target> = security_hooks(kernel)
        .iter()
        .map(|h| Target::top(h))
        .collect();
    targets.extend(task_paths(kernel));
    targets
}

/// Discovery's second round: the active LSMs' functions under the given hooks.
pub fn lsm_candidates(kernel: &KernelBtf, hooks: &[Target], active_lsms: &[String]) -> Vec<Target> {
    dedup(
        hooks
            .iter()
            .flat_map(|h| lsm_functions(kernel, &h.function, active_lsms))
            .collect(),
    )
}

/// The whole catalog `hookprof hooks` lists: every hook with its LSM functions, then the task
/// paths.
pub fn catalog(kernel: &KernelBtf, active_lsms: &[String]) -> Vec<Target> {
    let mut targets: Vec<Target> = security_hooks(kernel)
        .iter()
        .flat_map(|h| hook_with_lsms(kernel, h, active_lsms))
        .collect();
    targets.extend(task_paths(kernel));
    dedup(targets)
}

/// Keeps the first of each function.
fn dedup(targets: Vec<Target>) -> Vec<Target> {
    let mut out: Vec<Target> = Vec::with_capacity(targets.len());
    for t in targets {
        if !out.iter().any(|o| o.function == t.function) {
            out.push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The running kernel's BTF (hookprof needs it anyway; CI machines have it).
    fn kernel() -> KernelBtf {
        KernelBtf::load().expect("this kernel's BTF")
    }

    #[test]
    fn default_is_discovered_and_unknown_names_are_errors() {
        let k = kernel();
        let lsms = vec!["capability".to_string(), "bpf".to_string()];
        assert_eq!(
            from_hooks_option(&k, &["default".into()], &lsms).unwrap(),
            Selection::Discover
        );
        let err = from_hooks_option(&k, &["security_no_such_hook".into()], &lsms).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let Selection::Listed(listed) =
            from_hooks_option(&k, &["security_file_open".into()], &lsms).unwrap()
        else {
            panic!("a list is listed")
        };
        assert_eq!(listed[0], Target::top("security_file_open"));
        assert!(listed
            .iter()
            .any(|t| t.function == "bpf_lsm_file_open" && t.lsm.as_deref() == Some("bpf")));
        // The hook security_bprm_check runs is named bprm_check_security.
        let Selection::Listed(listed) =
            from_hooks_option(&k, &["security_bprm_check".into()], &lsms).unwrap()
        else {
            panic!("a list is listed")
        };
        assert!(
            listed
                .iter()
                .any(|t| t.function == "bpf_lsm_bprm_check_security"
                    && t.parent.as_deref() == Some("security_bprm_check")),
            "{listed:?}"
        );
    }

    #[test]
    fn candidates_cover_hooks_task_paths_and_lsm_functions_once() {
        let k = kernel();
        let hooks = hook_candidates(&k);
        assert!(hooks.iter().any(|t| t.function == "security_file_open"));
        assert!(hooks.iter().any(|t| t.function == "copy_process"));
        assert!(hooks.iter().all(|t| t.lsm.is_none()));
        let lsms = vec!["bpf".to_string()];
        let under = lsm_candidates(
            &k,
            &[
                Target::top("security_file_open"),
                Target::top("security_file_open"),
            ],
            &lsms,
        );
        assert_eq!(under.len(), 1, "{under:?}");
        assert_eq!(under[0].parent.as_deref(), Some("security_file_open"));
        let all = catalog(&k, &lsms);
        let position = |f: &str| all.iter().position(|t| t.function == f).unwrap();
        assert!(position("security_file_open") < position("bpf_lsm_file_open"));
        assert!(all.len() > hooks.len());
    }
}
