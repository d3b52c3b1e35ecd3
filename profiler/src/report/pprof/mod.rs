//! `report --format pprof`: every profiled workload's sampled kernel stacks as one gzipped
//! pprof profile (profile.proto), which `go tool pprof`, Grafana Pyroscope, Parca and
//! speedscope read. A folded stack is a sample; its values are the sample count and the CPU
//! time those samples stand for (each sample one period of the cpu-clock it was taken at);
//! labels say the run, the workload, and the kind and name of the innermost path the stack
//! fell in. Every frame (the kernel's functions, hookprof's probe programs, `[user]`) is a
//! function of its own, symbolised already.
use std::{collections::HashMap, io::Write};

use anyhow::Result;
use flate2::{write::GzEncoder, Compression};
use prost::Message;

use crate::{
    attribution::{is_probe_frame, is_probe_stack, syscall_of_frame},
    results::{PathKind, Results, StackProfile, OTHER_STACKS, USER_FRAME},
};

pub mod proto;

use proto::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};

/// What a kernel stack lost by the kernel is folded as.
const LOST_STACK: &str = "[lost stack]";
/// The object a frame's function lives in, as perf names the kernel's.
const KERNEL_FILE: &str = "[kernel.kallsyms]";
const PROBE_FILE: &str = "[hookprof probes]";

/// The gzipped profile of every profiled workload in `results`; the same refusals as the
/// folded stacks' (a file without stacks, hidden kernel addresses, two files of one label).
pub fn render(results: &[Results]) -> Result<Vec<u8>> {
    super::folded::check(results)?;
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&profile(results).encode_to_vec())?;
    Ok(gz.finish()?)
}

/// The profile of every profiled workload in `results`, not yet encoded.
pub fn profile(results: &[Results]) -> Profile {
    let mut b = Builder::new();
    for r in results {
        let run = crate::export::run_label(r);
        for w in &r.workloads {
            if let Some(p) = w.profile.as_ref().filter(|p| !p.folded.is_empty()) {
                b.add_workload(&run, &w.name, p);
            }
        }
        b.set_time(r.environment.started_at);
    }
    b.profile
}

/// The CPU ns one sample of `p` stands for: a sample is taken per period of the workload's CPU
/// time, at the timed passes' rate or the stack passes' own; their samples are folded together,
/// so a sample stands for the mean period over both.
pub fn ns_per_sample(p: &StackProfile) -> f64 {
    let (stack, stack_period) = p
        .stack_passes
        .as_ref()
        .map_or((0, 0), |s| (s.samples.min(p.samples), s.period_ns));
    let timed = p.samples - stack;
    let ns = stack as f64 * stack_period as f64 + timed as f64 * p.period_ns as f64;
    match p.samples {
        0 => p.period_ns as f64,
        n => ns / n as f64,
    }
}

/// The profile being built, with the indices of what its tables already hold.
struct Builder {
    profile: Profile,
    strings: HashMap<String, i64>,
    /// A frame's location id (its function's id is the same).
    frames: HashMap<String, u64>,
    /// Weighted by samples, the mean period over every workload.
    sampled_ns: f64,
    samples: u64,
}

impl Builder {
    fn new() -> Builder {
        let mut b = Builder {
            profile: Profile::default(),
            strings: HashMap::new(),
            frames: HashMap::new(),
            sampled_ns: 0.0,
            samples: 0,
        };
        b.string("");
        let samples = b.value_type("samples", "count");
        let cpu = b.value_type("cpu", "nanoseconds");
        b.profile.sample_type = vec![samples, cpu];
        b.profile.period_type = Some(cpu);
        b.profile.default_sample_type = cpu.r#type;
        let filename = b.string(KERNEL_FILE);
        b.profile.mapping.push(Mapping {
            id: 1,
            filename,
            has_functions: true,
        });
        b
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> ValueType {
        ValueType {
            r#type: self.string(kind),
            unit: self.string(unit),
        }
    }

    fn label(&mut self, key: &str, value: &str) -> Label {
        Label {
            key: self.string(key),
            str: self.string(value),
        }
    }

    /// The location of `frame`, added with its function the first time.
    fn location(&mut self, frame: &str) -> u64 {
        if let Some(&id) = self.frames.get(frame) {
            return id;
        }
        let id = self.profile.location.len() as u64 + 1;
        let name = self.string(frame);
        let file = match frame {
            _ if frame.starts_with('[') => "",
            _ if is_probe_frame(frame) => PROBE_FILE,
            _ => KERNEL_FILE,
        };
        let filename = self.string(file);
        self.profile.function.push(Function {
            id,
            name,
            system_name: name,
            filename,
        });
        self.profile.location.push(Location {
            id,
            mapping_id: 1,
            line: vec![Line { function_id: id }],
        });
        self.frames.insert(frame.to_string(), id);
        id
    }

    fn add_workload(&mut self, run: &str, workload: &str, p: &StackProfile) {
        let paths = PathIndex::of(p);
        let per_sample = ns_per_sample(p);
        for (stack, count) in &p.folded {
            let frames: Vec<&str> = stack.split(';').collect();
            let location_id = frames.iter().rev().map(|f| self.location(f)).collect();
            let (kind, path) = paths.classify(&frames);
            let mut label = vec![
                self.label("run", run),
                self.label("workload", workload),
                self.label("kind", kind),
            ];
            if let Some(path) = path {
                label.push(self.label("path", path));
            }
            self.profile.sample.push(Sample {
                location_id,
                value: vec![*count as i64, (*count as f64 * per_sample).round() as i64],
                label,
            });
        }
        self.samples += p.samples;
        self.sampled_ns += p.samples as f64 * per_sample;
        self.profile.period = (self.sampled_ns / self.samples.max(1) as f64).round() as i64;
        let note = format!(
            "{run} {workload}: {} samples ({} in hookprof's probes), {:.0} CPU ns per op, {}",
            p.samples,
            p.probe_samples,
            p.on_cpu_ns_per_op,
            p.rates()
        );
        let note = self.string(&note);
        self.profile.comment.push(note);
    }

    /// The earliest start of the runs, as the profile's time.
    fn set_time(&mut self, started_at: u64) {
        let ns = i64::try_from(started_at)
            .unwrap_or(0)
            .saturating_mul(1_000_000_000);
        if ns > 0 && (self.profile.time_nanos == 0 || ns < self.profile.time_nanos) {
            self.profile.time_nanos = ns;
        }
    }
}

/// The paths a profile found, by the frame that is each one's function.
struct PathIndex<'a> {
    by_frame: HashMap<&'a str, (PathKind, &'a str)>,
}

impl<'a> PathIndex<'a> {
    fn of(p: &'a StackProfile) -> PathIndex<'a> {
        let by_frame = p
            .paths
            .iter()
            .filter(|path| path.kind != PathKind::Syscall)
            .map(|path| (path.name.as_str(), (path.kind, path.name.as_str())))
            .collect();
        PathIndex { by_frame }
    }

    /// A stack's kind (a path's kind, or what the sample was doing where it fell in no path:
    /// user, probe, kernel, lost, other) and the innermost path on it. A syscall is found by
    /// its own function (`__x64_sys_openat`), the others by name.
    fn classify(&self, frames: &[&'a str]) -> (&'static str, Option<&'a str>) {
        match frames {
            [USER_FRAME] => return ("user", None),
            [OTHER_STACKS] => return ("other", None),
            [LOST_STACK] => return ("lost", None),
            _ => {}
        }
        let innermost = frames.iter().rev().find_map(|f| {
            self.by_frame
                .get(f)
                .copied()
                .or_else(|| syscall_of_frame(f).map(|s| (PathKind::Syscall, s)))
        });
        let kind = match innermost {
            _ if is_probe_stack(frames) => "probe",
            Some((kind, _)) => kind.name(),
            None => "kernel",
        };
        (kind, innermost.map(|(_, name)| name))
    }
}

#[cfg(test)]
mod tests;
