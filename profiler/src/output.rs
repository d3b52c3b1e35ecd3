//! One output layer for every command (hyperfine's `export` module is the model): a `Format`
//! chosen on the command line, and per document a command prints (results, a comparison, a
//! history) the formats it has, each written by its `export`; JSON is every document's serde
//! form.
use anyhow::Result;
use clap::{builder::PossibleValuesParser, builder::TypedValueParser, ValueEnum};
use serde::Serialize;

/// How a document is printed. Each command takes the formats its document has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    /// The lmbench 2.0 summary tables: one row per sample (an imported lmbench run is one
    /// sample), then MEAN and STDEV rows per file.
    Lmbench,
    /// GitHub-flavoured markdown, e.g. for a CI step summary or a pull-request comment.
    Markdown,
    /// JSON: results as their file holds them (an array for several files); a comparison or
    /// a history as data.
    Json,
    /// One self-contained page with inline SVG charts.
    Html,
    /// JUnit XML: a test case per workload, a failure per regression (GitLab, Jenkins, ...).
    Junit,
    /// KCIDB v5 JSON (KernelCI's common database): a test per workload and per path.
    Kcidb,
    /// Bencher Metric Format JSON: a benchmark per workload, a measure per path.
    Bmf,
    /// Prometheus text (OpenMetrics-compatible): per-path latency histograms, call counters.
    Openmetrics,
    /// Folded stacks, `STACK COUNT` a line (FlameGraph's stackcollapse output, which
    /// flamegraph.pl, inferno and speedscope read): each workload's sampled kernel stacks.
    Folded,
    /// A gzipped pprof profile (profile.proto: `go tool pprof`, Pyroscope, Parca): each
    /// workload's sampled kernel stacks, labelled by run, workload, path kind and path.
    Pprof,
}

impl Format {
    /// A clap value parser that takes only `formats`, so each command's help lists what it
    /// can print.
    pub fn parser(formats: &'static [Format]) -> impl TypedValueParser<Value = Format> {
        PossibleValuesParser::new(formats.iter().filter_map(Format::to_possible_value))
            .map(|name| Format::from_str(&name, false).expect("one of the formats"))
    }

    /// Whether the format is bytes rather than text (written as they are, never to a terminal).
    pub fn is_binary(self) -> bool {
        self == Format::Pprof
    }

    /// Its name on the command line.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}

/// Something a command prints: its formats, and itself in each. JSON is its serde form for
/// every document (`json`), so a document writes only the formats that are its own.
pub trait Document: Serialize {
    /// The formats this document has, the first the default.
    const FORMATS: &'static [Format];

    /// The document in `format`, one of `FORMATS` other than JSON (`unlisted` for any other).
    fn export(&self, format: Format) -> Result<Vec<u8>>;

    /// The document as JSON.
    fn json(&self) -> Result<Vec<u8>> {
        pretty_json(self)
    }
}

/// The error of a format a document's `export` does not write: `serialize` checks `FORMATS`
/// first, so only a document whose list and `export` disagree reaches it.
pub fn unlisted(format: Format) -> Result<Vec<u8>> {
    anyhow::bail!(
        "--format {}: this document has no such format",
        format.name()
    )
}

/// `doc` in `format`, as text made safe for where that format goes (`crate::text`): control
/// characters shown escaped in text, XML-forbidden ones in JUnit and HTML, HTML in markdown
/// shown as text. JSON formats escape them already. A binary format is refused: `render_bytes`
/// writes it.
pub fn render<D: Document + ?Sized>(doc: &D, format: Format) -> Result<String> {
    anyhow::ensure!(
        !format.is_binary(),
        "--format {}: a binary format, which this command cannot print",
        format.name()
    );
    let rendered = String::from_utf8(serialize(doc, format)?)?;
    Ok(match format {
        Format::Text | Format::Lmbench | Format::Folded => {
            crate::text::escaped_lines(&rendered).into_owned()
        }
        Format::Markdown => crate::text::markdown_safe(&rendered),
        Format::Junit | Format::Html => crate::text::xml_safe(&rendered).into_owned(),
        // Prometheus text has its own escapes, which the exporter applies.
        Format::Json | Format::Kcidb | Format::Bmf | Format::Openmetrics | Format::Pprof => {
            rendered
        }
    })
}

/// `doc` in `format` as the bytes to write: a binary format's as its exporter wrote them, a
/// text format's as `render` makes it.
pub fn render_bytes<D: Document + ?Sized>(doc: &D, format: Format) -> Result<Vec<u8>> {
    if format.is_binary() {
        serialize(doc, format)
    } else {
        Ok(render(doc, format)?.into_bytes())
    }
}

/// What `doc`'s exporter for `format` writes; an error naming the formats it has otherwise.
fn serialize<D: Document + ?Sized>(doc: &D, format: Format) -> Result<Vec<u8>> {
    if !D::FORMATS.contains(&format) {
        let names: Vec<String> = D::FORMATS.iter().map(|f| f.name()).collect();
        anyhow::bail!(
            "--format {}: not one of {}",
            format.name(),
            names.join(", ")
        );
    }
    match format {
        Format::Json => doc.json(),
        other => doc.export(other),
    }
}

/// Pretty-printed JSON and a final newline, as every command's JSON ends.
pub fn pretty_json(value: &(impl Serialize + ?Sized)) -> Result<Vec<u8>> {
    let mut out = serde_json::to_vec_pretty(value)?;
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use proptest::prelude::*;

    #[derive(Parser)]
    struct Args {
        #[arg(long, default_value = "text", value_parser = Format::parser(&[Format::Text, Format::Json]))]
        format: Format,
    }

    #[test]
    fn a_command_takes_only_its_own_formats() {
        let parse = |f: &str| Args::try_parse_from(["x", "--format", f]).map(|a| a.format);
        assert_eq!(parse("json").unwrap(), Format::Json);
        let e = parse("html").unwrap_err().to_string();
        assert!(e.contains("[possible values: text, json]"), "{e}");
    }

    #[test]
    fn control_characters_in_a_document_are_escaped_for_text() {
        #[derive(Serialize)]
        struct Named(&'static str);
        impl Document for Named {
            const FORMATS: &'static [Format] = &[Format::Text];
            fn export(&self, _: Format) -> Result<Vec<u8>> {
                Ok(self.0.as_bytes().to_vec())
            }
        }
        assert_eq!(
            render(&Named("\x1b]0;title\x07 row\n"), Format::Text).unwrap(),
            "\\x1b]0;title\\x07 row\n"
        );
    }

    /// A document that is one string, as every format of it.
    #[derive(Serialize)]
    struct Raw(String);
    impl Document for Raw {
        const FORMATS: &'static [Format] = &[
            Format::Text,
            Format::Lmbench,
            Format::Markdown,
            Format::Html,
            Format::Junit,
            Format::Folded,
        ];
        fn export(&self, _: Format) -> Result<Vec<u8>> {
            Ok(self.0.as_bytes().to_vec())
        }
    }

    proptest! {
        #[test]
        fn no_bidi_zero_width_or_control_character_leaves_in_any_printed_format(
            s in proptest::collection::vec(
                prop_oneof![
                    proptest::sample::select(vec![
                        '\u{202e}', '\u{2066}', '\u{2069}', '\u{200b}', '\u{200d}', '\u{feff}',
                        '\u{200e}', '\u{061c}', '\u{1b}', '\u{7}', '\u{9b}', '\r', 'a', '<',
                    ]),
                    any::<char>(),
                ],
                0..30,
            ).prop_map(|cs| cs.into_iter().collect::<String>())
        ) {
            for &format in Raw::FORMATS {
                let out = render(&Raw(s.clone()), format).unwrap();
                let kept: &[char] = match format {
                    Format::Junit | Format::Html => &['\n', '\t', '\r'],
                    _ => &['\n', '\t'],
                };
                let left = out.chars().find(|&c| crate::text::hidden(c) && !kept.contains(&c));
                prop_assert_eq!(left, None, "{:?} in {:?}", format, out);
            }
        }
    }

    #[test]
    fn a_format_the_document_lacks_is_an_error_naming_those_it_has() {
        #[derive(Serialize)]
        struct Doc;
        impl Document for Doc {
            const FORMATS: &'static [Format] = &[Format::Text];
            fn export(&self, _: Format) -> Result<Vec<u8>> {
                Ok(b"doc\n".to_vec())
            }
        }
        assert_eq!(render(&Doc, Format::Text).unwrap(), "doc\n");
        let e = render(&Doc, Format::Html).unwrap_err().to_string();
        assert_eq!(e, "--format html: not one of text");
    }
}
