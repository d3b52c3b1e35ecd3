//! Flame graphs of the sampled kernel stacks, drawn by inferno: one per profiled workload on the
//! report page, and a differential one (old to new) per workload profiled on both sides of a
//! comparison. Each is inferno's own SVG with its search and zoom script, coloured by
//! `palette`. inferno's script finds its parts by document-wide ids and takes the document's
//! first `<svg>`, so each graph gets a document of its own: the `srcdoc` of an iframe, which
//! keeps it inside the page (nothing is fetched) and its script working beside the page's charts
//! and the other graphs.
use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write,
};

use inferno::flamegraph::{self, color::BackgroundColor};

use crate::results::{WorkloadResult, OTHER_STACKS, USER_FRAME};
use crate::text::esc;

pub mod palette;

use palette::FrameKind;

/// The report's figure for a workload with sampled stacks (empty for one without).
pub fn figure(w: &WorkloadResult) -> String {
    let Some(p) = w.profile.as_ref().filter(|p| !p.folded.is_empty()) else {
        return String::new();
    };
    let title = format!("{}: sampled kernel stacks", w.name);
    if let Some(name) = p.names_hidden() {
        let why = std::io::Error::other(format!(
            "every frame is named {name}: the run read kallsyms with its addresses hidden \
             (kernel.kptr_restrict)"
        ));
        return failed(&title, &why);
    }
    // Short enough for a narrow window: inferno centres it on one line and cuts it both ends.
    let subtitle = format!(
        "{} samples of CPU time: {} in user mode, {} in hookprof's probes",
        p.samples, p.user_samples, p.probe_samples
    );
    let svg = match svg(&title, &subtitle, &lines(&p.folded)) {
        Ok(svg) => svg,
        Err(e) => return failed(&title, &e),
    };
    let frames = p.folded.iter().map(|(s, _)| s.as_str());
    format!(
        "<figure class=\"flame\">{}<figcaption>{}.<br>The samples: {}. Each box is a function, \
         as wide as the share of samples with it on the stack, its callers below it. Click a box \
         to zoom, Search (or Ctrl-F) to highlight functions by name; the share of the matched \
         samples shows bottom right.</figcaption></figure>\n",
        embed(&svg, &title),
        legend(frames),
        esc(&p.rates())
    )
}

/// The comparison's figure for a workload profiled on both sides: the new stacks drawn, each
/// function red where the samples it was on top of the stack in grew, blue where they shrank
/// (FlameGraph's differential colouring: a caller's own change, not its callees'), but only the
/// functions in `changed` (their own share moved beyond chance): every other one is drawn
/// neutral, as if it held, so noise draws nothing.
pub fn differential_figure(
    workload: &str,
    old: &[(String, u64)],
    new: &[(String, u64)],
    changed: &BTreeSet<String>,
) -> String {
    let title = format!("{workload}: sampled kernel stacks, old to new");
    let subtitle = format!(
        "{} samples old, {} new (old counts scaled to the new total); {} function{} changed \
         beyond chance",
        total(old),
        total(new),
        changed.len(),
        if changed.len() == 1 { "" } else { "s" }
    );
    let svg = match svg(&title, &subtitle, &differential_lines(old, new, changed)) {
        Ok(svg) => svg,
        Err(e) => return failed(&title, &e),
    };
    format!(
        "<figure class=\"flame\">{}<figcaption>The new side's stacks. A function whose own \
         samples (those with it on top of the stack, not its callees') changed their share of \
         all samples beyond chance is red where they grew and blue where they shrank, the \
         deeper the more; every other function is light grey, its change within what the \
         workload's rounds spread by (a two-proportion test at the rounds' overdispersion, \
         Holm across the functions). Hover for the change in points of all samples. Click to \
         zoom, Search (or Ctrl-F) to highlight.</figcaption></figure>\n",
        embed(&svg, &title)
    )
}

fn total(folded: &[(String, u64)]) -> u64 {
    folded.iter().map(|(_, n)| n).sum()
}

/// Folded stacks as the `STACK COUNT` lines inferno reads.
fn lines(folded: &[(String, u64)]) -> Vec<String> {
    folded.iter().map(|(s, n)| format!("{s} {n}")).collect()
}

/// inferno's differential input: `STACK OLD NEW` lines, the old counts scaled to the new
/// total; a stack whose last function is not in `changed` takes its new count as its old one
/// too, so inferno draws that function as unchanged.
fn differential_lines(
    old: &[(String, u64)],
    new: &[(String, u64)],
    changed: &BTreeSet<String>,
) -> Vec<String> {
    let scale = total(new) as f64 / total(old).max(1) as f64;
    let mut stacks: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (stack, n) in old {
        stacks.entry(stack).or_default().0 += n;
    }
    for (stack, n) in new {
        stacks.entry(stack).or_default().1 += n;
    }
    stacks
        .into_iter()
        .filter_map(|(stack, (o, n))| {
            let leaf = stack.rsplit(';').next().unwrap_or(stack);
            let o = if changed.contains(leaf) {
                (o as f64 * scale).round() as u64
            } else {
                n
            };
            (o + n > 0).then(|| format!("{stack} {o} {n}"))
        })
        .collect()
}

/// inferno's SVG of `lines`, every frame coloured by `palette` (a differential graph's frames
/// by their change instead, as inferno draws them).
fn svg(title: &str, subtitle: &str, lines: &[String]) -> std::io::Result<String> {
    let mut colours = palette::palette_map(lines.iter().map(String::as_str));
    let mut options = flamegraph::Options::default();
    options.title = title.into();
    options.subtitle = Some(subtitle.into());
    options.count_name = "samples".into();
    options.bgcolors = Some(BackgroundColor::Grey);
    options.palette_map = Some(&mut colours);
    // A name cut from the right keeps what tells hooks apart: `security_file_op..`, not
    // `..th_walk`.
    options.text_truncate_direction = flamegraph::TextTruncateDirection::Right;
    let mut out = Vec::new();
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut out)?;
    String::from_utf8(out).map_err(std::io::Error::other)
}

/// `svg` as the whole document of an iframe, as tall as the graph; the SVG itself is inferno's,
/// untouched. Around it, three things its standalone file does not need:
/// - An HTML document cannot carry the SVG file's XML declaration and doctype, so it starts at
///   `<svg`.
/// - In HTML an `<svg>` without a width (inferno's script drops it to fit the window) is 300 px
///   wide, so the style gives it the window's.
/// - inferno's script keeps the zoom and search in the URL's query (`history.replaceState`),
///   but an embedded document's URL (`about:srcdoc`) cannot be rewritten: the call throws and
///   stops the search before it shows how much matched. The state stays in the graph instead.
fn embed(svg: &str, title: &str) -> String {
    let svg = &svg[svg.find("<svg").unwrap_or(0)..];
    let height = svg
        .split_once(" height=\"")
        .and_then(|(_, rest)| rest.split('"').next()?.parse::<u32>().ok())
        .unwrap_or(400);
    let doc = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>html,body{{margin:0}}\
         body>svg{{width:100%}}</style><script>history.replaceState=function(){{}};</script>\
         </head><body>{svg}</body></html>"
    );
    // Inside a double-quoted attribute only '&' and '"' need escaping.
    let doc = doc.replace('&', "&amp;").replace('"', "&quot;");
    format!(
        "<iframe class=\"flame\" title=\"{}\" style=\"width:100%;height:{height}px;border:0\" \
         srcdoc=\"{doc}\"></iframe>",
        esc(title)
    )
}

fn failed(title: &str, e: &std::io::Error) -> String {
    format!(
        "<p class=\"failed\">{}: no flame graph ({})</p>\n",
        esc(title),
        esc(&e.to_string())
    )
}

/// The colours the graph uses, as a line of swatches: hooks, each LSM that has frames, the
/// probes, user mode, other kernel functions.
fn legend<'a>(stacks: impl Iterator<Item = &'a str>) -> String {
    let mut lsms = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    for frame in stacks.flat_map(|s| s.split(';')) {
        match FrameKind::of(frame) {
            FrameKind::Lsm(lsm) => {
                lsms.insert(lsm);
            }
            kind => {
                kinds.insert(format!("{kind:?}"));
            }
        }
    }
    let mut out = String::from("Colours:");
    let mut swatch = |colour: &str, name: &str| {
        let _ = write!(
            out,
            " <span style=\"background:{colour};padding:0 6px\">&nbsp;</span> {}",
            esc(name)
        );
    };
    swatch(palette::HOOK, "security_* hooks");
    for lsm in lsms {
        swatch(palette::lsm_colour(lsm), &format!("{lsm} (LSM)"));
    }
    swatch(palette::PROBE, "hookprof's probes");
    if kinds.contains("User") {
        swatch(palette::USER, USER_FRAME);
    }
    if kinds.contains("OtherStacks") {
        swatch(palette::OTHER_STACKS, OTHER_STACKS);
    }
    swatch("#d4ccba", "other kernel functions");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{report::folded::tests::profile, results::fixtures::sample_results};

    fn workload() -> WorkloadResult {
        let mut w = sample_results().workloads[0].clone();
        w.profile = Some(profile(1));
        w
    }

    /// The `<rect>` fill of the first frame box titled `function (...`, in an iframe's srcdoc.
    fn fill_of(figure: &str, function: &str) -> Option<String> {
        let at = figure.find(&format!("<title>{function} ("))?;
        let rest = &figure[at..];
        let fill = rest.split("fill=&quot;").nth(1)?;
        Some(fill.split("&quot;").next()?.to_string())
    }

    #[test]
    fn a_profiled_workload_has_an_inferno_graph_in_an_iframe_of_its_own() {
        let figure = figure(&workload());
        assert!(
            figure.starts_with("<figure class=\"flame\"><iframe class=\"flame\""),
            "{figure}"
        );
        // One document, the SVG without its XML prologue, the script kept.
        assert_eq!(figure.matches("srcdoc=\"").count(), 1);
        assert!(figure.contains("srcdoc=\"<!DOCTYPE html>"), "{figure}");
        assert!(!figure.contains("<?xml"));
        assert!(figure.contains("onload=&quot;init(evt)&quot;"), "{figure}");
        assert!(figure.contains("function search("), "inferno's script");
        // The script's URL state is dropped before the script runs, not after.
        let shim = figure.find("history.replaceState=function(){};").unwrap();
        assert!(shim < figure.find("&lt;svg").or(figure.find("<svg")).unwrap());
        // Nothing unescaped could end the attribute early.
        let doc = figure.split("srcdoc=\"").nth(1).unwrap();
        let doc = &doc[..doc.find("\"></iframe>").unwrap()];
        assert!(!doc.contains('"'));
        // As tall as the graph: ten frames deep, plus the title and the search bars.
        let height: u32 = figure
            .split("height:")
            .nth(1)
            .and_then(|h| h.split("px").next())
            .unwrap()
            .parse()
            .unwrap();
        assert!((200..400).contains(&height), "{height}");
    }

    #[test]
    fn the_graph_s_frames_take_the_palette_s_colours() {
        let figure = figure(&workload());
        assert_eq!(
            fill_of(&figure, "security_file_open").as_deref(),
            Some("rgb(242,142,43)")
        );
        assert_eq!(
            fill_of(&figure, "apparmor_file_open").as_deref(),
            Some("rgb(225,87,89)")
        );
        assert_eq!(
            fill_of(&figure, "hook_file_open").as_deref(),
            Some("rgb(255,157,167)")
        );
        assert_eq!(
            fill_of(&figure, "bpf_prog_0123456789abcdef_sys_enter").as_deref(),
            Some("rgb(160,160,160)")
        );
        assert_eq!(
            fill_of(&figure, "[user]").as_deref(),
            Some("rgb(140,209,125)")
        );
        // The legend names the LSMs on the stacks, and no other.
        assert!(figure.contains("apparmor (LSM)") && figure.contains("landlock (LSM)"));
        assert!(figure.contains("capability (LSM)") && !figure.contains("selinux"));
    }

    #[test]
    fn a_workload_without_stacks_has_no_figure() {
        assert_eq!(figure(&sample_results().workloads[0]), "");
    }

    #[test]
    fn the_differential_graph_colours_what_grew_red_and_what_shrank_blue() {
        let old = profile(1);
        let mut new = profile(1);
        // AppArmor's stack 30 -> 90 samples; the rest as before.
        new.folded[0].1 = 90;
        let changed = BTreeSet::from(["apparmor_file_open".to_string(), "[user]".to_string()]);
        let figure = differential_figure("open_close", &old.folded, &new.folded, &changed);
        let grew = fill_of(&figure, "apparmor_file_open").unwrap();
        let shrank = fill_of(&figure, "[user]").unwrap();
        let rgb = |s: &str| -> Vec<u8> {
            s.trim_start_matches("rgb(")
                .trim_end_matches(')')
                .split(',')
                .map(|c| c.parse().unwrap())
                .collect()
        };
        let (g, s) = (rgb(&grew), rgb(&shrank));
        assert!(g[0] > g[2], "red: {grew}");
        assert!(s[2] > s[0], "blue: {shrank}");
        assert!(figure.contains("85 samples old, 145 new"), "{figure}");
        // The same change with nothing called changed: every frame neutral.
        let neutral = differential_figure("open_close", &old.folded, &new.folded, &BTreeSet::new());
        for function in ["apparmor_file_open", "[user]", "security_file_open"] {
            assert_eq!(
                fill_of(&neutral, function).as_deref(),
                Some("rgb(250,250,250)"),
                "{function}"
            );
        }
    }
}
