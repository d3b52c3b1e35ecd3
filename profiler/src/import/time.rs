//! Reads `/usr/bin/time` default output (kernbench logs): each block of time lines is grouped
//! under the heading line before it (`[PATCH 01/10] Task watchers v2`), one configuration per
//! group.
use super::{
    fault::{column_of, Fault, Imported},
    new_results, ImportError, MAX_CONFIGURATIONS,
};
use crate::results::{ExtraMetric, Results, Unit, WorkloadResult};

/// One `815.80user 113.69system 2:04.36elapsed 747%CPU (...)` line.
#[derive(Debug, Clone, Copy, PartialEq)]
struct TimeLine {
    user: f64,
    system: f64,
    elapsed: f64,
    /// None when time printed `?%CPU` (an elapsed time of zero).
    cpu_percent: Option<f64>,
}

struct Group {
    heading: String,
    runs: Vec<TimeLine>,
}

/// What a line of a time log is.
enum Line {
    /// time's first line (the run's times).
    Times,
    /// The memory part of the first line, wrapped onto a line of its own.
    Memory,
    /// time's second line (I/O and page faults).
    Io,
    /// `Command exited with non-zero status 2`: time says the command failed.
    Failed,
    Blank,
    /// Anything else names the block of runs below it.
    Heading,
}

/// Parses `text` (named `shown` in errors) strictly: one results file per heading, or the first
/// field that could not be read.
pub fn parse(text: &str, shown: &str) -> Result<Vec<Results>, ImportError> {
    Ok(read(text, shown)?.strict(shown)?)
}

/// Reads `text` into one results file per heading, with a fault for every time line (or part of
/// one) that could not be read; a faulty run is left out.
pub fn read(text: &str, shown: &str) -> Result<Imported, ImportError> {
    let mut groups: Vec<Group> = Vec::new();
    let mut faults = Vec::new();
    let mut heading = String::new();
    let mut in_block = false;
    let mut failed: Option<usize> = None;
    let mut time_lines = 0;
    let last = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, _)| i)
        .last();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let fault = |at: usize, problem: String, lenient: &str| {
            Fault::new(number, column_of(line, at), problem, lenient)
        };
        let kind = match kind(line) {
            Line::Heading if Some(index) == last && is_cut_in_first_field(line.trim()) => {
                Line::Times
            }
            kind => kind,
        };
        match kind {
            Line::Blank => {}
            Line::Heading => {
                heading = line.trim().to_string();
                in_block = false;
            }
            Line::Failed => {
                failed = Some(number);
                let at = line.len() - line.trim_start().len();
                faults.push(fault(
                    at,
                    format!(
                        "'{}': the timed run failed, so its time is not the workload's",
                        line.trim()
                    ),
                    "the time line after it is dropped",
                ));
            }
            Line::Memory => {
                if let Err((at, problem)) = memory_fields(line, 0) {
                    faults.push(fault(at, problem, "the line is ignored"));
                }
            }
            Line::Io => {
                if let Err((at, problem)) = io_fields(line) {
                    faults.push(fault(at, problem, "the line is ignored"));
                }
            }
            Line::Times => {
                time_lines += 1;
                let run = match times(line) {
                    Ok(run) => run,
                    Err((at, problem)) => {
                        faults.push(fault(at, problem, "the run is dropped"));
                        continue;
                    }
                };
                if failed.take().is_some() {
                    continue;
                }
                if !in_block {
                    groups.push(Group {
                        heading: heading.clone(),
                        runs: Vec::new(),
                    });
                    in_block = true;
                }
                groups.last_mut().expect("pushed above").runs.push(run);
            }
        }
    }
    if time_lines == 0 {
        return Err(ImportError::NoTimeLines {
            path: shown.to_string(),
        });
    }
    if groups.len() > MAX_CONFIGURATIONS {
        return Err(ImportError::TooManyConfigurations {
            path: shown.to_string(),
            found: groups.len(),
        });
    }
    Ok(Imported {
        results: into_results(groups),
        faults,
    })
}

/// Tells time's lines from headings: a line with any of time's fields (a number glued to
/// `user`, `elapsed`, `%CPU`, `inputs+`, ...) is one of time's, to be read whole.
fn kind(line: &str) -> Line {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Line::Blank;
    }
    if trimmed.starts_with("Command exited with non-zero status")
        || trimmed.starts_with("Command terminated by signal")
    {
        return Line::Failed;
    }
    let has = |suffixes: &[&str]| {
        trimmed.split_whitespace().any(|t| {
            let t = t.trim_start_matches('(');
            t.starts_with(|c: char| c.is_ascii_digit() || c == '?')
                && suffixes
                    .iter()
                    .any(|s| t.ends_with(s) || t.contains(&format!("{s}+")))
        })
    };
    if has(&["user", "system", "elapsed", "%CPU"]) {
        Line::Times
    } else if has(&["avgtext", "avgdata", "maxresident)k"]) {
        Line::Memory
    } else if has(&["inputs", "outputs", "pagefaults", "swaps"]) {
        Line::Io
    } else {
        Line::Heading
    }
}

/// A file's last line cut inside a time line's first field (`815.4`, `815.35us`): a number
/// and at most the start of `user`, alone. Taken for a heading, the run would go without a word.
fn is_cut_in_first_field(trimmed: &str) -> bool {
    let Some(rest) = trimmed.strip_prefix(|c: char| c.is_ascii_digit()) else {
        return false;
    };
    let unit = rest.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let number = &trimmed[..trimmed.len() - unit.len()];
    !trimmed.contains(char::is_whitespace)
        && number.matches('.').count() <= 1
        && "user".starts_with(unit)
        && unit != "user"
}

/// A fault's byte offset in its line and what is wrong.
type FieldError = (usize, String);

/// The whitespace-separated tokens of `line` with their byte offsets.
fn tokens(line: &str) -> Vec<(usize, &str)> {
    line.split_whitespace()
        .map(|t| (t.as_ptr() as usize - line.as_ptr() as usize, t))
        .collect()
}

/// Reads time's first line: `Uuser Ssystem Eelapsed P%CPU`, then (unless wrapped onto the next
/// line) `(Xavgtext+Davgdata Mmaxresident)k`; every field must be there and read.
fn times(line: &str) -> Result<TimeLine, FieldError> {
    let tokens = tokens(line);
    let end = line.trim_end().len();
    let field = |i: usize, suffix: &str, name: &str| -> Result<(usize, &str), FieldError> {
        let Some(&(at, t)) = tokens.get(i) else {
            return Err((
                end,
                format!("a cut time line: it ends before the {name} field"),
            ));
        };
        t.strip_suffix(suffix).map(|v| (at, v)).ok_or_else(|| {
            (
                at,
                format!("'{t}' where time prints the {name} field (N{suffix})"),
            )
        })
    };
    let seconds = |(at, v): (usize, &str), name: &str| {
        decimal(v).ok_or_else(|| (at, format!("{name} '{v}' is not a number of seconds")))
    };
    let user = seconds(field(0, "user", "user")?, "user")?;
    let system = seconds(field(1, "system", "system")?, "system")?;
    let (at, e) = field(2, "elapsed", "elapsed")?;
    let elapsed = clock_seconds(e).map_err(|why| (at, format!("elapsed '{e}' {why}")))?;
    let (at, p) = field(3, "%CPU", "%CPU")?;
    let cpu_percent = match p {
        "?" => None,
        p => Some(decimal(p).ok_or_else(|| (at, format!("%CPU '{p}' is not a number")))?),
    };
    if let Some(&(at, _)) = tokens.get(4) {
        memory_fields(line, at)?;
    }
    Ok(TimeLine {
        user,
        system,
        elapsed,
        cpu_percent,
    })
}

/// `(Xavgtext+Davgdata Mmaxresident)k` from byte `from` of `line` to its end.
fn memory_fields(line: &str, from: usize) -> Result<(), FieldError> {
    fields(line, from, &["(", "avgtext+", "avgdata ", "maxresident)k"])
}

/// `Iinputs+Ooutputs (Fmajor+Rminor)pagefaults Wswaps`.
fn io_fields(line: &str) -> Result<(), FieldError> {
    fields(
        line,
        0,
        &[
            "",
            "inputs+",
            "outputs (",
            "major+",
            "minor)pagefaults ",
            "swaps",
        ],
    )
}

/// Checks that `line[from..]` (spaces trimmed) is `literals` with a whole number between each
/// two: `["(", "avgtext+", ...]` reads `(0avgtext+...`.
fn fields(line: &str, from: usize, literals: &[&str]) -> Result<(), FieldError> {
    let start = from + (line[from..].len() - line[from..].trim_start().len());
    let text = line[..line.trim_end().len()].get(start..).unwrap_or("");
    let mut at = 0;
    for (i, literal) in literals.iter().enumerate() {
        if i > 0 {
            let digits = text[at..].bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 && at >= text.len() {
                let problem = "a cut line: time's fields end early".to_string();
                return Err((start + text.len(), problem));
            }
            if digits == 0 {
                let what = literal.trim_start_matches(|c: char| !c.is_ascii_alphabetic());
                let what = what
                    .split(|c: char| !c.is_ascii_alphabetic())
                    .next()
                    .unwrap_or("");
                return Err((
                    start + at,
                    format!("no whole number for time's {what} field"),
                ));
            }
            at += digits;
        }
        if !text[at..].starts_with(literal) {
            if literal.starts_with(&text[at..]) {
                let problem = "a cut line: time's fields end early".to_string();
                return Err((start + text.len(), problem));
            }
            let problem = format!("'{}' where time prints '{}'", &text[at..], literal.trim());
            return Err((start + at, problem));
        }
        at += literal.len();
    }
    if at < text.len() {
        return Err((
            start + at,
            format!("'{}' after time's last field", &text[at..]),
        ));
    }
    Ok(())
}

/// A plain decimal (`815.80`, `747`): digits with at most one point, finite.
fn decimal(s: &str) -> Option<f64> {
    let plain = s.chars().all(|c| c.is_ascii_digit() || c == '.')
        && s.chars().any(|c| c.is_ascii_digit())
        && s.matches('.').count() <= 1;
    plain
        .then(|| s.parse::<f64>().ok())
        .flatten()
        .filter(|v| v.is_finite())
}

/// `2:04.36` -> 124.36, `1:02:03` -> 3723, `59.5` -> 59.5: time's `[hours:]minutes:seconds`,
/// each part after the first below 60 and only the seconds with a fraction.
fn clock_seconds(s: &str) -> Result<f64, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() > 3 {
        return Err("has more parts than hours:minutes:seconds".into());
    }
    let mut seconds = 0.0;
    for (i, part) in parts.iter().enumerate() {
        let last = i == parts.len() - 1;
        let whole = part.chars().all(|c| c.is_ascii_digit());
        let v = decimal(part)
            .filter(|_| last || whole)
            .ok_or_else(|| format!("is not [hours:]minutes:seconds ('{part}')"))?;
        if i > 0 && v >= 60.0 {
            let unit = if last { "seconds" } else { "minutes" };
            return Err(format!("has {part} {unit}, not below 60"));
        }
        seconds = seconds * 60.0 + v;
    }
    Ok(seconds)
}

fn into_results(groups: Vec<Group>) -> Vec<Results> {
    let mut labels: Vec<String> = Vec::new();
    groups
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            let base = if g.heading.is_empty() {
                format!("group-{}", i + 1)
            } else {
                g.heading.clone()
            };
            // A heading seen again later is a later group of its own.
            let mut label = base.clone();
            let mut n = 2;
            while labels.contains(&label) {
                label = format!("{base} ({n})");
                n += 1;
            }
            labels.push(label.clone());
            let mut r = new_results(&label, "time");
            let series = |f: fn(&TimeLine) -> f64| g.runs.iter().map(f).collect::<Vec<f64>>();
            let extra = |name: &str, unit, clean| ExtraMetric {
                name: name.into(),
                unit,
                clean,
            };
            let mut build = WorkloadResult::new(
                "build",
                crate::results::Family::Macro,
                Unit::Seconds,
                series(|t| t.elapsed),
            );
            build.extra = vec![
                extra("user", Unit::Seconds, series(|t| t.user)),
                extra("system", Unit::Seconds, series(|t| t.system)),
                extra(
                    "cpu_percent",
                    Unit::Percent,
                    g.runs.iter().filter_map(|t| t.cpu_percent).collect(),
                ),
            ];
            r.workloads.push(build);
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
Kernbench results, 3 runs each

2.6.19-rc2 vanilla
815.80user 113.69system 2:04.36elapsed 747%CPU (0avgtext+0avgdata 0maxresident)k
0inputs+0outputs (0major+2654282minor)pagefaults 0swaps
816.10user 113.20system 2:04.12elapsed 748%CPU (0avgtext+0avgdata 0maxresident)k

[PATCH 01/10] Task watchers v2
817.00user 115.01system 2:05.00elapsed 745%CPU (0avgtext+0avgdata 0maxresident)k
0inputs+0outputs (0major+2654282minor)pagefaults 0swaps
";

    #[test]
    fn blocks_are_grouped_under_their_heading() {
        let results = parse(LOG, "kernbench.log").unwrap();
        let labels: Vec<&str> = results.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["2.6.19-rc2 vanilla", "[PATCH 01/10] Task watchers v2"]
        );
        let build = results[0].workload("build").unwrap();
        assert_eq!(build.unit, Unit::Seconds);
        assert_eq!(build.clean, [124.36, 124.12]);
        let names: Vec<&str> = build.extra.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["user", "system", "cpu_percent"]);
        assert_eq!(build.extra[0].clean, [815.80, 816.10]);
        assert_eq!(build.extra[1].clean, [113.69, 113.20]);
        assert_eq!(build.extra[2].clean, [747.0, 748.0]);
        assert_eq!(results[1].workload("build").unwrap().clean, [125.0]);
        assert_eq!(results[1].source.to_string(), "import:time");
    }

    #[test]
    fn clock_times_of_every_length() {
        assert_eq!(clock_seconds("2:04.36"), Ok(124.36));
        assert_eq!(clock_seconds("1:02:03"), Ok(3723.0));
        assert_eq!(clock_seconds("59.5"), Ok(59.5));
        for (bad, why) in [
            ("1:x", "is not [hours:]minutes:seconds ('x')"),
            ("2:75.00", "has 75.00 seconds, not below 60"),
            ("1:60:03", "has 60 minutes, not below 60"),
            ("1.5:02.00", "is not [hours:]minutes:seconds ('1.5')"),
            ("1:2:3:4", "has more parts than hours:minutes:seconds"),
            ("-1:02.00", "is not [hours:]minutes:seconds ('-1')"),
            ("inf", "is not [hours:]minutes:seconds ('inf')"),
        ] {
            assert_eq!(clock_seconds(bad), Err(why.to_string()), "{bad}");
        }
    }

    #[test]
    fn malformed_logs_name_the_file_and_line() {
        let err = parse("no timings here\n", "a.log").unwrap_err();
        assert!(
            err.to_string().starts_with("a.log: no /usr/bin/time lines"),
            "{err}"
        );
        let err = parse("base\n1.0user 2.0system 1:xxelapsed 5%CPU\n", "b.log").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("b.log:2:19: elapsed '1:xx' is not [hours:]minutes:seconds"),
            "{err}"
        );
    }

    /// LOG with its line `n` (1-based) replaced by `line`.
    fn forged(n: usize, line: &str) -> String {
        let mut lines: Vec<&str> = LOG.lines().collect();
        lines[n - 1] = line;
        lines.join("\n") + "\n"
    }

    /// Line 4 of LOG, the first run's time line.
    const RUN: &str =
        "815.80user 113.69system 2:04.36elapsed 747%CPU (0avgtext+0avgdata 0maxresident)k";

    #[test]
    fn every_field_of_a_time_line_is_checked_where_it_is() {
        assert_eq!(LOG.lines().nth(3), Some(RUN));
        for (line, at, says) in [
            (
                RUN.replace("2:04.36", "2:64.36"),
                25,
                "elapsed '2:64.36' has 64.36 seconds",
            ),
            (
                RUN.replace("113.69", "NaN"),
                12,
                "system 'NaN' is not a number of seconds",
            ),
            (
                RUN.replace("815.80", "-815.80"),
                1,
                "user '-815.80' is not a number",
            ),
            (RUN.replace("747%", "x%"), 40, "%CPU 'x' is not a number"),
            (
                RUN.replace("0maxresident", "maxresident"),
                67,
                "no whole number for time's",
            ),
            (
                format!("{RUN} 7"),
                RUN.len() + 1,
                "' 7' after time's last field",
            ),
            // Cut lines, wherever the cut falls.
            (
                "815.80user 113.69system".into(),
                24,
                "a cut time line: it ends before the elapsed",
            ),
            (RUN[..70].into(), 71, "a cut line: time's fields end early"),
        ] {
            let text = forged(4, &line);
            let err = parse(&text, "k.log").unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("k.log:4:{at}: {says}")),
                "{line}: {err}"
            );
            assert_eq!(err.lines().count(), 1);
            // --lenient drops that run and keeps the rest.
            let imported = read(&text, "k.log").unwrap();
            assert_eq!(imported.faults.len(), 1, "{line}");
            assert_eq!(imported.faults[0].lenient, "the run is dropped");
            let build = imported.results[0].workload("build").unwrap();
            assert_eq!(build.clean, [124.12], "{line}");
        }
    }

    #[test]
    fn a_cut_second_line_or_a_failed_run_is_not_passed_over() {
        let cut = forged(5, "0inputs+0outputs (0major+26");
        let err = parse(&cut, "k.log").unwrap_err().to_string();
        assert!(
            err.starts_with("k.log:5:28: a cut line: time's fields end early"),
            "{err}"
        );
        let failed = forged(3, "Command exited with non-zero status 2");
        let err = parse(&failed, "k.log").unwrap_err().to_string();
        assert!(
            err.starts_with("k.log:3:1: 'Command exited with non-zero status 2': the timed run"),
            "{err}"
        );
        // Leniently, the failed run is left out, and it does not become a heading.
        let imported = read(&failed, "k.log").unwrap();
        let labels: Vec<&str> = imported.results.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "Kernbench results, 3 runs each",
                "[PATCH 01/10] Task watchers v2"
            ]
        );
        assert_eq!(
            imported.results[0].workload("build").unwrap().clean,
            [124.12]
        );
    }

    #[test]
    fn a_time_line_wrapped_before_its_memory_fields_reads_whole() {
        let (times, memory) = RUN.split_at(RUN.find(" (").unwrap());
        let wrapped = forged(4, &format!("{times}\n{memory}"));
        let results = parse(&wrapped, "k.log").unwrap();
        assert_eq!(
            results[0].workload("build").unwrap().clean,
            [124.36, 124.12]
        );
        assert_eq!(results.len(), 2);
    }
}
