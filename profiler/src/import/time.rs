//! Reads `/usr/bin/time` default output (kernbench logs): each block of time lines is grouped
//! under the heading line before it (`[PATCH 01/10] Task watchers v2`), one configuration per
//! group.
use super::{new_results, ImportError};
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

pub fn parse(text: &str, shown: &str) -> Result<Vec<Results>, ImportError> {
    let mut groups: Vec<Group> = Vec::new();
    let mut heading = String::new();
    let mut in_block = false;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(parsed) = time_line(trimmed) {
            let run = parsed.map_err(|message| ImportError::BadLine {
                path: shown.to_string(),
                line: number + 1,
                message,
            })?;
            if !in_block {
                groups.push(Group {
                    heading: heading.clone(),
                    runs: Vec::new(),
                });
                in_block = true;
            }
            groups.last_mut().expect("pushed above").runs.push(run);
        } else if !trimmed.is_empty() && !is_time_second_line(trimmed) {
            heading = trimmed.to_string();
            in_block = false;
        }
    }
    if groups.is_empty() {
        return Err(ImportError::NoTimeLines {
            path: shown.to_string(),
        });
    }
    Ok(into_results(groups))
}

/// The second line time prints: `0inputs+0outputs (0major+0minor)pagefaults 0swaps`.
fn is_time_second_line(line: &str) -> bool {
    line.contains("inputs+") && line.contains("outputs")
}

/// None if `line` is not a time line; Some(Err) if it looks like one but a field is unreadable.
fn time_line(line: &str) -> Option<Result<TimeLine, String>> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let field = |suffix: &str| tokens.iter().find_map(|t| t.strip_suffix(suffix));
    let (user, system, elapsed) = (field("user")?, field("system")?, field("elapsed")?);
    let number = |name: &str, s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("cannot read {name} '{s}' in '{line}'"))
    };
    Some((|| {
        Ok(TimeLine {
            user: number("user", user)?,
            system: number("system", system)?,
            elapsed: clock_seconds(elapsed)
                .ok_or_else(|| format!("cannot read elapsed '{elapsed}' in '{line}'"))?,
            cpu_percent: field("%CPU").and_then(|c| c.parse().ok()),
        })
    })())
}

/// `2:04.36` -> 124.36, `1:02:03` -> 3723, `59.5` -> 59.5.
fn clock_seconds(s: &str) -> Option<f64> {
    let mut seconds = 0.0;
    for part in s.split(':') {
        let v: f64 = part
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)?;
        seconds = seconds * 60.0 + v;
    }
    Some(seconds)
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
            let mut r = new_results(&label, "import:time");
            let series = |f: fn(&TimeLine) -> f64| g.runs.iter().map(f).collect::<Vec<f64>>();
            let extra = |name: &str, unit, clean| ExtraMetric {
                name: name.into(),
                unit,
                clean,
            };
            let family = crate::workloads::Family::Macro.key();
            let mut build =
                WorkloadResult::new("build", family, Unit::Seconds, series(|t| t.elapsed));
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
        assert_eq!(results[1].source, "import:time");
    }

    #[test]
    fn clock_times_of_every_length() {
        assert_eq!(clock_seconds("2:04.36"), Some(124.36));
        assert_eq!(clock_seconds("1:02:03"), Some(3723.0));
        assert_eq!(clock_seconds("59.5"), Some(59.5));
        assert_eq!(clock_seconds("1:x"), None);
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
            err.to_string().starts_with("b.log:2: cannot read elapsed"),
            "{err}"
        );
    }
}
