//! The task tracepoints: sched_process_fork, exec and exit (tp_btf, with raw_tracepoint where
//! the kernel refuses it) follow a tracked task's children and see its exit;
//! sched_process_free drops a freed task's state where it is kept by thread id; sched_switch
//! times a tracked task on and off a CPU.
use anyhow::Result;
use aya::programs::{BtfTracePoint, ProgramError};

use super::{Features, Kind, OwnedLink, ProbePlan, Probes};
use crate::results::Refusal;

/// Deletes a freed task's entry where per-task state is kept by thread id.
pub(super) const FREE_PROGRAM: &str = "free_raw";

/// The tracepoints through which a tracked task's children are tracked and its exit seen.
pub(super) const TASK_TRACEPOINTS: [&str; 4] = [
    "sched_process_fork",
    "sched_process_exec",
    "sched_process_exit",
    "sched_process_free",
];

impl Probes {
    /// Loads the task tracepoints `plan` asks for, and the free tracepoint where the kernel
    /// has no task storage.
    pub(super) fn load_task_tracepoints(&mut self, plan: &ProbePlan) -> Result<()> {
        if !Features::get()?.task_storage {
            // Per-task state by thread id: a freed task's entry goes with it.
            self.load_raw(FREE_PROGRAM, "sched_process_free");
        }
        if plan.tasks {
            for (name, tp) in [
                ("fork", "sched_process_fork"),
                ("exec", "sched_process_exec"),
                ("exit", "sched_process_exit"),
            ] {
                // tp_btf is cheaper; raw_tracepoint works on kernels that refuse it (except
                // for fork, which needs the child as a BTF pointer).
                if !self.load_tp_btf(&format!("{name}_btf"), tp) && name != "fork" {
                    self.load_raw(&format!("{name}_raw"), tp);
                }
            }
        }
        if plan.switches {
            if self.layout.switch_prev_state || self.layout.state_offset.is_some() {
                self.load_tp_btf("sched_switch", "sched_switch");
            } else {
                self.refused.push(Refusal {
                    kind: Kind::TpBtf,
                    target: "sched_switch".into(),
                    errno: None,
                    reason: "its tracepoint has no prev_state argument (Linux 5.18) and the \
                         kernel's BTF no task_struct state field to read instead"
                        .into(),
                });
            }
        }
        Ok(())
    }

    pub(super) fn load_tp_btf(&mut self, program: &str, tracepoint: &str) -> bool {
        let result = (|| -> Result<(), ProgramError> {
            let aya = self.kernel_btf_to_load()?;
            let p: &mut BtfTracePoint = self
                .ebpf
                .program_mut(program)
                .ok_or(ProgramError::NotLoaded)?
                .try_into()?;
            p.load(tracepoint, aya.btf())
        })();
        self.record(program, Kind::TpBtf, tracepoint, result)
    }

    /// True if sched_switch is loaded: each tracked task's time on and off a CPU is known.
    pub fn waits_measured(&self) -> bool {
        self.attachments
            .iter()
            .any(|a| a.kind == Kind::TpBtf && a.target == "sched_switch")
    }
}

/// Attaches a tp_btf program on the tracepoint it was loaded for.
pub(super) fn attach_tp_btf(
    program: &mut aya::programs::Program,
) -> Result<OwnedLink, ProgramError> {
    let p: &mut BtfTracePoint = program.try_into()?;
    let id = p.attach()?;
    Ok(OwnedLink::Fd(p.take_link(id)?.into()))
}
