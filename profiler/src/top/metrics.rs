//! `--listen ADDR:PORT`: what `top` has counted since it started, as OpenMetrics for Prometheus
//! to scrape: per group, path, hook and LSM a call counter, a time counter and a latency
//! histogram (the probes' log2 buckets), as ebpf_exporter serves its maps, and a gauge of the
//! probes' own cost as top calibrated it (the series are raw times). A scraper that asks
//! for OpenMetrics (Prometheus does) gets it; others (curl, `promtool check metrics`) get the
//! Prometheus text format of the same totals. Both are rendered once per interval; the
//! endpoint (`endpoint`) hands out the latest.
use std::collections::BTreeMap;

use anyhow::{anyhow, Result};
use profiler_common::HIST_BUCKETS;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet},
    metrics::{counter::ConstCounter, gauge::ConstGauge, MetricType},
    registry::{Registry, Unit},
};

use super::{interval::Row, sampled::SampledInterval};
use crate::{probes::GroupBy, results::PathKind, top::probe_cost::ProbeCost};

/// A series' labels: group, kind, path, hook (parent), LSM.
type Labels = (String, PathKind, String, Option<String>, Option<String>);

/// The totals of one series.
#[derive(Debug, Clone)]
struct Total {
    calls: u64,
    total_ns: u64,
    off_cpu_ns: u64,
    timed: u64,
    histogram: [u64; HIST_BUCKETS],
}

/// A sampled series' labels: kind, path, hook (parent), LSM (the scope's, not a group's).
type SampledLabels = (PathKind, String, Option<String>, Option<String>);

/// Sampled CPU seconds of one path: with it anywhere on the stack, and innermost.
#[derive(Debug, Clone, Copy, Default)]
struct SampledTotal {
    inclusive_s: f64,
    self_s: f64,
}

/// Everything counted since `top` started, by series.
#[derive(Debug, Clone)]
pub struct Totals {
    by: GroupBy,
    series: BTreeMap<Labels, Total>,
    cost: Option<ProbeCost>,
    sampled: BTreeMap<SampledLabels, SampledTotal>,
    /// The scope's sampled CPU seconds by mode: user, kernel (its own), the probes'.
    sampled_modes: BTreeMap<&'static str, f64>,
}

impl Totals {
    pub fn new(by: GroupBy, cost: Option<ProbeCost>) -> Totals {
        Totals {
            by,
            series: BTreeMap::new(),
            cost,
            sampled: BTreeMap::new(),
            sampled_modes: BTreeMap::new(),
        }
    }

    /// Adds an interval's sampled stacks (each sample stands for 1/hz s of CPU).
    pub fn add_sampled(&mut self, interval: &SampledInterval) {
        let per_sample_s = 1.0 / interval.hz;
        let kernel = interval.samples - interval.user_samples - interval.probe_samples;
        for (mode, n) in [
            ("user", interval.user_samples),
            ("kernel", kernel),
            ("probes", interval.probe_samples),
        ] {
            *self.sampled_modes.entry(mode).or_default() += n as f64 * per_sample_s;
        }
        for r in &interval.rows {
            let labels = (r.kind, r.path.clone(), r.parent.clone(), r.lsm.clone());
            let t = self.sampled.entry(labels).or_default();
            t.inclusive_s += r.inclusive_samples as f64 * per_sample_s;
            t.self_s += r.self_samples as f64 * per_sample_s;
        }
    }

    /// The sampled counters as (name without `_total`, help, [(labels, seconds)]).
    fn sampled_families(&self) -> Vec<(&'static str, &'static str, Vec<LabelledValue>)> {
        if self.sampled_modes.is_empty() {
            return Vec::new();
        }
        let path = |value: fn(&SampledTotal) -> f64| {
            self.sampled
                .iter()
                .map(|((kind, path, parent, lsm), t)| {
                    let mut labels = vec![("kind", kind_label(*kind)), ("path", path.clone())];
                    labels.extend(parent.clone().map(|p| ("parent", p)));
                    labels.extend(lsm.clone().map(|l| ("lsm", l)));
                    (labels, value(t))
                })
                .collect()
        };
        let modes = self
            .sampled_modes
            .iter()
            .map(|(mode, s)| (vec![("mode", mode.to_string())], *s))
            .collect();
        vec![
            (SAMPLED_CPU, SAMPLED_CPU_HELP, modes),
            (SAMPLED_PATH, SAMPLED_PATH_HELP, path(|t| t.inclusive_s)),
            (SAMPLED_SELF, SAMPLED_SELF_HELP, path(|t| t.self_s)),
        ]
    }

    /// The probes' own cost as (probe, part, ns) series.
    fn cost_series(&self) -> Vec<(&'static str, &'static str, f64)> {
        let Some(c) = &self.cost else {
            return Vec::new();
        };
        let mut series = vec![
            ("syscall", "pair", c.syscall_pair_ns),
            ("syscall", "in_span", c.syscall_in_span_ns),
        ];
        if let (Some(pair), Some(inside)) = (c.function_pair_ns, c.function_in_span_ns) {
            series.extend([("function", "pair", pair), ("function", "in_span", inside)]);
        }
        series
    }

    /// Adds an interval's rows.
    pub fn add(&mut self, rows: &[Row]) {
        for r in rows {
            let labels = (
                r.group.clone(),
                r.kind,
                r.path.clone(),
                r.parent.clone(),
                r.lsm.clone(),
            );
            let t = self.series.entry(labels).or_insert(Total {
                calls: 0,
                total_ns: 0,
                off_cpu_ns: 0,
                timed: 0,
                histogram: [0; HIST_BUCKETS],
            });
            t.calls += r.calls;
            t.total_ns += r.total_ns;
            t.off_cpu_ns += r.off_cpu_ns;
            t.timed += r.timed;
            for (h, x) in t.histogram.iter_mut().zip(r.histogram) {
                *h += x;
            }
        }
    }

    /// The totals in both formats.
    pub fn render(&self) -> Result<Exposition> {
        Ok(Exposition {
            open_metrics: self.open_metrics()?,
            text: self.text()?,
        })
    }

    /// The OpenMetrics text exposition.
    fn open_metrics(&self) -> Result<String> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.clone()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)
            .map_err(|_| anyhow!("encode the metrics"))?;
        Ok(text)
    }

    /// The Prometheus text format (0.0.4): the same series, counters named with `_total`.
    fn text(&self) -> Result<String> {
        use prometheus::proto::{Counter, Metric, MetricFamily, MetricType as Type};
        let family = |name: &str, help: &str, kind: Type, value: &dyn Fn(&Total) -> Metric| {
            let mut f = MetricFamily::default();
            f.set_name(name.into());
            f.set_help(help.into());
            f.set_field_type(kind);
            f.set_metric(
                self.series
                    .iter()
                    .map(|(labels, t)| {
                        let mut m = value(t);
                        m.set_label(label_pairs(self.labels(labels)));
                        m
                    })
                    .collect(),
            );
            f
        };
        let counter = |v: f64| {
            let mut c = Counter::default();
            c.set_value(v);
            let mut m = Metric::default();
            m.set_counter(c);
            m
        };
        let bounds = bucket_bounds();
        let families = [
            family(
                "hookprof_path_calls_total",
                CALLS_HELP,
                Type::COUNTER,
                &|t| counter(t.calls as f64),
            ),
            family(
                "hookprof_path_time_seconds_total",
                TIME_HELP,
                Type::COUNTER,
                &|t| counter(t.total_ns as f64 / 1e9),
            ),
            family(
                "hookprof_path_wait_seconds_total",
                WAIT_HELP,
                Type::COUNTER,
                &|t| counter(t.off_cpu_ns as f64 / 1e9),
            ),
            family(
                "hookprof_path_latency_seconds",
                LATENCY_HELP,
                Type::HISTOGRAM,
                &|t| latency_histogram(t, &bounds),
            ),
        ];
        let cost = self.cost_family();
        // The encoder refuses a family without series (before anything was counted).
        let sampled = self
            .sampled_families()
            .into_iter()
            .map(|(name, help, values)| {
                let mut f = MetricFamily::default();
                f.set_name(format!("{name}_seconds_total"));
                f.set_help(help.into());
                f.set_field_type(Type::COUNTER);
                f.set_metric(
                    values
                        .into_iter()
                        .map(|(labels, seconds)| {
                            let mut m = counter(seconds);
                            m.set_label(label_pairs(labels));
                            m
                        })
                        .collect(),
                );
                f
            });
        let families: Vec<MetricFamily> = families
            .into_iter()
            .chain([cost])
            .chain(sampled)
            .filter(|f| !f.get_metric().is_empty())
            .collect();
        Ok(prometheus::TextEncoder::new().encode_to_string(&families)?)
    }

    /// What each probe's part costs a call, in seconds: one gauge series per probe and part.
    fn cost_family(&self) -> prometheus::proto::MetricFamily {
        use prometheus::proto::{Gauge, Metric, MetricFamily, MetricType};
        let mut cost = MetricFamily::default();
        cost.set_name(COST_NAME.into());
        cost.set_help(COST_HELP.into());
        cost.set_field_type(MetricType::GAUGE);
        cost.set_metric(
            self.cost_series()
                .into_iter()
                .map(|(probe, part, ns)| {
                    let mut g = Gauge::default();
                    g.set_value(ns / 1e9);
                    let mut m = Metric::default();
                    m.set_gauge(g);
                    m.set_label(label_pairs(vec![
                        ("probe", probe.into()),
                        ("part", part.into()),
                    ]));
                    m
                })
                .collect(),
        );
        cost
    }

    fn labels(&self, (group, kind, path, parent, lsm): &Labels) -> Vec<(&'static str, String)> {
        let group_label = match self.by {
            GroupBy::Cgroup => "cgroup",
            GroupBy::Comm => "comm",
        };
        let mut labels = vec![
            (group_label, group.clone()),
            ("kind", kind_label(*kind)),
            ("path", path.clone()),
        ];
        if let Some(parent) = parent {
            labels.push(("parent", parent.clone()));
        }
        if let Some(lsm) = lsm {
            labels.push(("lsm", lsm.clone()));
        }
        labels
    }
}

/// Log2 bucket b holds durations with 2^(b-1) <= ns < 2^b: in whole ns, at most 2^b - 1,
/// given in seconds; the last bucket takes everything longer (+Inf).
/// Labels as the prometheus crate's text encoder takes them.
fn label_pairs(labels: Vec<(&str, String)>) -> Vec<prometheus::proto::LabelPair> {
    labels
        .into_iter()
        .map(|(k, v)| {
            let mut pair = prometheus::proto::LabelPair::default();
            pair.set_name(k.into());
            pair.set_value(v);
            pair
        })
        .collect()
}

/// A path kind as its label value (as the JSON lines spell it).
fn kind_label(kind: PathKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// One series of a family: its labels and its value.
type LabelledValue = (Vec<(&'static str, String)>, f64);

/// One path's latency histogram in seconds, its buckets cumulative at `bounds`.
fn latency_histogram(t: &Total, bounds: &[f64]) -> prometheus::proto::Metric {
    use prometheus::proto::{Bucket, Histogram, Metric};
    let mut h = Histogram::default();
    h.set_sample_count(t.timed);
    h.set_sample_sum(t.total_ns as f64 / 1e9);
    // The encoder adds +Inf (the sample count) itself.
    let mut cumulative = 0;
    h.set_bucket(
        bounds[..HIST_BUCKETS - 1]
            .iter()
            .zip(t.histogram)
            .map(|(&bound, n)| {
                cumulative += n;
                let mut b = Bucket::default();
                b.set_upper_bound(bound);
                b.set_cumulative_count(cumulative);
                b
            })
            .collect(),
    );
    let mut m = Metric::default();
    m.set_histogram(h);
    m
}

fn bucket_bounds() -> [f64; HIST_BUCKETS] {
    let mut bounds = [f64::MAX; HIST_BUCKETS];
    for (b, bound) in bounds.iter_mut().enumerate().take(HIST_BUCKETS - 1) {
        *bound = ((1u64 << b) - 1) as f64 / 1e9;
    }
    bounds
}

const CALLS_HELP: &str = "Calls into the path by the group's tasks";
const TIME_HELP: &str = "Time in the path, entry to exit (a syscall's includes its wait, \
     hookprof_path_wait_seconds_total)";
const WAIT_HELP: &str =
    "The part of the time in the path its tasks spent switched out, blocked or \
     waiting for a CPU (syscalls; sched_switch)";
const LATENCY_HELP: &str = "Latency of the path's timed calls";
const SAMPLED_CPU: &str = "hookprof_sampled_cpu";
const SAMPLED_CPU_HELP: &str = "CPU time of the scope's tasks as sampled on the cpu-clock \
     (samples x period), by mode: user, kernel, and hookprof's own probes";
const SAMPLED_PATH: &str = "hookprof_sampled_path_cpu";
const SAMPLED_PATH_HELP: &str = "Sampled CPU time of the scope's tasks with the path on the \
     kernel stack (inclusive; the probes' own samples left out)";
const SAMPLED_SELF: &str = "hookprof_sampled_path_self_cpu";
const SAMPLED_SELF_HELP: &str = "Sampled CPU time of the scope's tasks with the path the \
     innermost frame of the kernel stack";
const COST_NAME: &str = "hookprof_probe_cost_seconds";
const COST_HELP: &str = "What top's probes add to each call they time (part=pair) and the part of \
     it inside the call's timed span (part=in_span), calibrated when top started";

impl Collector for Totals {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (calls, seconds, latency) = (CALLS_HELP, TIME_HELP, LATENCY_HELP);
        {
            let mut family = encoder.encode_descriptor(
                "hookprof_path_calls",
                calls,
                None,
                MetricType::Counter,
            )?;
            for (labels, t) in &self.series {
                let l = self.labels(labels);
                ConstCounter::new(t.calls).encode(family.encode_family(&l)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "hookprof_path_time",
                seconds,
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?;
            for (labels, t) in &self.series {
                let l = self.labels(labels);
                ConstCounter::new(t.total_ns as f64 / 1e9).encode(family.encode_family(&l)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "hookprof_path_wait",
                WAIT_HELP,
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?;
            for (labels, t) in &self.series {
                let l = self.labels(labels);
                ConstCounter::new(t.off_cpu_ns as f64 / 1e9).encode(family.encode_family(&l)?)?;
            }
        }
        let cost = self.cost_series();
        if !cost.is_empty() {
            let mut family = encoder.encode_descriptor(
                "hookprof_probe_cost",
                COST_HELP,
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?;
            for (probe, part, ns) in cost {
                let l = vec![("probe", probe), ("part", part)];
                ConstGauge::new(ns / 1e9).encode(family.encode_family(&l)?)?;
            }
        }
        for (name, help, values) in self.sampled_families() {
            let mut family =
                encoder.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Counter)?;
            for (labels, seconds) in values {
                let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                ConstCounter::new(seconds).encode(family.encode_family(&l)?)?;
            }
        }
        let bounds = bucket_bounds();
        let mut family = encoder.encode_descriptor(
            "hookprof_path_latency",
            latency,
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (labels, t) in &self.series {
            let l = self.labels(labels);
            let buckets: Vec<(f64, u64)> = bounds.iter().copied().zip(t.histogram).collect();
            family.encode_family(&l)?.encode_histogram::<NoLabelSet>(
                t.total_ns as f64 / 1e9,
                t.timed,
                &buckets,
                None,
            )?;
        }
        Ok(())
    }
}

/// The totals as each format renders them.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    pub open_metrics: String,
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, calls: u64, total_ns: u64) -> Row {
        let mut histogram = [0; HIST_BUCKETS];
        histogram[3] = calls;
        Row {
            group: "/a.slice".into(),
            kind: PathKind::Syscall,
            path: path.into(),
            parent: None,
            lsm: None,
            calls,
            calls_per_s: 0.0,
            timed: calls,
            total_ns,
            off_cpu_ns: total_ns / 2,
            nested: 0,
            ns_per_call: 0.0,
            cpu_share: 0.0,
            corrected_ns_per_call: 0.0,
            corrected_cpu_share: 0.0,
            on_cpu_ns_per_call: 0.0,
            on_cpu_share: 0.0,
            wait_ns_per_call: 0.0,
            histogram,
        }
    }

    #[test]
    fn counters_accumulate_over_intervals_and_histograms_are_cumulative() {
        let cost = ProbeCost {
            bare_ns: 190.0,
            syscall_pair_ns: 117.0,
            syscall_in_span_ns: 45.0,
            function_pair_ns: None,
            function_in_span_ns: None,
        };
        let mut totals = Totals::new(GroupBy::Cgroup, Some(cost));
        totals.add(&[row("getppid", 10, 1_000)]);
        totals.add(&[row("getppid", 5, 500)]);
        let rendered = totals.render().unwrap();
        let text = rendered.open_metrics.clone();
        let series = r#"{cgroup="/a.slice",kind="syscall",path="getppid"}"#;
        assert!(
            text.contains(&format!("hookprof_path_calls_total{series} 15")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "hookprof_path_time_seconds_total{series} 0.0000015"
            )),
            "{text}"
        );
        // Half of each call switched out (the rows' off_cpu_ns), in both formats.
        for format in [&rendered.open_metrics, &rendered.text] {
            let wait: f64 = format
                .lines()
                .find_map(|l| l.strip_prefix(&format!("hookprof_path_wait_seconds_total{series} ")))
                .unwrap_or_else(|| panic!("no wait series in {format}"))
                .parse()
                .unwrap();
            assert!((wait - 7.5e-7).abs() < 1e-15, "{format}");
        }
        // Bucket 3 holds 4..7 ns: le 7 ns has them all, le 3 ns none.
        // (The two formats write the bounds differently: compared as numbers.)
        let bucket = |text: &str, le: f64| -> u64 {
            let line = text
                .lines()
                .filter(|l| l.starts_with("hookprof_path_latency_seconds_bucket{"))
                .find(|l| {
                    let bound = l.split("le=\"").nth(1).and_then(|v| v.split('"').next());
                    bound.and_then(|b| b.replace("+Inf", "inf").parse::<f64>().ok()) == Some(le)
                })
                .unwrap_or_else(|| panic!("no bucket le={le} in {text}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        for format in [&rendered.open_metrics, &rendered.text] {
            assert_eq!(bucket(format, 7e-9), 15);
            assert_eq!(bucket(format, 3e-9), 0);
            assert_eq!(bucket(format, f64::INFINITY), 15);
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        // The older text format: the same series, HELP and TYPE named as the samples are.
        let old = rendered.text.clone();
        assert!(
            old.contains("# TYPE hookprof_path_calls_total counter"),
            "{old}"
        );
        assert!(
            old.contains(&format!("hookprof_path_calls_total{series} 15")),
            "{old}"
        );
        assert!(
            old.contains(r#"path="getppid",le="0.000000007"} 15"#),
            "{old}"
        );
        assert!(old.contains(r#"path="getppid",le="+Inf"} 15"#), "{old}");
        // The probes' cost as a gauge in both, the function pair's absent where not measured.
        for format in [&text, &old] {
            let in_span: f64 = format
                .lines()
                .find(|l| {
                    l.starts_with("hookprof_probe_cost_seconds{")
                        && l.contains(r#"probe="syscall""#)
                        && l.contains(r#"part="in_span""#)
                })
                .and_then(|l| l.rsplit(' ').next()?.parse().ok())
                .unwrap_or_else(|| panic!("no in_span gauge in {format}"));
            assert!((in_span - 45e-9).abs() < 1e-15, "{in_span}");
            assert!(
                format.contains("# TYPE hookprof_probe_cost_seconds gauge"),
                "{format}"
            );
            assert!(!format.contains(r#"probe="function""#), "{format}");
        }
    }

    #[test]
    fn sampled_seconds_accumulate_by_path_and_mode_in_both_formats() {
        use crate::top::sampled::{SampledInterval, SampledRow};
        let interval = |hook: u64| SampledInterval {
            hz: 1000.0,
            samples: 100,
            user_samples: 40,
            probe_samples: 10,
            lost_stacks: 0,
            cpu_share: 0.1,
            rows: vec![SampledRow {
                kind: PathKind::Lsm,
                path: "hook_file_open".into(),
                parent: Some("security_file_open".into()),
                lsm: Some("landlock".into()),
                inclusive_samples: hook,
                self_samples: hook / 2,
                share: 0.0,
                share_low: 0.0,
                share_high: 0.0,
                self_share: 0.0,
                cpu_share: 0.0,
            }],
        };
        let mut totals = Totals::new(GroupBy::Cgroup, None);
        totals.add_sampled(&interval(20));
        totals.add_sampled(&interval(10));
        let rendered = totals.render().unwrap();
        let series =
            r#"{kind="lsm",path="hook_file_open",parent="security_file_open",lsm="landlock"}"#;
        let value = |text: &str, name: &str| -> f64 {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.rsplit(' ').next()?.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {text}"))
        };
        for text in [&rendered.open_metrics, &rendered.text] {
            // 30 samples of 1 ms, 15 of them innermost; the scope's kernel mode 2 x 50.
            let inclusive = format!("hookprof_sampled_path_cpu_seconds_total{series}");
            let own = format!("hookprof_sampled_path_self_cpu_seconds_total{series}");
            let kernel = r#"hookprof_sampled_cpu_seconds_total{mode="kernel"}"#;
            assert!((value(text, &inclusive) - 0.030).abs() < 1e-12, "{text}");
            assert!((value(text, &own) - 0.015).abs() < 1e-12, "{text}");
            assert!((value(text, kernel) - 0.100).abs() < 1e-12, "{text}");
        }
    }

    #[test]
    fn nothing_counted_yet_renders_in_both_formats() {
        let rendered = Totals::new(GroupBy::Comm, None).render().unwrap();
        assert!(rendered.open_metrics.ends_with("# EOF\n"));
        assert_eq!(rendered.text, "");
    }

    #[test]
    fn the_bounds_rise_and_end_in_infinity() {
        let b = bucket_bounds();
        assert_eq!(b[0], 0.0);
        assert_eq!(b[1], 1e-9);
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(b[HIST_BUCKETS - 1], f64::MAX);
    }
}
