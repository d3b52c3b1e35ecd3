//! The path verdicts: every syscall, hook, LSM function, task path and suite group of every
//! workload gets a verdict on its cost per op, from the test its row already carries (the
//! timed rows' `explain::delta_test`, the sampled shares' `sampled`, both at the comparison's
//! unit), and this module alone decides which are called.
//!
//! The family is every tested path of the compare, controlled by Benjamini-Hochberg at
//! `--path-alpha` (1% by default, stricter than the op verdicts' 5%: at 5% a loaded A/A series
//! here called a path in 2 of 17 compares, each at q = 0.047, while a 5% cost in close was
//! called at q = 0.001-0.005 in 10 of 10). Why not Holm within a workload: a quick suite has
//! 18 workloads of 10-30 paths, so a 5% family-wise rate per workload would call about one
//! path in every A/A compare; over the whole compare, when nothing changed, the false
//! discovery rate is the chance of any false call (the path alpha a compare), and where a
//! regression moves several nested paths at once (a hook, its LSM function, the syscall
//! around them) the step-up calls them together with more power than Holm's step-down. Each
//! interval is at the false coverage rate level that goes with it (Benjamini and Yekutieli,
//! 2005), so it leaves out 0 exactly when the path is called.
//!
//! A path timed by a probe pair is judged on its ns per op, or on the same against the rest of
//! the op in the same samples (path / (op - path), priced at the old side's rest), whichever
//! has the smaller standard error: the spread decides, not the change. Under load the whole op
//! moves with the machine (open_close's close timed alone: +-80 ns between runs here) where
//! the ratio holds (+-11 ns), and a path that grows by N while the rest stays reads N. A
//! sampled path is judged on its share, priced the same way (`shares::against_rest_ns`): a
//! share is a ratio inside a run, which a machine running everything slower does not move. A
//! path both timed and sampled is judged by the method with the smaller standard error in ns
//! per op. A ratio has a cost: one path's growth grows every other path's rest, so their
//! ratios fall; a path so judged is not called where another path moving the other way
//! explains its move (`explained_by_another`; on shares alone, where one moved the other way
//! by at least as much).
use serde::Serialize;

use super::{SampledChange, WorkloadComparison};
use crate::{
    stats::shares::{self, ShareTest},
    stats::{self, Criteria, DifferenceTest, Verdict},
};

/// How a path's change was measured and what its figures are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathMethod {
    /// A probe pair's ns per op.
    Timed,
    /// A probe pair's ns per op over the rest of the op in the same samples, priced at the
    /// old side's rest, ns per op.
    AgainstRest,
    /// The sampled share against the rest of the op, priced at the old side's rest, ns per
    /// op (`shares::against_rest_ns`).
    Sampled,
    /// The sampled share's change alone, a fraction of the op's CPU time (where the old side
    /// has no CPU time per op to price it).
    Share,
}

/// One path's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct PathVerdict {
    /// syscall, hook, lsm, task, or group (the suite summary's: the hooks, an LSM, ...).
    pub kind: &'static str,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub method: PathMethod,
    /// The change weighed: ns per op (timed, sampled) or a share (share).
    pub change: f64,
    /// Its interval at the family's level (`PathFamily::confidence`).
    pub low: f64,
    pub high: f64,
    pub p_value: f64,
    /// Benjamini-Hochberg's adjusted p-value over the compare's paths.
    pub q_value: f64,
    pub verdict: Verdict,
    /// Judged against the rest of the op: that rest over the path, on the old side.
    #[serde(skip)]
    rest_per_path: Option<f64>,
    /// Judged on a sampled share: the rest of the op (its CPU time less the path's), new over
    /// old, which a ratio takes to move with the machine alone.
    #[serde(skip)]
    rest_factor: Option<f64>,
}

impl PathVerdict {
    pub fn called(&self) -> bool {
        matches!(self.verdict, Verdict::Regressed | Verdict::Improved)
    }

    /// `syscall close`, `lsm apparmor_file_open`, `group landlock`.
    pub fn label(&self) -> String {
        format!("{} {}", self.kind, self.name)
    }
}

/// The bound a pass rules out, and whose it is.
#[derive(Debug, Clone, Serialize)]
pub struct RuledOut {
    pub workload: String,
    pub path: String,
    /// The upper end of its interval: ns per op, or a share.
    pub bound: f64,
}

/// The family of path verdicts of a compare.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PathFamily {
    /// Paths with a test over all workloads.
    pub tested: usize,
    pub regressed: usize,
    pub improved: usize,
    /// The confidence of each path's interval: 1 - alpha x max(called at q < alpha, 1) / tested.
    pub confidence: f64,
    /// The largest called change (ns per op where it has one), and whose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest: Option<(String, PathVerdict)>,
    /// Over the paths not called regressed: the highest upper end in ns per op, and in share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ruled_out_ns: Option<RuledOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ruled_out_share: Option<RuledOut>,
    /// Paths not called regressed whose interval has no top in ns per op (a share whose
    /// interval reaches the whole op): the bound above leaves them out.
    pub unbounded: usize,
}

/// A row's test, in the figure its verdict is on.
#[derive(Debug, Clone, Copy)]
enum Test {
    Timed(DifferenceTest),
    AgainstRest(DifferenceTest),
    /// A share's test, priced against the rest of the op: the old share and CPU ns per op.
    Sampled(ShareTest, f64, f64),
    Share(ShareTest),
}

impl Test {
    /// The sampled row's test: on its share, priced where the old side has a CPU time per op.
    fn sampled(share: ShareTest, old_share: f64, old_cpu_ns: f64) -> Test {
        match old_cpu_ns.is_finite() && old_cpu_ns > 0.0 && old_share < 1.0 {
            true => Test::Sampled(share, old_share, old_cpu_ns),
            false => Test::Share(share),
        }
    }

    /// A timed row's test: its ns per op, or the same against the rest of the op, whichever
    /// has the smaller standard error (the spread decides, not the change: where the machine
    /// moves the whole op, the ratio holds).
    fn timed(alone: Option<DifferenceTest>, against_rest: Option<DifferenceTest>) -> Option<Test> {
        match (alone, against_rest) {
            (Some(a), Some(r)) if r.std_error < a.std_error => Some(Test::AgainstRest(r)),
            (Some(a), _) => Some(Test::Timed(a)),
            (None, r) => r.map(Test::AgainstRest),
        }
    }

    fn p_value(&self) -> f64 {
        match self {
            Test::Timed(t) | Test::AgainstRest(t) => t.p_value,
            Test::Sampled(t, ..) | Test::Share(t) => t.p_value(),
        }
    }

    /// The change and its interval at confidence 1 - `alpha`.
    fn figures(&self, alpha: f64) -> (f64, f64, f64) {
        match self {
            Test::Timed(t) | Test::AgainstRest(t) => {
                let (low, high) = t.interval(alpha);
                (t.difference, low, high)
            }
            Test::Sampled(t, share, cpu) => {
                let i = t.interval(alpha);
                let ns = |change| shares::against_rest_ns(*share, change, *cpu);
                (ns(t.change), ns(i.low), ns(i.high))
            }
            Test::Share(t) => {
                let i = t.interval(alpha);
                (t.change, i.low, i.high)
            }
        }
    }

    /// Its standard error in ns per op, a share's at `cpu` ns per op.
    fn std_error_ns(&self, cpu: f64) -> f64 {
        match self {
            Test::Timed(t) | Test::AgainstRest(t) => t.std_error,
            // The price's slope at the change seen: it steepens as the new share nears 1.
            Test::Sampled(t, share, cpu) => {
                let rest_after = (1.0 - share - t.change).max(1e-3);
                t.std_error * cpu * (1.0 - share) / rest_after.powi(2)
            }
            Test::Share(t) => t.std_error * cpu,
        }
    }

    /// A sampled test's rest of the op over the path, (1 - s) / s on the old side.
    fn rest_per_path(&self) -> Option<f64> {
        match self {
            Test::Sampled(_, share, _) if *share > 0.0 => Some((1.0 - share) / share),
            _ => None,
        }
    }

    fn method(&self) -> PathMethod {
        match self {
            Test::Timed(_) => PathMethod::Timed,
            Test::AgainstRest(_) => PathMethod::AgainstRest,
            Test::Sampled(..) => PathMethod::Sampled,
            Test::Share(_) => PathMethod::Share,
        }
    }
}

/// Which row a candidate is, to star it once decided.
#[derive(Debug, Clone, Copy)]
enum Row {
    Timed(usize),
    Sampled(usize),
    Group(usize),
}

struct Candidate {
    workload: usize,
    row: Row,
    kind: &'static str,
    name: String,
    parent: Option<String>,
    test: Test,
    /// Judged against the rest of the op: that rest over the path, on the old side.
    rest_per_path: Option<f64>,
    rest_factor: Option<f64>,
}

/// Decides every path of `workloads`, stars the rows called, and says what the family found.
pub(super) fn decide(workloads: &mut [WorkloadComparison], criteria: &Criteria) -> PathFamily {
    let candidates: Vec<Candidate> = workloads
        .iter()
        .enumerate()
        .flat_map(|(i, w)| candidates(i, w))
        .collect();
    let p_values: Vec<f64> = candidates.iter().map(|c| c.test.p_value()).collect();
    let q_values = stats::benjamini_hochberg(&p_values);
    let level = stats::false_coverage_level(&q_values, criteria.path_alpha);
    let mut family = PathFamily {
        tested: candidates.len(),
        confidence: 1.0 - level,
        ..PathFamily::default()
    };
    for w in workloads.iter_mut() {
        w.paths.clear();
    }
    for (c, (&p, &q)) in candidates.iter().zip(p_values.iter().zip(&q_values)) {
        let (change, low, high) = c.test.figures(level);
        let verdict = verdict(c.test.method(), change, q, criteria);
        let v = PathVerdict {
            kind: c.kind,
            name: c.name.clone(),
            parent: c.parent.clone(),
            method: c.test.method(),
            change,
            low,
            high,
            p_value: p,
            q_value: q,
            verdict,
            rest_per_path: c.rest_per_path,
            rest_factor: c.rest_factor,
        };
        workloads[c.workload].paths.push(v);
    }
    for w in workloads.iter_mut() {
        let largest = largest_share_moves(&w.paths);
        let largest_movers = largest_called_moves(&w.paths);
        let demoted: Vec<bool> = w
            .paths
            .iter()
            .map(|v| {
                outweighed(largest, v)
                    || explained_by_another(&largest_movers, v)
                    || the_rest_did_not_hold(v)
            })
            .collect();
        for (v, demoted) in w.paths.iter_mut().zip(demoted) {
            if demoted {
                v.verdict = Verdict::NoChange;
            }
        }
    }
    // Candidates came workload by workload, so each one's place among its workload's paths
    // is its place less the candidates of the workloads before.
    let mut before = 0;
    for (k, c) in candidates.iter().enumerate() {
        if k > 0 && candidates[k - 1].workload != c.workload {
            before = k;
        }
        let w = &mut workloads[c.workload];
        let v = w.paths[k - before].clone();
        star(w, c.row, v.called());
        family.count(&w.name, &v);
    }
    family
}

/// The largest change of a called share-judged path each way, falls first: what
/// [`outweighed`] weighs a path against, found once per workload, not once per path.
fn largest_share_moves(paths: &[PathVerdict]) -> [f64; 2] {
    // None either way yet: below any change.
    let mut largest = [f64::NEG_INFINITY; 2];
    for o in paths.iter().filter(|o| judged_on_share(o)) {
        let way = usize::from(!o.change.is_sign_negative());
        largest[way] = largest[way].max(o.change.abs());
    }
    largest
}

/// Whether `v`, judged on its share alone, moved less than another share-judged path of its
/// workload moved the other way (`largest`, from [`largest_share_moves`]): shares add up to the
/// op, so that one's move is all of it.
fn outweighed(largest: [f64; 2], v: &PathVerdict) -> bool {
    let other_way = usize::from(v.change.is_sign_negative());
    judged_on_share(v) && largest[other_way] >= v.change.abs()
}

fn judged_on_share(v: &PathVerdict) -> bool {
    v.method == PathMethod::Share && v.called()
}

/// Whether `v`, judged against the rest of the op, moved as the largest called move the other
/// way (`largest`, from [`largest_called_moves`]) makes it move: a path that grows by N grows every other path's rest by N, so
/// their ratios fall as if each had shrunk by N over its rest-to-path ratio. A called move
/// needs a change of its rest (its change times its rest-to-path ratio) to be another's doing.
/// Of two opposite moves, `v` is the other's doing where its need is nearer the other's change
/// than the other's need is to `v`'s change (a sibling of a path that grew by N needs N).
fn explained_by_another(largest: &[Option<&PathVerdict>; 2], v: &PathVerdict) -> bool {
    let needs = |p: &PathVerdict| p.rest_per_path.map(|r| p.change.abs() * r);
    let Some(own) = needs(v) else {
        return false;
    };
    let other_way = usize::from(v.change.is_sign_negative());
    v.called()
        && largest[other_way].is_some_and(|o| {
            needs(o)
                .is_some_and(|other| (own - o.change.abs()).abs() <= (other - v.change.abs()).abs())
        })
}

/// How far the rest of an op may move between the sides and still be the machine's speed: a
/// loaded runner stretches every op by tens of percent, never by half or twice.
pub const REST_FACTOR_HELD: f64 = 2.0;

/// Whether `v`, called on its sampled share, stood against a rest of the op that moved by more
/// than a machine's speed moves it: the share reads a path's growth only while the rest holds
/// (fs_create_0k's op fell from 1.2 ms to 25 us between two runs of one kernel, and its hooks'
/// 370 ns, down from 1,200, read as a rise of 2,400 against the old rest).
fn the_rest_did_not_hold(v: &PathVerdict) -> bool {
    let held = 1.0 / REST_FACTOR_HELD..=REST_FACTOR_HELD;
    v.method == PathMethod::Sampled
        && v.called()
        && v.rest_factor.is_some_and(|f| !held.contains(&f))
}

/// The called path judged against the rest with the largest change each way, falls first:
/// the one move [`explained_by_another`] weighs a path against (a path that grows moves its
/// siblings' ratios by less than it moved), found once per workload, so a compare of many
/// called paths stays linear in them.
fn largest_called_moves(paths: &[PathVerdict]) -> [Option<&PathVerdict>; 2] {
    let mut largest: [Option<&PathVerdict>; 2] = [None, None];
    for o in paths
        .iter()
        .filter(|o| o.called() && o.rest_per_path.is_some())
    {
        let way = usize::from(!o.change.is_sign_negative());
        if largest[way].is_none_or(|l| o.change.abs() > l.change.abs()) {
            largest[way] = Some(o);
        }
    }
    largest
}

/// A path's verdict from its q-value and change: called when the family rejects it and the
/// change passes the threshold of its figure.
fn verdict(method: PathMethod, change: f64, q: f64, criteria: &Criteria) -> Verdict {
    let threshold = match method {
        PathMethod::Timed | PathMethod::AgainstRest | PathMethod::Sampled => {
            criteria.path_threshold_ns
        }
        PathMethod::Share => criteria.path_threshold_share,
    };
    match (q < criteria.path_alpha, change.abs() > threshold) {
        (true, true) if change > 0.0 => Verdict::Regressed,
        (true, true) => Verdict::Improved,
        _ => Verdict::NoChange,
    }
}

impl PathFamily {
    /// Adds `v` of `workload` to the counts, the largest change and the bounds ruled out.
    fn count(&mut self, workload: &str, v: &PathVerdict) {
        match v.verdict {
            Verdict::Regressed => self.regressed += 1,
            Verdict::Improved => self.improved += 1,
            _ => {}
        }
        let size = |v: &PathVerdict| (v.method == PathMethod::Share, -v.change.abs());
        if v.called() && self.largest.as_ref().is_none_or(|(_, l)| size(v) < size(l)) {
            self.largest = Some((workload.to_string(), v.clone()));
        }
        if v.verdict == Verdict::Regressed {
            return;
        }
        if !v.high.is_finite() {
            self.unbounded += 1;
            return;
        }
        let slot = match v.method {
            PathMethod::Share => &mut self.ruled_out_share,
            _ => &mut self.ruled_out_ns,
        };
        if slot.as_ref().is_none_or(|r| v.high > r.bound) {
            *slot = Some(RuledOut {
                workload: workload.to_string(),
                path: v.label(),
                bound: v.high,
            });
        }
    }
}

/// `w`'s tested paths: its timed rows, then its sampled rows no timed row tests, then the
/// suite summary's groups.
fn candidates(workload: usize, w: &WorkloadComparison) -> Vec<Candidate> {
    let timed = w
        .attribution
        .iter()
        .flat_map(|a| a.paths.iter().enumerate());
    let mut out: Vec<Candidate> = timed
        .filter_map(|(i, p)| {
            let test = Test::timed(p.test, p.against_rest)?;
            let rest_per_path = match test {
                Test::AgainstRest(_) => p.old_rest_ns.map(|rest| rest / p.old_ns_per_op),
                _ => None,
            };
            Some(Candidate {
                workload,
                row: Row::Timed(i),
                kind: p.kind.name(),
                name: p.name.clone(),
                parent: p.parent.clone(),
                test,
                rest_per_path: rest_per_path.filter(|r| r.is_finite()),
                rest_factor: None,
            })
        })
        .collect();
    let Some(s) = &w.sampled else {
        return out;
    };
    for (i, p) in s.paths.iter().enumerate() {
        let test = Test::sampled(p.judged.test, p.old_share, s.old_cpu_ns_per_op);
        let sampled = Candidate {
            workload,
            row: Row::Sampled(i),
            kind: p.kind.name(),
            name: p.name.clone(),
            parent: p.parent.clone(),
            test,
            rest_per_path: test.rest_per_path(),
            rest_factor: rest_factor(s, p.old_share, p.new_share),
        };
        let same = |c: &&mut Candidate| {
            c.kind == sampled.kind && c.name == sampled.name && c.parent == sampled.parent
        };
        match out.iter_mut().find(same) {
            Some(timed) => {
                if test.std_error_ns(s.old_cpu_ns_per_op)
                    < timed.test.std_error_ns(s.old_cpu_ns_per_op)
                {
                    *timed = sampled;
                }
            }
            None => out.push(sampled),
        }
    }
    out.extend(s.groups.iter().enumerate().map(|(i, g)| {
        let test = Test::sampled(g.judged.test, g.old_share, s.old_cpu_ns_per_op);
        Candidate {
            workload,
            row: Row::Group(i),
            kind: "group",
            name: g.label(),
            parent: None,
            test,
            rest_per_path: test.rest_per_path(),
            rest_factor: rest_factor(s, g.old_share, g.new_share),
        }
    }));
    out
}

/// The rest of the op beside a path of these shares, new over old (None where a side has no
/// CPU time or no rest).
fn rest_factor(s: &SampledChange, old_share: f64, new_share: f64) -> Option<f64> {
    let old = s.old_cpu_ns_per_op * (1.0 - old_share);
    let new = s.new_cpu_ns_per_op * (1.0 - new_share);
    let factor = new / old;
    (old > 0.0 && factor.is_finite() && factor > 0.0).then_some(factor)
}

fn star(w: &mut WorkloadComparison, row: Row, called: bool) {
    match row {
        Row::Timed(i) => {
            if let Some(p) = w.attribution.as_mut().and_then(|a| a.paths.get_mut(i)) {
                p.starred = called;
            }
        }
        Row::Sampled(i) => {
            if let Some(p) = w.sampled.as_mut().and_then(|s| s.paths.get_mut(i)) {
                p.judged.starred = called;
            }
        }
        Row::Group(i) => {
            if let Some(g) = w.sampled.as_mut().and_then(|s| s.groups.get_mut(i)) {
                g.judged.starred = called;
            }
        }
    }
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
