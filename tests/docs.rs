//! The README and the manual (docs/) checked against the repository and the binaries: every
//! in-repo link resolves (its file, and its #anchor where it points into a markdown page),
//! every page of the book is in its SUMMARY.md, and every command-line flag they name in code
//! exists in the `--help` of the command the text names (`hookprof run --pin`, `compare
//! --baseline`, `cargo xtask vm --share`), or of some command where it names none. So the
//! documentation cannot drift from clap's definitions. No root, no probes: seconds.
use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
    process::Command,
};

use hookprof_tests::hookprof_bin;
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// README.md and every markdown file under docs/.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = repo_root();
    let mut docs = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut docs);
    docs.sort();
    docs
}

/// What the checks need of one markdown file, each with its line.
#[derive(Default)]
struct Page {
    links: Vec<(usize, String)>,
    /// Code spans, and code blocks other than data (json, yaml, sql).
    code: Vec<(usize, String)>,
    /// mdBook's `{{#include PATH}}` directives.
    includes: Vec<(usize, String)>,
    /// The ids mdBook gives its headings.
    anchors: BTreeSet<String>,
}

/// A document's name in messages: its path in the repository where it is in it.
fn shown(doc: &Path) -> String {
    doc.strip_prefix(repo_root())
        .unwrap_or(doc)
        .display()
        .to_string()
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

fn parse(text: &str) -> Page {
    let mut page = Page::default();
    let mut heading: Option<String> = None;
    let mut block: Option<(usize, bool, String)> = None;
    for (event, range) in Parser::new_ext(text, Options::all()).into_offset_iter() {
        let line = line_of(text, range.start);
        match event {
            Event::Start(Tag::Link { dest_url, .. }) => page.links.push((line, dest_url.into())),
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                page.anchors.insert(heading_id(&heading.take().unwrap()));
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                let data = matches!(&kind, CodeBlockKind::Fenced(lang)
                    if ["json", "yaml", "yml", "sql", "toml"].contains(&lang.as_ref()));
                block = Some((line + 1, data, String::new()));
            }
            Event::End(TagEnd::CodeBlock) => {
                let (line, data, code) = block.take().unwrap();
                if !data {
                    page.code.push((line, code));
                }
            }
            Event::Code(code) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&code);
                }
                page.code.push((line, code.into()));
            }
            Event::Text(t) => {
                if let Some((_, _, code)) = block.as_mut() {
                    code.push_str(&t);
                } else if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            _ => {}
        }
    }
    for (i, l) in text.lines().enumerate() {
        if let Some(rest) = l.split("{{#include ").nth(1) {
            let path = rest.split("}}").next().unwrap_or_default().trim();
            page.includes
                .push((i + 1, path.split(':').next().unwrap().to_string()));
        }
    }
    page
}

/// mdBook's id for a heading: lower case, spaces to '-', only alphanumerics, '-' and '_' kept.
fn heading_id(text: &str) -> String {
    text.trim()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// Every link into the repository that does not resolve, as `file:line: why`.
fn broken_links(docs: &[PathBuf]) -> Vec<String> {
    let mut pages = HashMap::new();
    for doc in docs {
        pages.insert(doc.clone(), parse(&std::fs::read_to_string(doc).unwrap()));
    }
    let mut broken = Vec::new();
    for (doc, page) in &pages {
        let dir = doc.parent().unwrap();
        let name = shown(doc);
        for (line, link) in &page.links {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                doc.clone()
            } else {
                dir.join(file)
            };
            let Ok(target) = target.canonicalize() else {
                broken.push(format!("{name}:{line}: {link}: no such file"));
                continue;
            };
            if !target.starts_with(repo_root()) {
                broken.push(format!("{name}:{line}: {link}: outside the repository"));
            } else if !anchor.is_empty() {
                match pages.get(&target) {
                    Some(p) if p.anchors.contains(anchor) => {}
                    Some(_) => broken.push(format!("{name}:{line}: {link}: no such heading")),
                    None => broken.push(format!("{name}:{line}: {link}: an anchor in a non-page")),
                }
            }
        }
        for (line, include) in &page.includes {
            if !dir.join(include).is_file() {
                broken.push(format!("{name}:{line}: include {include}: no such file"));
            }
        }
    }
    broken.sort();
    broken
}

/// A command's options and subcommands, read from its `--help`.
#[derive(Default)]
struct Help {
    flags: BTreeSet<String>,
    subcommands: BTreeSet<String>,
}

fn parse_help(text: &str) -> Help {
    let mut help = Help::default();
    let mut in_commands = false;
    for line in text.lines() {
        if !line.starts_with(' ') {
            in_commands = line.starts_with("Commands:");
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if in_commands {
            if let Some(w) = words.first() {
                help.subcommands.insert(w.to_string());
            }
        } else if words.first().is_some_and(|w| w.starts_with('-')) {
            // `-o, --output <FILE>` or `--pin <CPU>`: the option's names, before its value.
            for w in words.iter().take(2) {
                let name = w.trim_end_matches(',');
                let name = name.split(['=', '[', '<']).next().unwrap();
                if name.starts_with('-') && name.len() > 1 {
                    help.flags.insert(name.to_string());
                }
            }
        }
    }
    help
}

/// The `--help` of each command path asked for, from the binary that owns it.
struct Clis {
    programs: HashMap<&'static str, PathBuf>,
    cache: HashMap<Vec<String>, Option<Help>>,
}

impl Clis {
    fn new() -> Clis {
        let hookprof = hookprof_bin();
        assert!(
            hookprof.is_file(),
            "{} is missing: build it with `cargo build --release --bin hookprof`",
            hookprof.display()
        );
        // `cargo xtask` runs xtask's debug build, in the same target directory.
        let xtask = hookprof
            .parent()
            .unwrap()
            .with_file_name("debug")
            .join("xtask");
        assert!(
            xtask.is_file(),
            "{} is missing: `cargo xtask ...` builds it (or `cargo build -p xtask`)",
            xtask.display()
        );
        Clis {
            programs: HashMap::from([("hookprof", hookprof), ("xtask", xtask)]),
            cache: HashMap::new(),
        }
    }

    /// The help of `path` (program first); None when the program refuses it as unknown.
    fn help(&mut self, path: &[String]) -> Option<&Help> {
        if !self.cache.contains_key(path) {
            let out = Command::new(&self.programs[path[0].as_str()])
                .args(&path[1..])
                .arg("--help")
                .output()
                .expect("run --help");
            let help = out
                .status
                .success()
                .then(|| parse_help(&String::from_utf8_lossy(&out.stdout)));
            self.cache.insert(path.to_vec(), help);
        }
        self.cache[path].as_ref()
    }

    /// Every flag of every command of the program, hidden commands left out.
    fn all_flags(&mut self, program: &str) -> BTreeSet<String> {
        let mut all = BTreeSet::new();
        let mut todo = vec![vec![program.to_string()]];
        while let Some(path) = todo.pop() {
            let help = self.help(&path).expect("a listed command has help");
            all.extend(help.flags.iter().cloned());
            for sub in &help.subcommands {
                if sub != "help" {
                    todo.push([path.clone(), vec![sub.clone()]].concat());
                }
            }
        }
        all
    }
}

/// A flag named in code, and the command the text names it for (None: none named).
#[derive(Debug, PartialEq)]
struct Mention {
    command: Option<Vec<String>>,
    flag: String,
}

/// One shell command of a code span or line: split at `|`, `;`, `&&` and `$(` outside
/// brackets and quotes (a synopsis's `[--store URL | --no-store]` stays whole).
fn segments(code: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let (mut depth, mut quote) = (0i32, None);
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match (c, quote) {
            ('\'' | '"', None) => quote = Some(c),
            (q, Some(open)) if q == open => quote = None,
            ('[', None) => depth += 1,
            (']', None) => depth -= 1,
            ('|' | ';', None) if depth <= 0 => {
                out.push(String::new());
                i += 1;
                continue;
            }
            ('&', None) if depth <= 0 && chars.get(i + 1) == Some(&'&') => {
                out.push(String::new());
                i += 2;
                continue;
            }
            ('$', None) if chars.get(i + 1) == Some(&'(') => {
                out.push(String::new());
                i += 2;
                continue;
            }
            _ => {}
        }
        out.last_mut().unwrap().push(c);
        i += 1;
    }
    out
}

fn is_word(w: &str) -> bool {
    !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && !w.starts_with('-')
}

/// The long and short flags of `segment`, with the command path they belong to.
fn mentions(segment: &str, clis: &mut Clis) -> Vec<Mention> {
    let words: Vec<&str> = segment
        .split_whitespace()
        .map(|w| w.trim_matches(|c| "'\"([{".contains(c)))
        .collect();
    // The last program this text names in the segment owns what follows it
    // (`cargo xtask vm -- hookprof run --pin 1`: the flag is run's).
    let start = words
        .iter()
        // (`HOOKPROF_BIN=.../hookprof cargo test` sets a variable: cargo is the program)
        .rposition(|w| *w == "hookprof" || (w.ends_with("/hookprof") && !w.contains('=')));
    let xtask = words.windows(2).rposition(|p| p == ["cargo", "xtask"]);
    let (mut path, rest): (Option<Vec<String>>, &[&str]) = match (start, xtask) {
        (Some(h), x) if x.is_none_or(|x| h > x) => (Some(vec!["hookprof".into()]), &words[h + 1..]),
        (_, Some(x)) => (Some(vec!["xtask".into()]), &words[x + 2..]),
        _ => {
            // No program named: a hookprof command at the start (`run --save-baseline NAME`)
            // owns the flags; anything else at the start is another tool, whose flags are not
            // ours to check; a flag at the start names no command.
            let skip = words
                .iter()
                .position(|w| {
                    !["sudo", "$", "time", "/usr/bin/time"].contains(w) && !w.contains('=')
                })
                .unwrap_or(words.len());
            match words.get(skip) {
                Some(w) if w.starts_with('-') => (None, &words[skip..]),
                Some(w) if clis.help(&["hookprof".into(), w.to_string()]).is_some() => {
                    (Some(vec!["hookprof".into()]), &words[skip..])
                }
                _ => return Vec::new(),
            }
        }
    };
    // The command's words: as deep as its help lists subcommands.
    let mut rest = rest;
    if let Some(p) = path.as_mut() {
        while let Some(w) = rest.first().filter(|w| is_word(w)) {
            let help = clis.help(p);
            let listed = help.is_some_and(|h| h.subcommands.contains(*w));
            let hidden = p.len() == 1 && w.starts_with("__");
            if !listed && !hidden {
                break;
            }
            p.push(w.to_string());
            rest = &rest[1..];
        }
        if p.len() == 1 {
            path = None;
        }
    }
    let mut found = Vec::new();
    for w in rest {
        if *w == "--" && path.is_some() {
            break; // what follows is the measured command's (`stat -- CMD`)
        }
        let flag: String = w
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let long =
            flag.len() > 2 && flag.starts_with("--") && flag.as_bytes()[2].is_ascii_lowercase();
        let short =
            flag.len() == 2 && flag.starts_with('-') && flag.as_bytes()[1].is_ascii_alphabetic();
        if long || (short && path.is_some()) {
            found.push(Mention {
                command: path.clone(),
                flag,
            });
        }
    }
    found
}

/// Every flag the documents name that its command does not have, as `file:line: why`.
fn unknown_flags(docs: &[PathBuf], clis: &mut Clis) -> Vec<String> {
    let mut any: BTreeSet<String> = clis.all_flags("hookprof");
    any.extend(clis.all_flags("xtask"));
    let mut unknown = Vec::new();
    for doc in docs {
        let page = parse(&std::fs::read_to_string(doc).unwrap());
        let name = shown(doc);
        for (line, code) in &page.code {
            // A synopsis continues its command on indented lines; `\` continues a shell line.
            let mut joined: Vec<(usize, String)> = Vec::new();
            for (i, l) in code.lines().enumerate() {
                let continues = l.starts_with(' ')
                    || joined.last().is_some_and(|(_, prev)| prev.ends_with('\\'));
                match joined.last_mut() {
                    Some((_, prev)) if continues => {
                        prev.push(' ');
                        prev.push_str(l.trim_start());
                    }
                    _ => joined.push((line + i, l.to_string())),
                }
            }
            for (at, l) in joined {
                // A shell comment names other tools' flags (`# bencher run --adapter json`).
                let l = l.split(" # ").next().unwrap_or_default();
                for segment in segments(l) {
                    for m in mentions(&segment, clis) {
                        let ok = match &m.command {
                            Some(path) => match clis.help(path) {
                                Some(h) => h.flags.contains(&m.flag),
                                None => {
                                    unknown.push(format!(
                                        "{name}:{at}: no command `{}`",
                                        path.join(" ")
                                    ));
                                    continue;
                                }
                            },
                            None => any.contains(&m.flag),
                        };
                        if !ok {
                            let owner = m
                                .command
                                .as_ref()
                                .map_or("any command".into(), |p| p.join(" "));
                            unknown.push(format!(
                                "{name}:{at}: {} is not an option of {owner}",
                                m.flag
                            ));
                        }
                    }
                }
            }
        }
    }
    unknown.sort();
    unknown.dedup();
    unknown
}

#[test]
fn every_in_repo_link_of_the_readme_and_the_manual_resolves() {
    let broken = broken_links(&documents());
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_manual_is_in_its_summary() {
    let src = repo_root().join("docs/src");
    let summary = parse(&std::fs::read_to_string(src.join("SUMMARY.md")).unwrap());
    let listed: BTreeSet<PathBuf> = summary.links.iter().map(|(_, l)| src.join(l)).collect();
    let orphans: Vec<String> = documents()
        .into_iter()
        .filter(|d| d.starts_with(&src) && !d.ends_with("SUMMARY.md") && !listed.contains(d))
        .map(|d| d.display().to_string())
        .collect();
    assert!(
        orphans.is_empty(),
        "pages not in SUMMARY.md:\n{}",
        orphans.join("\n")
    );
}

#[test]
fn every_flag_the_readme_and_the_manual_name_is_in_the_help_of_its_command() {
    let mut clis = Clis::new();
    let unknown = unknown_flags(&documents(), &mut clis);
    assert!(
        unknown.is_empty(),
        "flags that --help does not list:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn the_flag_check_attributes_flags_to_the_command_the_text_names() {
    let mut clis = Clis::new();
    let of = |code: &str, clis: &mut Clis| -> Vec<(Option<String>, String)> {
        segments(code)
            .iter()
            .flat_map(|s| mentions(s, clis))
            .map(|m| (m.command.map(|p| p.join(" ")), m.flag))
            .collect()
    };
    let named = |c: &str, f: &str| (Some(c.to_string()), f.to_string());
    assert_eq!(
        of(
            "sudo hookprof run --pin 1 -o r.json | hookprof report - --format html",
            &mut clis
        ),
        [
            named("hookprof run", "--pin"),
            named("hookprof run", "-o"),
            named("hookprof report", "--format")
        ]
    );
    assert_eq!(
        of("compare --baseline NAME NEW", &mut clis),
        [named("hookprof compare", "--baseline")]
    );
    assert_eq!(
        of("hookprof import lmbench FILE -o DIR", &mut clis),
        [named("hookprof import lmbench", "-o")]
    );
    assert_eq!(
        of("cargo xtask vm --share DIR -- hookprof run -q", &mut clis),
        [named("hookprof run", "-q")]
    );
    assert_eq!(
        of("cargo xtask vm-test --kernel K", &mut clis),
        [named("xtask vm-test", "--kernel")]
    );
    assert_eq!(
        of("hookprof stat --runs 5 -- ls --all", &mut clis),
        [named("hookprof stat", "--runs")]
    );
    assert_eq!(of("--jobs N", &mut clis), [(None, "--jobs".to_string())]);
    assert!(of("perf record -g --call-graph dwarf", &mut clis).is_empty());
    assert!(of(
        "HOOKPROF_BIN=target/release/hookprof cargo test --release",
        &mut clis
    )
    .is_empty());
    // The check itself: a flag that run lacks is reported, one it has is not.
    let page = tempfile::Builder::new().suffix(".md").tempfile().unwrap();
    std::fs::write(
        page.path(),
        "`hookprof run --pin 1`, `hookprof run --pinn 1`, `--no-such-flag`\n",
    )
    .unwrap();
    let found = unknown_flags(&[page.path().to_path_buf()], &mut clis);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].ends_with("--no-such-flag is not an option of any command"),
        "{found:?}"
    );
    assert!(
        found[1].ends_with("--pinn is not an option of hookprof run"),
        "{found:?}"
    );
}
