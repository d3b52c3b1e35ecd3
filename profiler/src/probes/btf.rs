//! The running kernel's BTF: which functions exist (so a hook absent on this kernel is named,
//! not silently skipped), their argument counts, and struct field offsets the programs need.
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use btf_rs::{Btf, Type};

pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

pub struct KernelBtf {
    btf: Btf,
}

impl KernelBtf {
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
        Ok(KernelBtf { btf })
    }

    /// True if the kernel has a traceable (BTF-described) function of this name.
    pub fn has_function(&self, name: &str) -> bool {
        self.btf
            .resolve_types_by_name(name)
            .map(|types| types.iter().any(|t| matches!(t, Type::Func(_))))
            .unwrap_or(false)
    }

    /// The number of parameters of a function.
    pub fn function_arg_count(&self, name: &str) -> Option<usize> {
        let types = self.btf.resolve_types_by_name(name).ok()?;
        types.iter().find_map(|t| match t {
            Type::Func(f) => match self.btf.resolve_chained_type(f).ok()? {
                Type::FuncProto(p) => Some(p.parameters.len()),
                _ => None,
            },
            _ => None,
        })
    }

    /// Every function name, in BTF order (for the hook catalog).
    pub fn function_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        // Type ids are dense from 1; the first missing id is the end.
        for id in 1.. {
            let Ok(t) = self.btf.resolve_type_by_id(id) else {
                break;
            };
            if let Type::Func(f) = &t {
                if let Ok(name) = self.btf.resolve_name(f) {
                    names.push(name);
                }
            }
        }
        names
    }

    /// Byte offset of `member` in `struct name`.
    pub fn member_offset(&self, name: &str, member: &str) -> Result<u32> {
        let types = self
            .btf
            .resolve_types_by_name(name)
            .map_err(|e| anyhow!("{e}"))?;
        for t in types {
            if let Type::Struct(s) = t {
                for m in &s.members {
                    if self.btf.resolve_name(m).ok().as_deref() == Some(member) {
                        return Ok(m.bit_offset() / 8);
                    }
                }
            }
        }
        bail!("struct {name} has no member {member} in this kernel's BTF")
    }
}
