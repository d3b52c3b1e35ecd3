//! The history in each format `history` prints it in: text, JSON, an HTML page.
use anyhow::Result;

use super::{html::render_html, render_text, History};
use crate::output::{self, Document, Exporter, Format};

impl Document for History {
    const FORMATS: &'static [Format] = &[Format::Text, Format::Json, Format::Html];

    fn exporter(format: Format) -> Option<&'static dyn Exporter<Self>> {
        match format {
            Format::Text => Some(&output::Text),
            Format::Json => Some(&output::Json),
            Format::Html => Some(&output::Html),
            _ => None,
        }
    }
}

impl Exporter<History> for output::Text {
    fn serialize(&self, h: &History) -> Result<Vec<u8>> {
        Ok(render_text(h).into_bytes())
    }
}

impl Exporter<History> for output::Json {
    fn serialize(&self, h: &History) -> Result<Vec<u8>> {
        output::pretty_json(h)
    }
}

impl Exporter<History> for output::Html {
    fn serialize(&self, h: &History) -> Result<Vec<u8>> {
        Ok(render_html(h).into_bytes())
    }
}
