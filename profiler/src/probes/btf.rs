//! The running kernel's BTF: which functions exist (so a hook absent on this kernel is named,
//! not silently skipped) and their argument counts, and where the programs find what they read
//! from a task on kernels whose helpers or tracepoints do not hand it over (`TaskLayout`).
use anyhow::{anyhow, Context, Result};
use btf_rs::{Btf, Type};
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

    /// Parses the BTF in this process (the child's side of `load_in_child`; tests).
    pub fn load() -> Result<KernelBtf> {
        super::features::require_btf()?;
        let btf = Btf::from_file(VMLINUX_BTF)
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("read {VMLINUX_BTF}"))?;
        Ok(KernelBtf::from_btf(&btf))
    }

    fn from_btf(btf: &Btf) -> KernelBtf {
        let mut functions = Vec::new();
        // Type ids are dense from 1; the first missing id is the end.
        for id in 1.. {
            let Ok(t) = btf.resolve_type_by_id(id) else {
                break;
            };
            if let Type::Func(f) = &t {
                if let Ok(name) = btf.resolve_name(f) {
                    let args = match btf.resolve_chained_type(f) {
                        Ok(Type::FuncProto(p)) => Some(p.parameters.len()),
                        _ => None,
                    };
                    functions.push((name, args));
                }
            }
        }
        functions.sort_unstable();
        functions.dedup_by(|a, b| a.0 == b.0);
        KernelBtf::from_sorted(&functions, TaskLayout::from_btf(btf))
    }

    /// The table of `functions` (sorted by name, each once).
    fn from_sorted(functions: &[(String, Option<usize>)], layout: TaskLayout) -> KernelBtf {
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
    fn from_btf(btf: &Btf) -> TaskLayout {
        let task_struct = btf
            .resolve_types_by_name("task_struct")
            .unwrap_or_default()
            .into_iter()
            .find_map(|t| match t {
                Type::Struct(s) if !s.members.is_empty() => Some(s),
                _ => None,
            });
        let offset = |names: &[&str]| -> Option<u32> {
            let s = task_struct.as_ref()?;
            names.iter().find_map(|name| {
                s.members
                    .iter()
                    .find(|m| btf.resolve_name(*m).is_ok_and(|n| n == *name))
                    .map(|m| m.bit_offset() / 8)
            })
        };
        // typedef void (*btf_trace_sched_switch)(void *, bool, struct task_struct *,
        //     struct task_struct *[, unsigned int prev_state]);
        let switch_args = btf
            .resolve_types_by_name("btf_trace_sched_switch")
            .unwrap_or_default()
            .into_iter()
            .find_map(|t| match t {
                Type::Typedef(td) => btf.type_iter(&td).find_map(|t| match t {
                    Type::FuncProto(p) => Some(p.parameters.len()),
                    _ => None,
                }),
                _ => None,
            });
        TaskLayout {
            pid_offset: offset(&["pid"]),
            state_offset: offset(&["__state", "state"]),
            switch_prev_state: switch_args.is_some_and(|n| n >= 5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_table_finds_each_name_with_its_arguments_and_nothing_else() {
        let functions = [
            ("bpf_lsm_file_open".to_string(), Some(1)),
            ("security_file_open".to_string(), Some(1)),
            ("security_inode_getattr".to_string(), None),
            ("x".to_string(), Some(70_000)),
        ];
        let kernel = KernelBtf::from_sorted(&functions, TaskLayout::default());
        // As the child sends it to the profiler.
        let json = serde_json::to_string(&kernel).unwrap();
        let kernel: KernelBtf = serde_json::from_str(&json).unwrap();
        let names: Vec<&str> = kernel.function_names().collect();
        assert_eq!(
            names,
            functions.iter().map(|f| f.0.as_str()).collect::<Vec<_>>()
        );
        assert_eq!(kernel.function_arg_count("security_file_open"), Some(1));
        assert_eq!(kernel.function_arg_count("security_inode_getattr"), None);
        assert!(kernel.has_function("security_inode_getattr"));
        assert!(kernel.has_function("x"));
        for absent in ["", "security_file", "security_file_open_", "y", "a"] {
            assert!(!kernel.has_function(absent), "{absent}");
        }
    }
}
