//! Where each operation's time goes, by two methods and one accounting. `timing`: exact
//! enter-to-exit times of syscalls and timed kernel functions (counter deltas into rows).
//! `stacks`: sampled kernel stacks, each hook's, LSM function's, syscall's and task path's
//! share of the op's CPU time; it works where trampolines are refused. `accounting`: the
//! op's time whole, on a CPU (user, kernel, the probes' own) and off it. Rows of both methods
//! are keyed by the same path names, so they cross-check where both ran. `span_correction`:
//! the probes' cost taken out of exact timing by the samples inside each span, where they are
//! enough. `measured`: a workload's samples as they are taken, finished into its result
//! (attribution, accounting, profile, notes). `breakdown`: the one reading of the rows every
//! view prints (shares of one whole, exclusive parts that add up to it, the residual).
mod accounting;
pub mod breakdown;
mod measured;
pub(crate) mod span_correction;
mod stacks;
mod timing;

pub use accounting::account;
pub use breakdown::{Breakdown, Level, Part, PathShare};
pub use measured::{Measured, Taken};
pub use span_correction::{correct_by_samples, MIN_SPANNED_SAMPLES};
pub use stacks::{is_probe_frame, is_probe_stack, profile, syscall_of_frame, SampledStacks};
pub use timing::{attribute, function_kind, syscall_name, Attribution, ProbedSample};
