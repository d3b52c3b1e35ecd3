//! The running kernel's BTF: which functions exist (so a hook absent on this kernel is named,
//! not silently skipped) and their argument counts, and where the programs find what they read
//! from a task on kernels whose helpers or tracepoints do not hand it over (`TaskLayout`).
use anyhow::{Context, Result};

use super::btf_scan::RawBtf;
use serde::{Deserialize, Serialize};

pub use super::features::VMLINUX_BTF;

/// The hidden subcommand that parses the BTF for `load_in_child` (not for direct use).
pub const LOAD_COMMAND: &str = "__kernel-btf";

/// The kernel's functions, kept apart from the parsed BTF: the parse takes tens of MB, the
/// functions a few, and aya parses the BTF again when it loads the probes.
#[derive(Serialize, Deserialize)]
pub struct KernelBtf {
    /// Every function name, sorted, each ended by a newline: one allocation for the ~56,000
    /// names (a `String` each took 3.6 MB, held at the run's peak; this is 1.5 MB).
    names: String,
    /// Where each name starts in `names`, with its parameter count (None if its prototype is
    /// unreadable), in the names' order.
    functions: Vec<(u32, Option<u16>)>,
    layout: TaskLayout,
}

/// What differs between kernels in `struct task_struct` and the sched_switch tracepoint, as
/// this kernel's BTF has it (offsets in bytes).
#[derive(Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TaskLayout {
    /// `pid`: the thread id, the key of per-task state kept by thread id.
    pub pid_offset: Option<u32>,
    /// `__state` (5.14) or `state` (before): how a task left its CPU.
    pub state_offset: Option<u32>,
    /// sched_switch passes `prev_state` (its fourth argument, 5.18).
    pub switch_prev_state: bool,
}

impl KernelBtf {
    /// As `load`, in a short-lived process of this binary (`LOAD_COMMAND`): the parse peaks at
    /// over 40 MB of heap (btf_rs keeps every type and name in hash maps), which would stay the
    /// profiler's peak resident set for the whole run; only the functions come back.
    pub fn load_in_child() -> Result<KernelBtf> {
        crate::probes::in_child::run(&[LOAD_COMMAND])
    }

    /// Reads the BTF in this process (the child's side of `load_in_child`; tests).
    pub fn load() -> Result<KernelBtf> {
        super::features::require_btf()?;
        let bytes = std::fs::read(VMLINUX_BTF).with_context(|| format!("read {VMLINUX_BTF}"))?;
        let raw = RawBtf::parse(&bytes).with_context(|| format!("read {VMLINUX_BTF}"))?;
        let mut functions = raw.functions()?;
        functions.sort_unstable();
        functions.dedup_by(|a, b| a.0 == b.0);
        Ok(KernelBtf::from_sorted(
            &functions,
            TaskLayout::from_btf(&raw)?,
        ))
    }

    /// The table of `functions` (sorted by name, each once).
    fn from_sorted(functions: &[(&str, Option<usize>)], layout: TaskLayout) -> KernelBtf {
        let mut names = String::with_capacity(functions.iter().map(|(f, _)| f.len() + 1).sum());
        let functions = functions
            .iter()
            .map(|(name, args)| {
                let at = u32::try_from(names.len()).expect("under 4 GB of names");
                names.push_str(name);
                names.push('\n');
                (at, args.and_then(|a| u16::try_from(a).ok()))
            })
            .collect();
        KernelBtf {
            names,
            functions,
            layout,
        }
    }

    /// The name of the `i`th function.
    fn name(&self, i: usize) -> &str {
        name_at(&self.names, self.functions[i].0)
    }

    /// Where the programs find a task's thread id and state, and what sched_switch passes.
    pub fn layout(&self) -> TaskLayout {
        self.layout
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.functions
            .binary_search_by(|&(at, _)| name_at(&self.names, at).cmp(name))
            .ok()
    }

    /// True if the kernel has a traceable (BTF-described) function of this name.
    pub fn has_function(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// The number of parameters of a function.
    pub fn function_arg_count(&self, name: &str) -> Option<usize> {
        self.functions[self.find(name)?].1.map(usize::from)
    }

    /// Every function name, sorted (for the hook catalog).
    pub fn function_names(&self) -> impl Iterator<Item = &str> {
        (0..self.functions.len()).map(|i| self.name(i))
    }
}

/// The name that starts at `at` in `names` (names each ended by a newline).
fn name_at(names: &str, at: u32) -> &str {
    let rest = &names[at as usize..];
    rest.split_once('\n').map_or(rest, |(name, _)| name)
}

impl TaskLayout {
    fn from_btf(btf: &RawBtf) -> Result<TaskLayout> {
        let [pid, state, old_state] =
            btf.member_offsets("task_struct", &["pid", "__state", "state"])?[..]
        else {
            unreachable!("one offset a member asked for")
        };
        // typedef void (*btf_trace_sched_switch)(void *, bool, struct task_struct *,
        //     struct task_struct *[, unsigned int prev_state]);
        let switch_args = btf.typedef_params("btf_trace_sched_switch")?;
        Ok(TaskLayout {
            pid_offset: pid,
            state_offset: state.or(old_state),
            switch_prev_state: switch_args.is_some_and(|n| n >= 5),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_table_finds_each_name_with_its_arguments_and_nothing_else() {
        let functions = [
            ("bpf_lsm_file_open", Some(1)),
            ("security_file_open", Some(1)),
            ("security_inode_getattr", None),
            ("x", Some(70_000)),
        ];
        let kernel = KernelBtf::from_sorted(&functions, TaskLayout::default());
        // As the child sends it to the profiler.
        let json = serde_json::to_string(&kernel).unwrap();
        let kernel: KernelBtf = serde_json::from_str(&json).unwrap();
        let names: Vec<&str> = kernel.function_names().collect();
        assert_eq!(names, functions.iter().map(|f| f.0).collect::<Vec<_>>());
        assert_eq!(kernel.function_arg_count("security_file_open"), Some(1));
        assert_eq!(kernel.function_arg_count("security_inode_getattr"), None);
        assert!(kernel.has_function("security_inode_getattr"));
        assert!(kernel.has_function("x"));
        for absent in ["", "security_file", "security_file_open_", "y", "a"] {
            assert!(!kernel.has_function(absent), "{absent}");
        }
    }
}
