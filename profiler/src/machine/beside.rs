//! What else the machine ran while a run measured: the load of its other tasks, and other
//! tools' BPF programs on the paths measured (their cost is in every time). Said when it
//! matters, as the workloads begin, between them and as they end; kept for the results.
use super::{
    load::{MachineLoad, Snapshot},
    namespaces,
    other_probes::{self, OtherProgram},
};

/// The watch, from before the first workload to after the last.
pub struct Beside {
    load_before: Option<Snapshot>,
    /// Other tools' programs seen so far (`look` again between workloads).
    pub programs: other_probes::Watch,
}

/// What the watch saw, for the results' environment.
pub struct Seen {
    pub load: Option<MachineLoad>,
    pub programs: Vec<OtherProgram>,
}

impl Beside {
    /// Begins watching, with a note to `say` for programs the run cannot see and for those
    /// already attached.
    pub fn start(say: impl Fn(&str)) -> Beside {
        let mut programs = other_probes::Watch::default();
        if let Some(note) = namespaces::other_programs_unseen() {
            say(&format!("note: {note}"));
        }
        if let Some(note) = programs.look() {
            say(&format!("note: {note}"));
        }
        Beside {
            load_before: Snapshot::now(),
            programs,
        }
    }

    /// What the machine ran since `start`, said where it matters.
    pub fn end(mut self) -> Seen {
        let load = self
            .load_before
            .zip(Snapshot::now())
            .and_then(|(before, after)| before.until(&after));
        if let Some(load) = load.filter(|l| !l.quiet()) {
            eprintln!(
                "hookprof: note: the rest of the machine used {:.0}% of its CPU time while this \
                 run measured (the hypervisor took {:.0}%): a task that shares the run's CPU \
                 stretches its ops, so compare runs made under the same load",
                load.others_busy_percent, load.steal_percent
            );
        }
        if let Some(note) = self.programs.look() {
            eprintln!("hookprof: note: as the workloads ended, {note}");
        }
        Seen {
            load,
            programs: self.programs.seen(),
        }
    }
}
