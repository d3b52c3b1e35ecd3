//! The machine around a run, as hookprof sees it: its clocks, how busy the rest of it was, the
//! pid namespace hookprof runs in, the other BPF programs attached where hookprof measures and
//! what the kernel's statistics say they cost.
pub mod beside;
pub mod bpf_stats;
pub mod clock;
pub mod load;
pub mod namespaces;
pub mod other_probes;
