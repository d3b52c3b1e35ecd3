//! The commands that are an entry and little else: `ab` (two kernels booted in turn),
//! `calibrate` (what the probes cost here) and `hooks` (what can be probed on this kernel). The
//! commands with a room of their own (`run`, `compare`, `report`, `history`, `import`, `top`,
//! `runs`) keep their entry there.
pub mod ab;
pub mod calibrate;
pub mod hooks;
