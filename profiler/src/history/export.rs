//! The history in each format `history` prints it in: text, JSON, an HTML page.
use anyhow::Result;

use super::{html::render_html, render_text, History};
use crate::output::{self, Document, Format};

impl Document for History {
    const FORMATS: &'static [Format] = &[Format::Text, Format::Json, Format::Html];

    fn export(&self, format: Format) -> Result<Vec<u8>> {
        match format {
            Format::Text => Ok(render_text(self).into_bytes()),
            Format::Html => Ok(render_html(self).into_bytes()),
            other => output::unlisted(other),
        }
    }
}
