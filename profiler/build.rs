//! Builds ../profiler-ebpf for bpfel with the `debian` toolchain (linked by `cargo xtask setup`):
//! it is a stable channel that ships a prebuilt `core` for bpfel, so no -Z build-std is needed.
//! The object's DWARF and BTF line info are then dropped (`strip_debug_info`), and a second
//! object is written without the hook slots but the calibration's (`Slots`).
use std::path::Path;

use anyhow::Context;
use object::build::elf::{Builder, SectionData, SectionId};

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=HOOKPROF_EBPF_TOOLCHAIN");
    let toolchain = std::env::var("HOOKPROF_EBPF_TOOLCHAIN").unwrap_or_else(|_| "debian".into());
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../profiler-ebpf");
    share_ebpf_target_dir();
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "profiler-ebpf",
            root_dir: root,
            ..Default::default()
        }],
        aya_build::Toolchain::Custom(&toolchain),
    )?;
    let out_dir = std::env::var_os("OUT_DIR").context("OUT_DIR is not set")?;
    let path = Path::new(&out_dir).join("profiler-ebpf");
    let object = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
    let write = |name: &str, data: Vec<u8>| {
        let path = Path::new(&out_dir).join(name);
        std::fs::write(&path, data).with_context(|| format!("write {}", path.display()))
    };
    write("profiler-ebpf", rewrite(&object, Slots::All)?)?;
    write(
        "profiler-ebpf-calibration-slot",
        rewrite(&object, Slots::CalibrationOnly)?,
    )
}

/// aya-build compiles the eBPF crate in a target directory under OUT_DIR, which is new for
/// every build of this crate that differs in profile, features or host target (clippy, the
/// release binary, the tests, the static package, the fuzz targets): each compiled it from
/// scratch (~2 min on two CPUs). That directory is made a link to one under the workspace's
/// target directory, so cargo finds the bpfel build it made before up to date.
fn share_ebpf_target_dir() {
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        return;
    };
    let parent = Path::new(&out_dir).join("aya-build/target");
    let link = parent.join("profiler-ebpf");
    if link.exists() {
        return;
    }
    // A relative CARGO_TARGET_DIR is relative to where cargo ran, which a build script
    // cannot know: the workspace's own target directory then.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("ebpf");
    let linked = std::fs::create_dir_all(&target)
        .and_then(|()| std::fs::create_dir_all(&parent))
        .and_then(|()| std::os::unix::fs::symlink(&target, &link));
    if let Err(e) = linked {
        // Not fatal: aya-build then builds in a directory of its own, as it would.
        println!(
            "cargo:warning=the eBPF build is not shared ({} -> {}: {e})",
            link.display(),
            target.display()
        );
    }
}

/// Which hook slots (`hook_enter_N`/`hook_exit_N` program pairs) an object keeps.
#[derive(Clone, Copy, PartialEq)]
enum Slots {
    All,
    /// Only the last slot, the calibration's: for probes that time no function (where the
    /// kernel refuses trampolines, or no hook is asked for), which then need not parse and
    /// hold ~770 programs they never load.
    CalibrationOnly,
}

/// The object without what only a debugger reads (`strip_debug_info`), and with `slots`.
fn rewrite(object: &[u8], slots: Slots) -> anyhow::Result<Vec<u8>> {
    let mut elf = Builder::read(object).context("parse the eBPF object")?;
    let mut dropped = strip_debug_info(&mut elf)?;
    if slots == Slots::CalibrationOnly {
        dropped.extend(drop_slots_but_the_last(&mut elf)?);
    }
    for section in elf.sections.iter_mut() {
        if section
            .sh_info_section
            .is_some_and(|s| dropped.contains(&s))
        {
            section.delete = true; // the relocations of a dropped or shortened section
        }
    }
    // The symbols of dropped programs go with them.
    elf.delete_orphans();
    // bpf-linker names the sections in the symbols' string table, which object's writer does
    // not do: the names get a table of their own.
    let names = elf.sections.add();
    names.name = b".shstrtab"[..].into();
    names.data = SectionData::SectionString;
    let mut written = Vec::new();
    elf.write(&mut written).context("write the eBPF object")?;
    Ok(written)
}

/// Drops what only a debugger reads: the DWARF (`.debug_*` sections, most of the object's
/// size) and the line info of `.BTF.ext` (source lines for each instruction of each of the
/// ~780 programs). bpf-linker needs the DWARF to write the BTF, which stays, as do the
/// function info and CO-RE relocations of `.BTF.ext`. aya's parser copies `.BTF.ext`, collects
/// every section's relocations and gives each program the line info of every function it
/// links, so each load of the object held them all at the profiler's peak; without line info
/// the kernel's verifier logs name no source lines. Returns the sections whose relocations
/// must go too.
fn strip_debug_info(elf: &mut Builder) -> anyhow::Result<Vec<SectionId>> {
    let mut dropped = Vec::new();
    for section in elf.sections.iter_mut() {
        if section.name.starts_with(b".debug_") {
            section.delete = true;
            dropped.push(section.id());
        } else if section.name.as_slice() == b".BTF.ext" {
            let SectionData::Data(data) = &section.data else {
                anyhow::bail!(".BTF.ext holds no data");
            };
            section.data = SectionData::Data(without_line_info(data)?.into());
            // Its relocations (of line and function info offsets) are for a linker; aya
            // never applies them, and they would point past the shortened section.
            dropped.push(section.id());
        }
    }
    Ok(dropped)
}

/// Drops every hook slot's programs but the last slot's (the calibration's, `USER_SLOTS` in
/// the profiler). Returns the dropped sections.
fn drop_slots_but_the_last(elf: &mut Builder) -> anyhow::Result<Vec<SectionId>> {
    let slot_of = |name: &[u8]| -> Option<u32> {
        let name = std::str::from_utf8(name).ok()?;
        let n = name
            .strip_prefix("fentry/hook_enter_")
            .or_else(|| name.strip_prefix("fexit/hook_exit_"))?;
        n.parse().ok()
    };
    let last = elf
        .sections
        .iter()
        .filter_map(|s| slot_of(&s.name))
        .max()
        .context("the eBPF object has no hook slots")?;
    let mut dropped = Vec::new();
    for section in elf.sections.iter_mut() {
        if slot_of(&section.name).is_some_and(|n| n != last) {
            section.delete = true;
            dropped.push(section.id());
        }
    }
    Ok(dropped)
}

/// A `.BTF.ext` section without its line info: the header (its offsets are relative to its
/// end), then the function info and the CO-RE relocations as they were.
fn without_line_info(ext: &[u8]) -> anyhow::Result<Vec<u8>> {
    let word = |at: usize| -> anyhow::Result<u32> {
        let bytes = ext
            .get(at..at + 4)
            .context(".BTF.ext is shorter than its header")?;
        Ok(u32::from_le_bytes(bytes.try_into().expect("4 bytes")))
    };
    anyhow::ensure!(
        ext.get(..2) == Some(&[0x9f, 0xeb][..]),
        ".BTF.ext: not a little-endian BTF.ext header"
    );
    let header_len = word(4)? as usize;
    let (func_off, func_len) = (word(8)? as usize, word(12)? as usize);
    let (relo_off, relo_len) = if header_len >= 32 {
        (word(24)? as usize, word(28)? as usize)
    } else {
        (0, 0)
    };
    let part = |off: usize, len: usize| {
        ext.get(header_len + off..header_len + off + len)
            .context(".BTF.ext: a part lies past the section's end")
    };
    let (func, relo) = (part(func_off, func_len)?, part(relo_off, relo_len)?);
    let mut out = ext[..header_len].to_vec();
    let mut set = |at: usize, value: usize| {
        out[at..at + 4].copy_from_slice(&(value as u32).to_le_bytes());
    };
    set(8, 0); // function info first
    set(16, func_len); // no line info: empty, where it would start
    set(20, 0);
    if header_len >= 32 {
        set(24, func_len);
    }
    out.extend_from_slice(func);
    out.extend_from_slice(relo);
    Ok(out)
}
