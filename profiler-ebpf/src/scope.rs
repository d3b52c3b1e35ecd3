//! Which tasks `top` counts, set at load as read-only globals (the verifier then drops the
//! modes not chosen). `run` and `stat` keep the gate (`scope::GATE`): a task counts once the
//! gate or a tracked parent's fork gave it state, and nothing is admitted here. `top` admits a
//! task in its scope on the task's first probed entry (a syscall or a timed function).
use aya_ebpf::{
    bindings::bpf_pidns_info,
    helpers::{
        bpf_get_current_ancestor_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_get_ns_current_pid_tgid, bpf_probe_read_user,
    },
    macros::map,
    maps::HashMap,
    Global,
};
use profiler_common::{scope, COMM_LEN, MAX_GATE_OWNERS, WINDOW_WORD_ADDR};

/// The processes whose gate counts (tgid -> unused value): the runners that do the measured
/// work, one per parallel copy. Writable, because a runner that failed is replaced by one with
/// another pid; several hookprof instances never track each other's threads.
#[map]
pub static GATE_OWNERS: HashMap<u32, u8> = HashMap::with_max_entries(MAX_GATE_OWNERS, 0);

#[unsafe(no_mangle)]
static SCOPE: Global<u32> = Global::new(scope::GATE);
/// hookprof's pid namespace (the device and inode of its `/proc/self/ns/pid`), set at load
/// when it is not the initial one (a container): the process ids below, and the gate's owners,
/// are that namespace's, not the kernel's.
#[unsafe(no_mangle)]
static PIDNS_DEV: Global<u64> = Global::new(0);
#[unsafe(no_mangle)]
static PIDNS_INO: Global<u64> = Global::new(0);
/// hookprof's own process: never admitted (its map reads are not the machine's load).
#[unsafe(no_mangle)]
static SELF_TGID: Global<u32> = Global::new(0);
/// `scope::PID`: the process.
#[unsafe(no_mangle)]
static SCOPE_TGID: Global<u32> = Global::new(0);
/// `scope::CGROUP`: the cgroup's id and its depth below the root (the root is level 0).
#[unsafe(no_mangle)]
static SCOPE_CGROUP: Global<u64> = Global::new(0);
#[unsafe(no_mangle)]
static SCOPE_CGROUP_LEVEL: Global<u32> = Global::new(0);
/// `scope::COMM`: the command name, NUL-padded.
#[unsafe(no_mangle)]
static SCOPE_COMM: Global<[u8; COMM_LEN]> = Global::new([0; COMM_LEN]);

/// True in `top`: tallies go to the aggregate map, per group and path.
#[inline(always)]
pub fn is_top() -> bool {
    SCOPE.load() != scope::GATE
}

/// Whether the current task, which has no state yet, is in `top`'s scope.
#[inline(always)]
pub fn admits_current() -> bool {
    let mode = SCOPE.load();
    if mode == scope::GATE {
        return false;
    }
    let tgid = current_tgid();
    if tgid == Some(SELF_TGID.load()) {
        return false;
    }
    match mode {
        scope::SYSTEM => true,
        scope::PID => tgid == Some(SCOPE_TGID.load()),
        // The task's ancestor at the cgroup's level is the cgroup itself for every task in
        // its subtree.
        scope::CGROUP => {
            let level = SCOPE_CGROUP_LEVEL.load() as i32;
            let ancestor = unsafe { bpf_get_current_ancestor_cgroup_id(level) };
            ancestor == SCOPE_CGROUP.load()
        }
        scope::COMM => has_scope_comm(),
        _ => false,
    }
}

/// The current task's process id as hookprof sees it (in its pid namespace); None for a task
/// of another pid namespace, which cannot be one hookprof named.
#[inline(always)]
pub fn current_tgid() -> Option<u32> {
    current_ids().map(|ids| ids.tgid)
}

/// The current task's process and thread ids in hookprof's pid namespace.
#[inline(always)]
fn current_ids() -> Option<bpf_pidns_info> {
    let ino = PIDNS_INO.load();
    if ino == 0 {
        let ids = bpf_get_current_pid_tgid();
        return Some(bpf_pidns_info {
            pid: ids as u32,
            tgid: (ids >> 32) as u32,
        });
    }
    let mut ids = bpf_pidns_info { pid: 0, tgid: 0 };
    let size = core::mem::size_of::<bpf_pidns_info>() as u32;
    // SAFETY: the helper writes `size` bytes into `ids`, a local of that size.
    let r = unsafe { bpf_get_ns_current_pid_tgid(PIDNS_DEV.load(), ino, &mut ids, size) };
    (r == 0).then_some(ids)
}

/// Whether the current task belongs to a runner (a gate owner). Owners are named by the pids
/// hookprof sees, which a container's namespace renumbers.
#[inline(always)]
pub fn current_owns_gate() -> bool {
    // SAFETY: the value is only tested for presence, never read through.
    current_tgid().is_some_and(|tgid| unsafe { GATE_OWNERS.get(&tgid) }.is_some())
}

/// Whether the current task is a runner's thread whose tracking window is open, as its window
/// word says (`WINDOW_WORD_ADDR`): how a pass with no gate program knows the window. The word
/// is in the runner's own memory, so this holds only for the current task, and for a task
/// that has no state (one that has holds its window in it).
#[inline(always)]
pub fn window_word_open() -> bool {
    let Some(ids) = current_ids() else {
        return false;
    };
    // SAFETY: as in `current_owns_gate`.
    if unsafe { GATE_OWNERS.get(&ids.tgid) }.is_none() {
        return false;
    }
    // SAFETY: a read of user memory that fails (no such page) instead of faulting.
    let word = unsafe { bpf_probe_read_user(WINDOW_WORD_ADDR as *const u32) };
    word == Ok(ids.pid)
}

/// Whether a tracked task's children are tracked from their fork: not by command name, where
/// a child counts once it runs (or is) the named command.
#[inline(always)]
pub fn follows_forks() -> bool {
    SCOPE.load() != scope::COMM
}

/// After an exec: whether the task stays in scope (only a command name can change).
#[inline(always)]
pub fn keeps_after_exec() -> bool {
    SCOPE.load() != scope::COMM || has_scope_comm()
}

/// Compared as two words: a byte-array comparison would call memcmp, which BPF has not.
#[inline(always)]
fn has_scope_comm() -> bool {
    let Ok(comm) = bpf_get_current_comm() else {
        return false;
    };
    words(&comm) == words(&SCOPE_COMM.load())
}

#[inline(always)]
fn words(comm: &[u8; COMM_LEN]) -> [u64; 2] {
    // SAFETY: 16 bytes read as two u64s, unaligned.
    unsafe { core::ptr::read_unaligned(comm.as_ptr() as *const [u64; 2]) }
}
