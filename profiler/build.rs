//! Builds ../profiler-ebpf for bpfel with the `debian` toolchain (linked by `cargo xtask setup`):
//! it is a stable channel that ships a prebuilt `core` for bpfel, so no -Z build-std is needed.
//! The object's DWARF is then dropped (`strip_dwarf`).
use std::path::Path;

use anyhow::Context;
use object::build::elf::{Builder, SectionData};

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=HOOKPROF_EBPF_TOOLCHAIN");
    let toolchain = std::env::var("HOOKPROF_EBPF_TOOLCHAIN").unwrap_or_else(|_| "debian".into());
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../profiler-ebpf");
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "profiler-ebpf",
            root_dir: root,
            ..Default::default()
        }],
        aya_build::Toolchain::Custom(&toolchain),
    )?;
    let out_dir = std::env::var_os("OUT_DIR").context("OUT_DIR is not set")?;
    strip_dwarf(&Path::new(&out_dir).join("profiler-ebpf"))
}

/// Drops the object's DWARF (`.debug_*` sections and their relocations, most of its size).
/// bpf-linker needs the DWARF to write the BTF, which stays; aya never reads the DWARF, but its
/// parser collects every section's relocations, so each load of the object would hold them
/// (and touch their pages) at the profiler's peak.
fn strip_dwarf(path: &Path) -> anyhow::Result<()> {
    let data = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    let mut elf = Builder::read(data.as_slice()).context("parse the eBPF object")?;
    let mut dwarf = Vec::new();
    for section in elf.sections.iter_mut() {
        if section.name.starts_with(b".debug_") {
            section.delete = true;
            dwarf.push(section.id());
        }
    }
    for section in elf.sections.iter_mut() {
        if section.sh_info_section.is_some_and(|s| dwarf.contains(&s)) {
            section.delete = true; // the relocations of a DWARF section
        }
    }
    // bpf-linker names the sections in the symbols' string table, which object's writer does
    // not do: the names get a table of their own.
    let names = elf.sections.add();
    names.name = b".shstrtab"[..].into();
    names.data = SectionData::SectionString;
    let mut stripped = Vec::new();
    elf.write(&mut stripped).context("write the eBPF object")?;
    std::fs::write(path, stripped).with_context(|| format!("write {}", path.display()))
}
