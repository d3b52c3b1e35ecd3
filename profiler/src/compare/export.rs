//! The comparison in each format `compare` (and `ab`) print it in.
use anyhow::Result;

use super::{render_html, render_junit, render_markdown, render_text, Comparison};
use crate::output::{self, Document, Exporter, Format};

impl Document for Comparison {
    const FORMATS: &'static [Format] = &[
        Format::Text,
        Format::Markdown,
        Format::Json,
        Format::Html,
        Format::Junit,
        Format::Bmf,
    ];

    fn exporter(format: Format) -> Option<&'static dyn Exporter<Self>> {
        match format {
            Format::Text => Some(&output::Text),
            Format::Markdown => Some(&output::Markdown),
            Format::Json => Some(&output::Json),
            Format::Html => Some(&output::Html),
            Format::Junit => Some(&output::Junit),
            Format::Bmf => Some(&output::Bmf),
            _ => None,
        }
    }
}

impl Exporter<Comparison> for output::Text {
    fn serialize(&self, c: &Comparison) -> Result<Vec<u8>> {
        Ok(render_text(c).into_bytes())
    }
}

impl Exporter<Comparison> for output::Markdown {
    fn serialize(&self, c: &Comparison) -> Result<Vec<u8>> {
        Ok(render_markdown(c).into_bytes())
    }
}

impl Exporter<Comparison> for output::Json {
    fn serialize(&self, c: &Comparison) -> Result<Vec<u8>> {
        output::pretty_json(c)
    }
}

impl Exporter<Comparison> for output::Html {
    fn serialize(&self, c: &Comparison) -> Result<Vec<u8>> {
        Ok(render_html(c).into_bytes())
    }
}

impl Exporter<Comparison> for output::Junit {
    fn serialize(&self, c: &Comparison) -> Result<Vec<u8>> {
        Ok(render_junit(c).into_bytes())
    }
}

impl Exporter<Comparison> for output::Bmf {
    fn serialize(&self, c: &Comparison) -> Result<Vec<u8>> {
        output::pretty_json(&super::bmf::document(c))
    }
}
