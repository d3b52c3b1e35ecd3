//! One loader of hookprof's eBPF object, and one copy of the kernel's BTF as aya needs it,
//! shared by whatever loads while any holder keeps them (`AyaKernel`). aya's `EbpfLoader::new`
//! parses the kernel's BTF even when the caller then gives it one (aya issue #1172): ~13 MB
//! held and ~19 MB while parsing, under emulation slowly. A loader made for each load, beside
//! the process's own copy, held two at the profiler's peak; this one is made once a holding,
//! and its own parse is dropped before the process's copy is made. Once the last holder lets
//! go (a run, after its set-up), both are freed; a later load reads them anew.
//!
//! Each load is fitted to the kernel (`Features`, `TaskLayout`): read-only globals say which
//! way the programs keep per-task state and read a task's fields, so the verifier prunes the
//! other way; where the kernel has no task storage, the object is loaded from a copy whose
//! `TASK_STATE` is a hash map by thread id (`HASH_STATE_PATCH`, found by build.rs).
use std::borrow::Cow;
use std::sync::{Arc, Mutex, Once, Weak};

use anyhow::{Context, Result};
use aya::{Ebpf, EbpfLoader};

use super::{
    btf::TaskLayout,
    features::{self, Features, HASH_STATE_TASKS},
    scope_globals::Globals,
};

/// Which build of the object to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Object {
    /// Every hook slot.
    AllSlots,
    /// The calibration's slot alone (see `crate::ebpf_object_with_calibration_slot_only`).
    CalibrationSlotOnly,
}

impl Object {
    fn bytes(self) -> &'static [u8] {
        match self {
            Object::AllSlots => crate::ebpf_object(),
            Object::CalibrationSlotOnly => crate::ebpf_object_with_calibration_slot_only(),
        }
    }

    /// (file offset, value) pairs that make `TASK_STATE` a preallocated hash map.
    fn hash_state_patch(self) -> &'static [(usize, u32)] {
        match self {
            Object::AllSlots => &crate::ebpf_patches::ALL_SLOTS,
            Object::CalibrationSlotOnly => &crate::ebpf_patches::CALIBRATION_SLOT_ONLY,
        }
    }

    /// The object as this kernel loads it: as built, or a patched copy.
    fn for_kernel(self, features: &Features) -> Cow<'static, [u8]> {
        if features.task_storage {
            return Cow::Borrowed(self.bytes());
        }
        Cow::Owned(patched(self.bytes(), self.hash_state_patch()))
    }
}

/// A copy of `object` with each (offset, value) written as a little-endian u32, in a buffer
/// aligned as the ELF parser wants (u64 words, as `include_bytes_aligned` gives the original).
fn patched(object: &[u8], patch: &[(usize, u32)]) -> Vec<u8> {
    let mut copy = object.to_vec();
    for &(at, value) in patch {
        copy[at..at + 4].copy_from_slice(&value.to_le_bytes());
    }
    copy
}

self_cell::self_cell!(
    /// aya's loader beside the BTF it borrows.
    struct LoaderCell {
        owner: Arc<aya::Btf>,
        #[covariant]
        dependent: EbpfLoader,
    }
);

/// The kernel's BTF as aya needs it (to load fentry, fexit, tp_btf and LSM programs), and the
/// loader that loads hookprof's object with it.
pub struct AyaKernel {
    btf: Arc<aya::Btf>,
    loader: Mutex<LoaderCell>,
}

impl AyaKernel {
    /// The shared one, read first if no holder keeps one; kept for as long as the result is.
    pub fn hold() -> Result<Arc<AyaKernel>> {
        shared()
    }

    pub(super) fn btf(&self) -> &aya::Btf {
        &self.btf
    }
}

/// The shared `AyaKernel`, read first if no holder keeps one.
pub fn shared() -> Result<Arc<AyaKernel>> {
    static SHARED: Mutex<Weak<AyaKernel>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = shared.upgrade() {
        return Ok(s);
    }
    features::check_kernel()?;
    let features = Features::get()?;
    static NOTED: Once = Once::new();
    NOTED.call_once(|| {
        for note in features.notes() {
            crate::eprintln!("hookprof: note: {note}");
        }
    });
    let mut loader = EbpfLoader::new();
    loader.btf(None); // its own parse, gone before ours is made
    crate::peak_rss::release_free_heap();
    let btf = Arc::new(aya::Btf::from_sys_fs().context("read the kernel BTF for aya")?);
    // The per-task state map is task storage, which only the programs use.
    loader.allow_unsupported_maps();
    if !features.task_storage {
        loader.map_max_entries("TASK_STATE", HASH_STATE_TASKS);
    }
    let cell = LoaderCell::new(Arc::clone(&btf), move |btf| {
        let mut loader: EbpfLoader<'_> = loader;
        loader.btf(Some(btf));
        loader
    });
    let s = Arc::new(AyaKernel {
        btf,
        loader: Mutex::new(cell),
    });
    *shared = Arc::downgrade(&s);
    Ok(s)
}

/// The read-only globals that fit the programs to the kernel (see `Features`).
struct KernelGlobals {
    task_storage: u32,
    task_pid_offset: u32,
    has_task_pt_regs: u32,
    switch_has_prev_state: u32,
    task_state_field_offset: u32,
}

impl KernelGlobals {
    fn new(features: &Features, layout: &TaskLayout) -> Result<KernelGlobals> {
        let task_pid_offset = match (features.task_storage, layout.pid_offset) {
            (true, _) => 0,
            (false, Some(offset)) => offset,
            (false, None) => anyhow::bail!(
                "this kernel has no task storage for tracing programs (Linux 5.12), and its BTF \
                 gives no task_struct.pid to key per-task state by instead"
            ),
        };
        Ok(KernelGlobals {
            task_storage: u32::from(features.task_storage),
            task_pid_offset,
            has_task_pt_regs: u32::from(features.task_pt_regs),
            switch_has_prev_state: u32::from(layout.switch_prev_state),
            task_state_field_offset: layout.state_offset.unwrap_or(0),
        })
    }

    fn set<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        loader
            .override_global("TASK_STORAGE", &self.task_storage, true)
            .override_global("TASK_PID_OFFSET", &self.task_pid_offset, true)
            .override_global("HAS_TASK_PT_REGS", &self.has_task_pt_regs, true)
            .override_global("SWITCH_HAS_PREV_STATE", &self.switch_has_prev_state, true)
            .override_global(
                "TASK_STATE_FIELD_OFFSET",
                &self.task_state_field_offset,
                true,
            );
    }
}

/// Loads `object` counting as `globals` say, with only entries loaded if `entries_only`, fitted
/// to this kernel (`layout`: from its BTF).
pub(super) fn load_object(
    object: Object,
    globals: Globals,
    entries_only: bool,
    layout: &TaskLayout,
) -> Result<Ebpf> {
    let shared = shared()?;
    let features = Features::get()?;
    let kernel = KernelGlobals::new(&features, layout)?;
    let bytes = object.for_kernel(&features);
    let mut cell = shared.loader.lock().unwrap_or_else(|e| e.into_inner());
    // The loader keeps what its globals point at: each load's few dozen bytes of globals stay
    // for as long as the process (every load sets the same names anew).
    let globals: &'static Globals = Box::leak(Box::new(globals));
    let kernel: &'static KernelGlobals = Box::leak(Box::new(kernel));
    cell.with_dependent_mut(|_, loader| {
        globals.set(loader);
        kernel.set(loader);
        loader.override_global(
            "ENTRIES_ONLY",
            if entries_only { &1u32 } else { &0u32 },
            true,
        );
        loader.load(&bytes).context("load hookprof's eBPF object")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The patch build.rs found turns the object's task storage map into a preallocated hash
    /// map, and touches nothing else aya reads of it.
    #[test]
    fn the_hash_state_patch_makes_task_state_a_preallocated_hash_map() {
        use aya_obj::{generated::bpf_map_type, Object as Parsed};
        for object in [Object::AllSlots, Object::CalibrationSlotOnly] {
            let map = |bytes: &[u8]| {
                let parsed = Parsed::parse(bytes).expect("parse the object");
                let m = parsed.maps.get("TASK_STATE").expect("TASK_STATE").clone();
                (m.map_type(), m.map_flags(), m.key_size(), m.value_size())
            };
            let built = map(object.bytes());
            assert_eq!(built.0, bpf_map_type::BPF_MAP_TYPE_TASK_STORAGE as u32);
            assert_eq!(built.1, aya_obj::generated::BPF_F_NO_PREALLOC);
            let old = Features {
                task_storage: false,
                task_pt_regs: false,
                bpf_loop: false,
            };
            let hashed = map(&object.for_kernel(&old));
            assert_eq!(hashed.0, bpf_map_type::BPF_MAP_TYPE_HASH as u32);
            assert_eq!(hashed.1, 0, "preallocated: perf_event programs need it");
            assert_eq!((hashed.2, hashed.3), (built.2, built.3));
        }
    }
}
