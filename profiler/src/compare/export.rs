//! The comparison in each format `compare` (and `ab`) print it in.
use anyhow::Result;

use super::{render_html, render_junit, render_markdown, render_text, Comparison};
use crate::output::{self, Document, Format};

impl Document for Comparison {
    const FORMATS: &'static [Format] = &[
        Format::Text,
        Format::Markdown,
        Format::Json,
        Format::Html,
        Format::Junit,
        Format::Bmf,
    ];

    fn export(&self, format: Format) -> Result<Vec<u8>> {
        match format {
            Format::Text => Ok(render_text(self).into_bytes()),
            Format::Markdown => Ok(render_markdown(self).into_bytes()),
            Format::Html => Ok(render_html(self).into_bytes()),
            Format::Junit => Ok(render_junit(self).into_bytes()),
            Format::Bmf => output::pretty_json(&super::bmf::document(self)),
            other => output::unlisted(other),
        }
    }
}
