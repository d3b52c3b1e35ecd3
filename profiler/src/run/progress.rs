//! The progress display on stderr (none with `-q` or when stderr is not a terminal).
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub(super) fn progress_bar(quiet: bool, workloads: usize) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(workloads as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:30} [{bar:30}] {pos}/{len} samples, {elapsed} elapsed, ETA {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}
