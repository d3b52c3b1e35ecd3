//! One loader of hookprof's eBPF object, and one copy of the kernel's BTF as aya needs it, for
//! the whole process. aya's `EbpfLoader::new` parses the kernel's BTF even when the caller then
//! gives it one (aya issue #1172): ~9 MB held and ~15 MB while parsing, under emulation slowly.
//! A loader made for each load, beside the process's own copy, held two at the profiler's peak;
//! this one is made once, and its own parse is dropped before the process's copy is made.
use std::sync::Mutex;

use anyhow::{Context, Result};
use aya::{Ebpf, EbpfLoader};

use super::aggregate::Globals;

struct Shared {
    loader: Mutex<EbpfLoader<'static>>,
    btf: &'static aya::Btf,
}

fn shared() -> Result<&'static Shared> {
    static SHARED: Mutex<Option<&'static Shared>> = Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = *shared {
        return Ok(s);
    }
    let mut loader = EbpfLoader::new();
    loader.btf(None); // its own parse, gone before ours is made
    crate::peak_rss::release_free_heap();
    let btf: &'static aya::Btf = Box::leak(Box::new(
        aya::Btf::from_sys_fs().context("read the kernel BTF for aya")?,
    ));
    loader
        .btf(Some(btf))
        // The per-task state map is task storage, which only the programs use.
        .allow_unsupported_maps();
    let s: &'static Shared = Box::leak(Box::new(Shared {
        loader: Mutex::new(loader),
        btf,
    }));
    *shared = Some(s);
    Ok(s)
}

/// The kernel's BTF as aya needs it (to load fentry, fexit and tp_btf programs).
pub(super) fn aya_btf() -> Result<&'static aya::Btf> {
    Ok(shared()?.btf)
}

/// Loads `object` (hookprof's, whole or with the calibration slot only) counting as `globals`
/// say, with only entries loaded if `entries_only`.
pub(super) fn load_object(object: &[u8], globals: Globals, entries_only: bool) -> Result<Ebpf> {
    let shared = shared()?;
    let mut loader = shared.loader.lock().unwrap_or_else(|e| e.into_inner());
    // The loader lives as long as the process and keeps what its globals point at: each
    // load's few dozen bytes of globals stay with it (every load sets the same names anew).
    let globals: &'static Globals = Box::leak(Box::new(globals));
    globals.set(&mut loader);
    loader.override_global(
        "ENTRIES_ONLY",
        if entries_only { &1u32 } else { &0u32 },
        true,
    );
    loader.load(object).context("load hookprof's eBPF object")
}
