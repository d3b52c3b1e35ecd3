//! The HTML pages in a real browser: headless chromium renders the report, a comparison and a
//! history, its DOM must hold the figures and its screenshot must show them (the figure's
//! colours, not a blank page). The report's test is skipped, saying why, where no chromium is
//! installed; the history's fails there (`cargo xtask setup` installs chromium).
use std::{
    path::{Path, PathBuf},
    process::Command,
};

fn hookprof(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hookprof"))
        .args(args)
        .output()
        .expect("run hookprof")
}

fn browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// A run of five workloads: open_close with syscalls, a hook and an LSM function under it,
/// fork_proc with a task path, null_call with syscalls only, bw_pipe (a bandwidth: its rows'
/// shares say what its op took), and fs_create_0k, which failed; `slower` adds 500 ns to
/// security_file_open and to the op.
fn results(label: &str, started_at: u64, slower: f64) -> String {
    let row = |kind: &str, name: &str, parent: Option<&str>, ns: f64| {
        serde_json::json!({
            "kind": kind, "name": name, "parent": parent, "calls_per_op": 1.0,
            "ns_per_call": ns, "ns_per_op": ns, "share": 0.0,
            "samples_ns_per_op": [ns, ns * 1.01, ns * 0.99],
            "histogram": [0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 10, 2, 0, 1],
        })
    };
    let open = 5.0 + slower / 1000.0;
    serde_json::json!({
        "schema_version": 1, "label": label, "complete": false, "source": "hookprof",
        "environment": {"kernel_release": "6.1.0-test", "hookprof_version": "0", "started_at": started_at},
        "workloads": [
            {"name": "open_close", "family": "processes", "unit": "us",
             "clean": [open, open * 1.002, open * 0.998, open * 1.001, open * 0.999],
             "round_sizes": [1, 1, 1, 1, 1],
             "attribution": [
                row("syscall", "openat", None, 3000.0 + slower),
                row("syscall", "close", None, 600.0),
                row("hook", "security_file_open", None, 400.0 + slower),
                row("lsm", "apparmor_file_open", Some("security_file_open"), 300.0 + slower),
             ]},
            {"name": "fork_proc", "family": "processes", "unit": "us",
             "clean": [60.0, 61.0, 59.0, 60.5, 59.5],
             "attribution": [
                row("syscall", "clone", None, 30000.0),
                row("syscall", "wait4", None, 8000.0),
                row("task_path", "copy_process", None, 20000.0),
                row("hook", "security_task_alloc", None, 900.0),
                row("hook", "security_task_getsecid_obj", None, 40.0),
             ]},
            {"name": "null_call", "family": "latency", "unit": "us",
             "clean": [0.2, 0.201, 0.199, 0.2, 0.2],
             "attribution": [row("syscall", "getppid", None, 120.0)]},
            {"name": "bw_pipe", "family": "bandwidth", "unit": "MB/s",
             "clean": [977.6, 980.0, 975.0], "probed": [1121.0, 1119.0, 1123.0],
             "attribution": [
                {"kind": "syscall", "name": "write", "calls_per_op": 1.0, "ns_per_call": 40000.0,
                 "ns_per_op": 40000.0, "share": 0.6, "histogram": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                 0, 0, 0, 0, 0, 2, 9, 4]},
             ]},
            {"name": "fs_create_0k", "family": "file_vm", "unit": "us", "clean": [],
             "failure": {"phase": "sample 2", "error": "No space left on device (os error 28)"}},
        ]
    })
    .to_string()
}

/// Appended to a copy of a page before it is rendered: after layout, the body's `data-layout`
/// says `ok`, or which chart labels run out of their chart, or into (or within 2 px of) another
/// label beside them on the page.
const LAYOUT_CHECK: &str = "<script>\
const bad = [];\
const texts = [];\
for (const svg of document.querySelectorAll('svg')) {\
  const box = svg.getBoundingClientRect();\
  for (const t of svg.querySelectorAll('text')) {\
    const r = t.getBoundingClientRect();\
    texts.push([t.textContent, r]);\
    if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)\
      bad.push('outside ' + svg.getAttribute('aria-label') + ': ' + t.textContent);\
  }\
}\
for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {\
  const [a, b] = [texts[i][1], texts[j][1]];\
  if (a.left < b.right + 2 && b.left < a.right + 2 && a.top < b.bottom - 2 && b.top < a.bottom - 2)\
    bad.push('too close: ' + texts[i][0] + ' / ' + texts[j][0]);\
}\
document.body.setAttribute('data-layout', bad.length ? bad.join(' | ') : 'ok');\
</script>";

fn with_layout_check(page: &[u8]) -> String {
    String::from_utf8_lossy(page).replace("</body>", &format!("{LAYOUT_CHECK}</body>"))
}

/// What the layout check found, for a failure message.
fn layout_of(dom: &str) -> &str {
    dom.split("data-layout=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("no layout check ran")
}

/// What the flame check (`FLAME_CHECK`) read of `page`'s flame graph in chromium: `name=rgb(..)`
/// per function, `|`-separated. The page is written to `at` with the check before `</body>`.
fn flame_check(chromium: &Path, page: &str, at: &Path) -> String {
    std::fs::write(
        at,
        page.replace("</body>", &format!("{FLAME_CHECK}</body>")),
    )
    .unwrap();
    let dir = at.parent().expect("a page in a directory");
    let (dom, _) = render(chromium, at, dir);
    dom.split("data-flame=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the flame check ran")
        .to_string()
}

/// Renders `page` headless: the DOM after loading, and a screenshot.
fn render(chromium: &Path, page: &Path, dir: &Path) -> (String, PathBuf) {
    let common = |c: &mut Command| {
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()));
    };
    let url = format!("file://{}", page.display());
    let mut dump = Command::new(chromium);
    common(&mut dump);
    let dom = dump
        .args(["--dump-dom", &url])
        .output()
        .expect("run chromium");
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let png = page.with_extension("png");
    let mut shot = Command::new(chromium);
    common(&mut shot);
    let out = shot
        .arg(format!("--screenshot={}", png.display()))
        .args(["--window-size=1100,1300", &url])
        .output()
        .expect("run chromium");
    assert!(
        png.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (String::from_utf8_lossy(&dom.stdout).into_owned(), png)
}

/// The screenshot's pixels: how many of each of `colours` (RGB), and how many distinct colours.
fn pixels(png: &Path, colours: &[[u8; 3]]) -> (Vec<usize>, usize) {
    let file = std::io::BufReader::new(std::fs::File::open(png).unwrap());
    let decoder = png::Decoder::new(file);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().expect("a sane image size")];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let mut counts = vec![0; colours.len()];
    let mut distinct = std::collections::HashSet::new();
    for px in buf[..info.buffer_size()].chunks(channels) {
        let rgb = [px[0], px[1], px[2]];
        distinct.insert(rgb);
        if let Some(i) = colours.iter().position(|c| *c == rgb) {
            counts[i] += 1;
        }
    }
    (counts, distinct.len())
}

#[test]
fn the_report_and_the_comparison_render_their_figures_in_chromium() {
    let Some(chromium) = browser() else {
        println!("skipping: no chromium on PATH (apt install chromium; cargo xtask setup does)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let old = write("old.json", &results("old", 1, 0.0));
    let new = write("new.json", &results("new", 2, 500.0));

    let report = hookprof(&["report", &old, "--format", "html"]);
    assert!(report.status.success());
    let report_page = dir.path().join("report.html");
    std::fs::write(&report_page, with_layout_check(&report.stdout)).unwrap();
    let compare = hookprof(&["compare", &old, &new, "--format", "html"]);
    assert_eq!(compare.status.code(), Some(1), "open_close regressed");
    let compare_page = dir.path().join("compare.html");
    std::fs::write(&compare_page, with_layout_check(&compare.stdout)).unwrap();

    let (dom, shot) = render(&chromium, &report_page, dir.path());
    // The overview opens the page: before any workload's own section.
    let overview = dom
        .find("aria-label=\"suite overview\"")
        .expect("overview figure");
    assert!(
        overview < dom.find("<h3").expect("workload sections"),
        "{dom}"
    );
    let overview_figure = &dom[overview..dom[overview..].find("</figure>").unwrap() + overview];
    // Every workload has its row: the bandwidth one split like the others, the failed one
    // saying where and why.
    for name in ["open_close", "fork_proc", "null_call", "bw_pipe"] {
        assert!(
            overview_figure.contains(&format!("{name}: ")),
            "{name}: {overview_figure}"
        );
    }
    assert!(
        overview_figure.contains("\nfs_create_0k\n")
            && overview_figure.contains("failed in sample 2: No space left on device"),
        "{overview_figure}"
    );
    assert!(
        dom.contains("INCOMPLETE: workload fs_create_0k failed"),
        "{dom}"
    );
    assert!(dom.contains("\n977.5 MB/s\n"), "{dom}");
    assert!(dom.contains("data-layout=\"ok\""), "{}", layout_of(&dom));
    // Syscall blue, LSM red, task-path green, residual grey: each drawn.
    let colours = [
        [0x4e, 0x79, 0xa7],
        [0xe1, 0x57, 0x59],
        [0x59, 0xa1, 0x4f],
        [0xbb, 0xbb, 0xbb],
    ];
    let (counts, distinct) = pixels(&shot, &colours);
    assert!(distinct > 20, "a blank page: {distinct} colours");
    assert!(
        counts.iter().all(|&n| n > 50),
        "{counts:?} in {}",
        shot.display()
    );

    let (dom, shot) = render(&chromium, &compare_page, dir.path());
    assert!(dom.contains("data-layout=\"ok\""), "{}", layout_of(&dom));
    // Every link on the page leads somewhere on it.
    let links: Vec<&str> = dom
        .split("href=\"#")
        .skip(1)
        .map(|l| l.split('"').next().unwrap())
        .collect();
    assert!(!links.is_empty(), "{dom}");
    for id in links {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "#{id} leads nowhere: {dom}"
        );
    }
    assert!(
        dom.contains("aria-label=\"change attribution of open_close\""),
        "{dom}"
    );
    assert!(
        dom.contains("security_file_open +500 ns (apparmor_file_open +500 ns)"),
        "{dom}"
    );
    let (counts, distinct) = pixels(&shot, &[[0xe1, 0x57, 0x59]]);
    assert!(
        distinct > 20 && counts[0] > 100,
        "{counts:?}, {distinct} colours"
    );
    if let Some(keep) = std::env::var_os("HOOKPROF_KEEP_SCREENSHOTS") {
        for (from, to) in [(&report_page, "report"), (&compare_page, "compare")] {
            std::fs::copy(
                from.with_extension("png"),
                Path::new(&keep).join(format!("{to}.png")),
            )
            .unwrap();
        }
    }
}

#[test]
fn the_history_page_draws_each_metric_with_its_change_points_in_chromium() {
    // Setup installs chromium: without it this test fails rather than pass unseen.
    let chromium = browser().expect("no chromium on PATH: `cargo xtask setup` installs it");
    // Twelve nights, open_close 500 ns slower (in security_file_open) from night 7 on, each
    // night a little off its level as real runs are.
    const WOBBLE: [f64; 6] = [0.004, -0.006, 0.002, 0.008, -0.004, 0.0];
    let dir = tempfile::tempdir().unwrap();
    let series = dir.path().join("nights");
    std::fs::create_dir(&series).unwrap();
    for night in 0..12 {
        let slower = if night >= 6 { 500.0 } else { 0.0 };
        let mut r: serde_json::Value =
            serde_json::from_str(&results(&format!("night-{night}"), 1000 + night, slower))
                .unwrap();
        for s in r["workloads"][0]["clean"].as_array_mut().unwrap() {
            *s = (s.as_f64().unwrap() * (1.0 + WOBBLE[night as usize % 6])).into();
        }
        std::fs::write(series.join(format!("n{night:02}.json")), r.to_string()).unwrap();
    }
    let out = hookprof(&["history", series.to_str().unwrap(), "--format", "html"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = dir.path().join("history.html");
    std::fs::write(&page, with_layout_check(&out.stdout)).unwrap();

    let (dom, shot) = render(&chromium, &page, dir.path());
    if let Some(keep) = std::env::var_os("HOOKPROF_KEEP_SCREENSHOTS") {
        std::fs::copy(&shot, Path::new(&keep).join("history.png")).unwrap();
        std::fs::copy(&page, Path::new(&keep).join("history.html")).unwrap();
    }
    assert!(dom.contains("data-layout=\"ok\""), "{}", layout_of(&dom));
    // A chart per metric; open_close's with its step and the hooks that moved at it.
    for metric in ["open_close", "fork_proc", "null_call", "bw_pipe"] {
        assert!(
            dom.contains(&format!("aria-label=\"history of {metric}\"")),
            "{metric}: {dom}"
        );
    }
    assert!(
        dom.contains("Step 1 at point 7 (night-6)") && dom.contains("step 1: +10.0%"),
        "{dom}"
    );
    assert!(
        dom.contains("open_close +500 ns: security_file_open +500 ns (apparmor_file_open +500 ns)"),
        "{dom}"
    );
    assert!(
        dom.contains("aria-label=\"change attribution of open_close step 1\""),
        "{dom}"
    );
    assert!(
        dom.contains("<a href=\"#m-open-close\">open_close</a> (1 step)"),
        "{dom}"
    );
    assert!(dom.contains("id=\"m-open-close\""), "{dom}");
    // Points blue, levels orange, the change point red: each drawn.
    let (counts, distinct) = pixels(
        &shot,
        &[[0x4e, 0x79, 0xa7], [0xf2, 0x8e, 0x2b], [0xe1, 0x57, 0x59]],
    );
    assert!(distinct > 20, "a blank page: {distinct} colours");
    assert!(
        counts.iter().all(|&n| n > 50),
        "{counts:?} in {}",
        shot.display()
    );
}

/// One workload's results with sampled stacks: openat through security_file_open into AppArmor
/// (`apparmor` samples) and Landlock, user mode, a probe, and the stacks past the limit.
fn profiled_results(label: &str, apparmor: u64) -> String {
    let openat = "entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_openat;do_sys_openat2;\
                  do_filp_open;path_openat;do_open;vfs_open;do_dentry_open;security_file_open";
    let folded = serde_json::json!([
        [format!("{openat};apparmor_file_open;aa_file_perm"), apparmor],
        ["[user]", 300],
        [format!("{openat};hook_file_open;landlock_unmask_layers"), 150],
        [format!("{openat}"), 100],
        ["entry_SYSCALL_64_after_hwframe;do_syscall_64;syscall_trace_enter;__bpf_trace_sys_enter;\
          bpf_trace_run2;bpf_prog_f830a37d56f4c0e8_sys_enter;ktime_get_mono_fast_ns", 120],
        ["entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_close;__fput;security_file_free;\
          apparmor_file_free_security", 40],
        ["[other stacks]", 10],
    ]);
    serde_json::json!({
        "schema_version": 1, "label": label, "complete": true, "source": "hookprof",
        "environment": {"kernel_release": "6.1.0-test", "hookprof_version": "0", "started_at": 1},
        "workloads": [
            {"name": "open_close", "family": "processes", "unit": "us",
             "clean": [5.0, 5.01, 4.99], "probed": [5.5, 5.51, 5.49],
             "profile": {"period_ns": 1000000, "samples": 1000, "user_samples": 300,
                         "probe_samples": 120, "ops": 10000, "on_cpu_ns_per_op": 5000.0,
                         "paths": [], "folded": folded}},
        ]
    })
    .to_string()
}

/// After the page loads: for each flame graph's iframe, whether inferno's script ran (search
/// finds the AppArmor frames, a click on a frame zooms to it) and each kind's colour, as the
/// body's `data-flame` attribute.
const FLAME_CHECK: &str = "<script>window.addEventListener('load', () => {\
const out = [];\
try {\
for (const f of document.querySelectorAll('iframe.flame')) {\
  const d = f.contentDocument, w = f.contentWindow;\
  const fill = name => { for (const g of d.querySelectorAll('#frames > g'))\
      if (g.querySelector('title').textContent.startsWith(name + ' ('))\
        return g.querySelector('rect').getAttribute('fill');\
    return 'none'; };\
  out.push('frames=' + d.querySelectorAll('#frames > g').length);\
  for (const n of ['security_file_open', 'apparmor_file_open', 'hook_file_open',\
      'bpf_prog_f830a37d56f4c0e8_sys_enter', '[user]', 'do_syscall_64', 'aa_file_perm'])\
    out.push(n + '=' + fill(n));\
  w.search('apparmor');\
  out.push(d.getElementById('matched').textContent);\
  w.reset_search();\
  let hook = null;\
  for (const g of d.querySelectorAll('#frames > g'))\
    if (g.querySelector('title').textContent.startsWith('hook_file_open (')) hook = g;\
  hook.querySelector('rect').dispatchEvent(new MouseEvent('click', {bubbles: true}));\
  out.push('hidden=' + d.querySelectorAll('#frames > g.hide').length);\
  out.push('unzoom=' + !d.getElementById('unzoom').classList.contains('hide'));\
}\
} catch (e) { out.push('error: ' + e); }\
document.body.setAttribute('data-flame', out.join('|'));\
});</script>";

#[test]
fn the_flame_graphs_draw_and_zoom_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let old = write("old.json", &profiled_results("old", 200));
    let new = write("new.json", &profiled_results("new", 600));
    let bare = write("bare.json", &results("bare", 1, 0.0));

    // The folded stacks need no browser: one line per stack, as stackcollapse writes them.
    let folded = hookprof(&["report", &old, "--format", "folded"]);
    assert!(folded.status.success());
    let folded = String::from_utf8(folded.stdout).unwrap();
    assert_eq!(folded.lines().count(), 7, "{folded}");
    assert!(
        folded.starts_with("entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_openat;")
            && folded.contains(";apparmor_file_open;aa_file_perm 200\n[user] 300\n")
            && folded.ends_with("\n[other stacks] 10\n"),
        "{folded}"
    );
    let both = hookprof(&["report", &old, &new, "--format", "folded"]);
    let both = String::from_utf8(both.stdout).unwrap();
    assert!(both.contains("\nnew;open_close;[user] 300\n"), "{both}");
    let refused = hookprof(&["report", &bare, "--format", "folded"]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("results 'bare' hold no sampled kernel stacks"),
        "{stderr}"
    );

    let Some(chromium) = browser() else {
        println!("skipping the browser half: no chromium on PATH (apt install chromium; cargo xtask setup does)");
        return;
    };
    let report = hookprof(&["report", &old, "--format", "html"]);
    assert!(report.status.success());
    let page = String::from_utf8(report.stdout).unwrap();
    let flame = flame_check(&chromium, &page, &dir.path().join("flame.html"));
    let flame = flame.as_str();
    let facts: Vec<&str> = flame.split('|').collect();
    // Hooks orange, AppArmor red, Landlock pink, the probe grey, user mode green, the rest sand.
    for expected in [
        "security_file_open=rgb(242,142,43)",
        "apparmor_file_open=rgb(225,87,89)",
        "hook_file_open=rgb(255,157,167)",
        "bpf_prog_f830a37d56f4c0e8_sys_enter=rgb(160,160,160)",
        "[user]=rgb(140,209,125)",
    ] {
        assert!(facts.contains(&expected), "{expected}: {flame}");
    }
    let kernel = facts
        .iter()
        .find(|f| f.starts_with("do_syscall_64=rgb("))
        .unwrap();
    assert!(!kernel.contains("242,142,43"), "{flame}");
    let frames: usize = facts[0].trim_start_matches("frames=").parse().unwrap();
    assert!(frames >= 20, "{flame}");
    // Search: AppArmor's 200 + 40 of the 920 samples drawn.
    assert!(facts.contains(&"Matched: 26.1%"), "{flame}");
    let hidden: usize = facts
        .iter()
        .find_map(|f| f.strip_prefix("hidden="))
        .unwrap()
        .parse()
        .unwrap();
    // A click on Landlock's hook_file_open zooms to it: only the root, the ten frames under it,
    // it and the Landlock function above it stay.
    assert_eq!(hidden, frames - 13, "{flame}");
    assert!(facts.contains(&"unzoom=true"), "{flame}");

    // The picture, untouched by the checks: the window is tall enough to show the whole graph,
    // each kind's colour drawn.
    let shown = dir.path().join("flame-shot.html");
    std::fs::write(&shown, &page).unwrap();
    let (_, shot) = render(&chromium, &shown, dir.path());
    let colours = [
        [242, 142, 43],
        [225, 87, 89],
        [255, 157, 167],
        [160, 160, 160],
        [140, 209, 125],
    ];
    let (counts, distinct) = pixels(&shot, &colours);
    assert!(distinct > 20, "a blank page: {distinct} colours");
    assert!(
        counts.iter().all(|&n| n > 200),
        "{counts:?} in {}",
        shot.display()
    );

    // The comparison's differential graph colours a function by the change in the samples it
    // was on top of the stack in: AppArmor's aa_file_perm grew (red), user mode shrank (blue),
    // and apparmor_file_open, never on top, stayed white.
    let compare = hookprof(&["compare", &old, &new, "--format", "html"]);
    let page = String::from_utf8(compare.stdout).unwrap();
    assert!(page.contains("Sampled kernel stacks, old to new"), "{page}");
    let flame = flame_check(&chromium, &page, &dir.path().join("diff.html"));
    let flame = flame.as_str();
    let rgb = |name: &str| -> Vec<u32> {
        let f = flame
            .split('|')
            .find_map(|f| f.strip_prefix(&format!("{name}=rgb(")))
            .unwrap();
        f.trim_end_matches(')')
            .split(',')
            .map(|c| c.parse().unwrap())
            .collect()
    };
    let (grew, shrank) = (rgb("aa_file_perm"), rgb("[user]"));
    assert_eq!(rgb("apparmor_file_open"), [250, 250, 250], "{flame}");
    assert!(grew[0] > grew[2] + 50, "{flame}");
    assert!(shrank[2] > shrank[0] + 50, "{flame}");
    let shown = dir.path().join("diff-shot.html");
    std::fs::write(&shown, &page).unwrap();
    let (_, diff_shot) = render(&chromium, &shown, dir.path());
    let colour = |c: &[u32]| [c[0] as u8, c[1] as u8, c[2] as u8];
    let (counts, _) = pixels(&diff_shot, &[colour(&grew), colour(&shrank)]);
    assert!(
        counts.iter().all(|&n| n > 200),
        "{counts:?} in {}",
        diff_shot.display()
    );
    if let Some(keep) = std::env::var_os("HOOKPROF_KEEP_SCREENSHOTS") {
        std::fs::copy(&shot, Path::new(&keep).join("flame.png")).unwrap();
        std::fs::copy(&diff_shot, Path::new(&keep).join("flame-diff.png")).unwrap();
    }

    // An A/A pair, the second a fresh draw of the same profile (AppArmor's 200 samples now
    // 210): no function's own share moved beyond chance, so no frame is red or blue.
    let again = write("again.json", &profiled_results("again", 210));
    let compare = hookprof(&["compare", &old, &again, "--format", "html"]);
    let page = String::from_utf8(compare.stdout).unwrap();
    assert!(page.contains("0 functions changed beyond chance"), "{page}");
    let flame = flame_check(&chromium, &page, &dir.path().join("aa.html"));
    let flame = flame.as_str();
    for name in [
        "aa_file_perm",
        "[user]",
        "security_file_open",
        "do_syscall_64",
    ] {
        assert!(
            flame.contains(&format!("{name}=rgb(250,250,250)")),
            "{name}: {flame}"
        );
    }
    let shown = dir.path().join("aa-shot.html");
    std::fs::write(&shown, &page).unwrap();
    let (_, aa_shot) = render(&chromium, &shown, dir.path());
    let (counts, _) = pixels(&aa_shot, &[colour(&grew), colour(&shrank)]);
    assert_eq!(counts, [0, 0], "{}", aa_shot.display());
    if let Some(keep) = std::env::var_os("HOOKPROF_KEEP_SCREENSHOTS") {
        std::fs::copy(&aa_shot, Path::new(&keep).join("flame-diff-aa.png")).unwrap();
    }
}

/// One value of a Landlock rule sweep (`run --sweep landlock-rules=0,10,100`): open_close 2 ns
/// slower per rule round by round (five rounds, each off its level as runs are), its time in
/// hook_file_open growing alike and in security_file_alloc not at all.
fn sweep_value(rules: u64) -> String {
    const DRIFT: [f64; 5] = [0.0, 0.03, -0.02, 0.01, -0.01];
    let op_us = |r: usize| 2.0 + 0.002 * rules as f64 + DRIFT[r];
    let row = |kind: &str, name: &str, parent: Option<&str>, ns: f64| {
        serde_json::json!({
            "kind": kind, "name": name, "parent": parent, "calls_per_op": 1.0,
            "ns_per_call": ns, "ns_per_op": ns, "share": 0.0, "corrected_ns_per_call": ns,
            "corrected_ns_per_op": ns,
        })
    };
    serde_json::json!({
        "schema_version": 1, "label": format!("host landlock-rules={rules}"), "complete": true,
        "source": "hookprof",
        "environment": {"kernel_release": "6.1.0-test", "hookprof_version": "0"},
        "options": {"policy": [{"kind": "landlock",
            "summary": match rules {
                0 => "landlock (1 layer, 1 rule)".to_string(),
                n => format!("landlock (1 layer, {} rules)", n + 1),
            }, "rules": null}]},
        "pairing": {"run": "00000000000000aa", "variant": format!("landlock-rules={rules}"),
            "base_options": "", "versus_options": "--sweep landlock-rules=0,10,100"},
        "workloads": [
            {"name": "open_close", "family": "processes", "unit": "us",
             "clean": (0..5).map(op_us).collect::<Vec<_>>(), "round_sizes": [1, 1, 1, 1, 1],
             "attribution": [
                row("hook", "security_file_alloc", None, 90.0),
                row("hook", "security_file_open", None, 50.0 + 2.0 * rules as f64),
                row("lsm", "hook_file_open", Some("security_file_open"), 40.0 + 2.0 * rules as f64),
             ]},
        ]
    })
    .to_string()
}

#[test]
fn the_sweep_page_plots_each_workload_with_its_line_in_chromium() {
    // Setup installs chromium: without it this test fails rather than pass unseen.
    let chromium = browser().expect("no chromium on PATH: `cargo xtask setup` installs it");
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<String> = [100, 0, 10]
        .iter()
        .map(|&rules| {
            let p = dir.path().join(format!("r{rules}.json"));
            std::fs::write(&p, sweep_value(rules)).unwrap();
            p.display().to_string()
        })
        .collect();
    let args: Vec<&str> = ["report", "--sweep", "--format", "html"]
        .into_iter()
        .chain(files.iter().map(String::as_str))
        .collect();
    let out = hookprof(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = dir.path().join("sweep.html");
    std::fs::write(&page, with_layout_check(&out.stdout)).unwrap();
    let (dom, shot) = render(&chromium, &page, dir.path());
    if let Some(keep) = std::env::var_os("HOOKPROF_KEEP_SCREENSHOTS") {
        std::fs::copy(&shot, Path::new(&keep).join("sweep.png")).unwrap();
    }
    assert!(dom.contains("data-layout=\"ok\""), "{}", layout_of(&dom));
    // The files in any order, the values in the sweep's; the slope found whatever the drift.
    assert!(
        dom.contains("landlock-rules=0: landlock (1 layer, 1 rule)"),
        "{dom}"
    );
    assert!(
        dom.contains("open_close: +2.000 ns per rule (95%: +2.000 to +2.000)"),
        "{dom}"
    );
    assert!(dom.contains("aria-label=\"open_close op (ns)\""), "{dom}");
    // Every point a circle that says its figure (the op's 3, each path's 3).
    assert_eq!(dom.matches("</title></circle>").count(), 3 + 3 * 3, "{dom}");
    // The hooks stacked, one band each, the one that grows at the bottom.
    assert!(
        dom.contains("aria-label=\"open_close: security hooks stacked (ns/op)\""),
        "{dom}"
    );
    assert_eq!(dom.matches("</title></polygon>").count(), 2, "{dom}");
    assert!(
        dom.contains("lsm hook_file_open</td><td>timed</td><td>+2.000</td>"),
        "{dom}"
    );
    // The op's points and line blue, the second hook's band orange: each drawn.
    let (counts, distinct) = pixels(&shot, &[[0x4e, 0x79, 0xa7], [0xf2, 0x8e, 0x2b]]);
    assert!(distinct > 20, "a blank page: {distinct} colours");
    assert!(
        counts.iter().all(|&n| n > 30),
        "{counts:?} in {}",
        shot.display()
    );
}

/// open_close timed (openat, exit_group counted but never returning) and sampled (openat,
/// security_file_open in it, Landlock's function in that, exit_group).
fn both_methods_results() -> String {
    let sampled =
        |kind: &str, name: &str, parent: Option<&str>, syscall: Option<&str>, share: f64| {
            serde_json::json!({
                "kind": kind, "name": name, "parent": parent, "syscall": syscall,
                "inclusive_samples": (share * 2000.0) as u64, "self_samples": 0,
                "inclusive_share": share, "share_low": share - 0.02, "share_high": share + 0.02,
                "self_share": 0.0, "ns_per_op": share * 2000.0,
                "ns_per_op_low": (share - 0.02) * 2000.0, "ns_per_op_high": (share + 0.02) * 2000.0,
            })
        };
    serde_json::json!({
        "schema_version": 1, "label": "both", "complete": true, "source": "hookprof",
        "environment": {"kernel_release": "6.1.0-test", "hookprof_version": "0", "started_at": 1},
        "workloads": [
            {"name": "open_close", "family": "processes", "unit": "us",
             "clean": [2.0, 2.01, 1.99], "probed": [2.5, 2.51, 2.49],
             "attribution": [
                {"kind": "syscall", "name": "openat", "calls_per_op": 1.0, "ns_per_call": 1500.0,
                 "ns_per_op": 1500.0, "share": 0.6, "samples_ns_per_op": [1490.0, 1500.0, 1510.0]},
                {"kind": "syscall", "name": "exit_group", "calls_per_op": 1.0, "ns_per_call": 0.0,
                 "ns_per_op": 0.0, "share": 0.0, "untimed_calls": 10},
             ],
             "profile": {"period_ns": 200000, "samples": 2000, "user_samples": 100,
                         "probe_samples": 0, "ops": 10000, "on_cpu_ns_per_op": 2000.0,
                         "paths": [
                            sampled("syscall", "openat", None, None, 0.7),
                            sampled("hook", "security_file_open", None, Some("openat"), 0.12),
                            sampled("lsm", "hook_file_open", Some("security_file_open"), None, 0.05),
                            sampled("syscall", "exit_group", None, None, 0.1),
                         ],
                         "folded": [["a;b", 2000]]}},
        ]
    })
    .to_string()
}

/// Each row of the page's paths table as `name@x=cells`, x the left of its name's text.
const PATHS_CHECK: &str = "<script>window.addEventListener('load', () => {\
const out = [];\
const t = document.querySelector('table.paths');\
out.push('header=' + [...t.querySelectorAll('th')].map(h => h.textContent).join(','));\
for (const tr of t.querySelectorAll('tr')) {\
  const td = tr.querySelector('td'); if (!td) continue;\
  const r = document.createRange(); r.selectNodeContents(td);\
  out.push(td.textContent + '@' + Math.round(r.getBoundingClientRect().left) + '=' +\
    [...tr.querySelectorAll('td')].slice(2).map(c => c.textContent).join(','));\
}\
document.body.setAttribute('data-paths', out.join('|'));\
});</script>";

#[test]
fn the_workload_section_s_one_table_nests_the_paths_with_both_methods_in_chromium() {
    let Some(chromium) = browser() else {
        println!("skipping: no chromium on PATH (apt install chromium; cargo xtask setup does)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("both.json");
    std::fs::write(&results, both_methods_results()).unwrap();
    let report = hookprof(&["report", results.to_str().unwrap(), "--format", "html"]);
    assert!(report.status.success(), "{report:?}");
    let page = dir.path().join("both.html");
    std::fs::write(
        &page,
        String::from_utf8(report.stdout)
            .unwrap()
            .replace("</body>", &format!("{PATHS_CHECK}</body>")),
    )
    .unwrap();
    let (dom, png) = render(&chromium, &page, dir.path());
    if let Ok(keep) = std::env::var("HOOKPROF_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
    let paths = dom
        .split("data-paths=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the paths check ran");
    let rows: Vec<&str> = paths.split('|').collect();
    assert!(
        rows[0].contains("timed us/op") && rows[0].contains("sampled us/op"),
        "{paths}"
    );
    let x = |name: &str| -> i64 {
        let row = rows
            .iter()
            .find(|r| r.trim_start_matches("└ ").starts_with(&format!("{name}@")))
            .unwrap_or_else(|| panic!("{name}: {paths}"));
        row.split('@')
            .nth(1)
            .unwrap()
            .split('=')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(x("openat") < x("security_file_open"), "{paths}");
    assert!(x("security_file_open") < x("hook_file_open"), "{paths}");
    let exit = rows.iter().find(|r| r.starts_with("exit_group@")).unwrap();
    assert!(exit.contains("never returns"), "{exit}");
}
