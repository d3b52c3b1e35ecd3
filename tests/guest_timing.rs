//! Per-task timing state under the conditions that broke per-CPU slots: two tracked threads,
//! unpinned, forking and waiting on both vCPUs, their children exiting wherever they run, and
//! probes detached and attached again between samples (as a run does). Each exit is matched
//! with its own task's entry, so no timed call can last longer than the sample it ran in.
use std::time::Instant;

use hookprof::{
    probes::{KernelBtf, ProbePlan, Probes, Target},
    workloads::tracking_window::gate,
};
use hookprof_tests::{require_guest, require_root};
use profiler_common::event;

/// Paths that sleep (waiting for a child, exiting) or run on both sides of a fork. Not do_exit:
/// it never returns, hookprof never times it, and newer kernels refuse an fexit on it.
const TASK_PATHS: &[&str] = &[
    "copy_process",
    "kernel_wait4",
    "exit_mm",
    "security_task_alloc",
    "wake_up_new_task",
];
const THREADS: usize = 2;
const FORKS_PER_THREAD: usize = 40;
const SAMPLES: usize = 3;

/// One thread's work: fork children that exit at once and wait for each; the CPUs it ran on.
fn fork_and_wait() -> Vec<i32> {
    let mut cpus = Vec::new();
    gate(true);
    for _ in 0..FORKS_PER_THREAD {
        // SAFETY: the child only calls _exit; the parent waits for it.
        match unsafe { libc::fork() } {
            0 => unsafe { libc::_exit(0) },
            -1 => panic!("fork: {}", std::io::Error::last_os_error()),
            child => {
                let mut status = 0;
                // SAFETY: waiting for our own child with a valid status pointer.
                assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
            }
        }
        // SAFETY: no preconditions.
        cpus.push(unsafe { libc::sched_getcpu() });
    }
    gate(false);
    cpus
}

/// Lower bound, in ns, of the longest duration in a log2 histogram (0 if empty).
fn longest_at_least(hist: &[u64]) -> u64 {
    match hist.iter().rposition(|&n| n > 0) {
        Some(0) | None => 0,
        Some(b) => 1 << (b - 1),
    }
}

#[test]
fn unpinned_threads_forking_on_both_cpus_get_no_stale_timings() {
    require_guest();
    require_root();
    let kernel = KernelBtf::load().expect("kernel BTF");
    let functions: Vec<Target> = TASK_PATHS
        .iter()
        .filter(|f| kernel.has_function(f))
        .map(|f| Target::top(f))
        .collect();
    assert!(
        functions.iter().any(|t| t.function == "copy_process"),
        "copy_process is not traceable on this kernel"
    );
    let plan = ProbePlan {
        syscalls: true,
        tasks: true,
        functions,
        entries_only: false,
        ..ProbePlan::default()
    };
    let mut probes = Probes::load(&plan, &kernel).expect("load hookprof's object");
    let timed: Vec<(usize, String)> = probes
        .hook_functions()
        .iter()
        .enumerate()
        .map(|(slot, t)| {
            let t = t.as_ref().expect("every task path's pair loads");
            (slot, t.function.clone())
        })
        .collect();
    probes
        .set_gate_owners(&[std::process::id()])
        .expect("make this process the gate owner");

    let mut cpus_seen = std::collections::BTreeSet::new();
    for sample in 0..SAMPLES {
        probes.attach().expect("attach");
        assert!(probes.scoping_works(), "syscall programs not attached");
        let before = probes.snapshot().expect("snapshot");
        let start = Instant::now();
        let cpus: Vec<Vec<i32>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..THREADS).map(|_| s.spawn(fork_and_wait)).collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let sample_ns = start.elapsed().as_nanos() as u64;
        probes.detach();
        cpus_seen.extend(cpus.into_iter().flatten());
        let delta = probes.snapshot().expect("snapshot").since(&before);

        let forks = (THREADS * FORKS_PER_THREAD) as u64;
        assert_eq!(delta.events[event::FORK as usize], forks, "sample {sample}");
        for (slot, function) in &timed {
            let t = &delta.hooks[*slot];
            eprintln!(
                "sample {sample}: {function}: {} calls, {} timed, mean {} ns, longest >= {} ns \
                 (sample {sample_ns} ns)",
                t.calls,
                t.timed,
                t.total_ns.checked_div(t.timed).unwrap_or(0),
                longest_at_least(&t.hist)
            );
            assert!(
                longest_at_least(&t.hist) <= sample_ns,
                "{function} has a call longer than its sample ({sample_ns} ns): {t:?}"
            );
        }
        // Only the two parents fork, one copy_process at a time each.
        let copy = &delta.hooks[timed[0].0];
        assert_eq!(timed[0].1, "copy_process");
        assert_eq!(copy.calls, forks, "copy_process calls");
        assert!(copy.timed > 0, "no copy_process call was timed: {copy:?}");
        assert!(
            copy.total_ns <= THREADS as u64 * sample_ns,
            "copy_process took {} ns in all, more than {THREADS} threads x {sample_ns} ns",
            copy.total_ns
        );
        eprintln!(
            "sample {sample}: unmatched exits {}, full stacks {}, untimed calls {}, untracked \
             children {}",
            delta.events[event::UNMATCHED_EXIT as usize],
            delta.events[event::STACK_FULL as usize],
            timed
                .iter()
                .map(|(slot, _)| delta.hooks[*slot].calls - delta.hooks[*slot].timed)
                .sum::<u64>(),
            delta.events[event::TRACK_FULL as usize]
        );
    }
    eprintln!("CPUs the workload threads ran on: {cpus_seen:?}");
    assert!(
        cpus_seen.len() >= 2,
        "the threads never ran on two CPUs: {cpus_seen:?}"
    );
}
