//! The pprof profile read back as a reader would: gunzipped, decoded by prost, every sample's
//! stack, values and labels looked up in its tables.
use std::io::Read;

use prost::Message;

use super::{proto::Profile, render, LOST_STACK};
use crate::{
    report::folded::tests::profile,
    results::{fixtures::sample_results, PathKind, Results, SampledPath, StackPasses},
};

fn path(kind: PathKind, name: &str) -> SampledPath {
    crate::attribution::span_correction::tests::path(kind, name, None, 0, 0)
}

/// Two profiled workloads: open_close with its paths, and build with two stacks of its own.
fn results() -> Results {
    let mut r = sample_results();
    let mut open_close = profile(1);
    open_close.paths = vec![
        path(PathKind::Syscall, "openat"),
        path(PathKind::Syscall, "close"),
        path(PathKind::Hook, "security_file_open"),
        path(PathKind::Lsm, "apparmor_file_open"),
    ];
    open_close.folded.push((LOST_STACK.into(), 2));
    r.workloads[0].profile = Some(open_close);
    let mut build = profile(3);
    build.folded.truncate(2);
    build.stack_passes = Some(StackPasses {
        period_ns: 200_000,
        samples: 100,
        unprobed: true,
        programs: Vec::new(),
        sampling_cost: None,
        sampling_cost_half_width: None,
    });
    r.workloads[1].profile = Some(build);
    r
}

fn decode(bytes: &[u8]) -> Profile {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut raw)
        .expect("a gzip stream");
    Profile::decode(raw.as_slice()).expect("a profile.proto message")
}

/// A sample's label `key`, by name.
fn label<'a>(p: &'a Profile, s: &super::proto::Sample, key: &str) -> Option<&'a str> {
    let name = |i: i64| p.string_table[i as usize].as_str();
    s.label
        .iter()
        .find(|l| name(l.key) == key)
        .map(|l| name(l.str))
}

/// A sample's frames, root first, by their functions' names.
fn stack(p: &Profile, s: &super::proto::Sample) -> String {
    let frames: Vec<&str> = s
        .location_id
        .iter()
        .rev()
        .map(|&id| {
            let location = &p.location[id as usize - 1];
            assert_eq!(location.id, id);
            let function = &p.function[location.line[0].function_id as usize - 1];
            p.string_table[function.name as usize].as_str()
        })
        .collect();
    frames.join(";")
}

#[test]
fn the_decoded_profile_holds_every_folded_stack_with_its_count_and_cpu_time() {
    let r = results();
    let p = decode(&render(std::slice::from_ref(&r)).unwrap());
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| {
            let s = |i: i64| p.string_table[i as usize].as_str();
            (s(t.r#type), s(t.unit))
        })
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert_eq!(p.period_type, Some(p.sample_type[1]));
    assert_eq!(p.string_table[0], "");
    for w in &r.workloads {
        let folded = &w.profile.as_ref().unwrap().folded;
        let ours: Vec<_> = p
            .sample
            .iter()
            .filter(|s| label(&p, s, "workload") == Some(&w.name))
            .collect();
        // Every folded line is one sample, with the same stack and count, in the same order.
        assert_eq!(ours.len(), folded.len(), "{}", w.name);
        for (s, (line, count)) in ours.iter().zip(folded) {
            assert_eq!(stack(&p, s), *line);
            assert_eq!(s.value[0], *count as i64);
        }
        let total: i64 = ours.iter().map(|s| s.value[0]).sum();
        assert_eq!(total, folded.iter().map(|(_, n)| *n as i64).sum::<i64>());
        assert!(ours.iter().all(|s| label(&p, s, "run") == Some("base")));
    }
    // open_close's samples stand for its 1 ms period each; build's mix 100 at 200 us and 200 at
    // 1 ms: 0.7333 ms a sample, 110 ms for its 150 folded.
    let cpu = |workload: &str| -> (i64, i64) {
        p.sample
            .iter()
            .filter(|s| label(&p, s, "workload") == Some(workload))
            .fold((0, 0), |(n, ns), s| (n + s.value[0], ns + s.value[1]))
    };
    assert_eq!(cpu("open_close"), (87, 87_000_000));
    let (n, ns) = cpu("build");
    assert_eq!(n, 150);
    assert!((ns - 110_000_000).abs() <= 2, "{ns}");
    assert_eq!(p.comment.len(), 2);
    assert!(p.string_table[p.comment[0] as usize].starts_with("base open_close: 100 samples"));
}

#[test]
fn each_stack_is_labelled_by_the_kind_and_name_of_its_innermost_path() {
    let r = results();
    let p = decode(&render(std::slice::from_ref(&r)).unwrap());
    let open_close: Vec<(String, Option<&str>, Option<&str>)> = p
        .sample
        .iter()
        .filter(|s| label(&p, s, "workload") == Some("open_close"))
        .map(|s| {
            let leaf = stack(&p, s).rsplit(';').next().unwrap().to_string();
            (leaf, label(&p, s, "kind"), label(&p, s, "path"))
        })
        .collect();
    let expect = |leaf: &str, kind: &str, path: Option<&str>| {
        assert!(
            open_close.contains(&(leaf.to_string(), Some(kind), path)),
            "{leaf}: {open_close:?}"
        );
    };
    expect("apparmor_file_open", "lsm", Some("apparmor_file_open"));
    // Landlock's function is not among the paths: the hook above it is the innermost.
    expect("hook_file_open", "hook", Some("security_file_open"));
    expect("security_file_open", "hook", Some("security_file_open"));
    expect("[user]", "user", None);
    expect("bpf_prog_0123456789abcdef_sys_enter", "probe", None);
    // close is known by its own function, security_file_free by nothing.
    expect("cap_file_free", "syscall", Some("close"));
    expect("[other stacks]", "other", None);
    expect("[lost stack]", "lost", None);
    // The kernel's and the probes' functions name the object they live in.
    let file = |name: &str| {
        let f = p
            .function
            .iter()
            .find(|f| p.string_table[f.name as usize] == name)
            .unwrap();
        p.string_table[f.filename as usize].as_str()
    };
    assert_eq!(file("security_file_open"), "[kernel.kallsyms]");
    assert_eq!(
        file("bpf_prog_0123456789abcdef_sys_enter"),
        "[hookprof probes]"
    );
    assert_eq!(file("[user]"), "");
    // One function per distinct frame, however many stacks hold it.
    let names: std::collections::HashSet<i64> = p.function.iter().map(|f| f.name).collect();
    assert_eq!(names.len(), p.function.len());
}

#[test]
fn a_file_without_stacks_is_refused_as_for_the_folded_stacks() {
    let e = render(&[sample_results()]).unwrap_err().to_string();
    assert!(e.contains("hold no sampled kernel stacks"), "{e}");
}

#[test]
fn several_files_are_told_apart_by_their_run_label_and_the_earliest_start_is_the_time() {
    let mut a = results();
    a.environment.started_at = 2_000;
    let mut b = results();
    b.label = "new".into();
    b.environment.started_at = 1_000;
    let p = decode(&render(&[a, b]).unwrap());
    let runs: std::collections::BTreeSet<_> = p
        .sample
        .iter()
        .filter_map(|s| label(&p, s, "run"))
        .collect();
    assert_eq!(runs.into_iter().collect::<Vec<_>>(), ["base", "new"]);
    assert_eq!(p.time_nanos, 1_000_000_000_000);
}
