//! The running kernel's BTF: which functions exist (so a hook absent on this kernel is named,
//! not silently skipped) and their argument counts.
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use btf_rs::{Btf, Type};
use serde::{Deserialize, Serialize};

pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The hidden subcommand that parses the BTF for `load_in_child` (not for direct use).
pub const LOAD_COMMAND: &str = "__kernel-btf";

/// The kernel's functions, kept apart from the parsed BTF: the parse takes tens of MB, the
/// functions a few, and aya parses the BTF again when it loads the probes.
#[derive(Serialize, Deserialize)]
pub struct KernelBtf {
    /// Every function name with its parameter count (None if its prototype is unreadable),
    /// sorted by name.
    functions: Vec<(String, Option<usize>)>,
}

impl KernelBtf {
    /// As `load`, in a short-lived process of this binary (`LOAD_COMMAND`): the parse peaks at
    /// over 40 MB of heap (btf_rs keeps every type and name in hash maps), which would stay the
    /// profiler's peak resident set for the whole run; only the functions come back.
    pub fn load_in_child() -> Result<KernelBtf> {
        crate::in_child::run(&[LOAD_COMMAND])
    }

    /// Parses the BTF in this process (the child's side of `load_in_child`; tests).
    pub fn load() -> Result<KernelBtf> {
        if !Path::new(VMLINUX_BTF).exists() {
            bail!(
                "this kernel has no BTF ({VMLINUX_BTF} is missing): hookprof needs a kernel \
                 built with CONFIG_DEBUG_INFO_BTF=y"
            );
        }
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
        functions.shrink_to_fit();
        KernelBtf { functions }
    }

    fn find(&self, name: &str) -> Option<&(String, Option<usize>)> {
        self.functions
            .binary_search_by(|(f, _)| f.as_str().cmp(name))
            .ok()
            .map(|i| &self.functions[i])
    }

    /// True if the kernel has a traceable (BTF-described) function of this name.
    pub fn has_function(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// The number of parameters of a function.
    pub fn function_arg_count(&self, name: &str) -> Option<usize> {
        self.find(name)?.1
    }

    /// Every function name, sorted (for the hook catalog).
    pub fn function_names(&self) -> impl Iterator<Item = &str> {
        self.functions.iter().map(|(f, _)| f.as_str())
    }
}
