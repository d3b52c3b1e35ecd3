//! Every exit code the manual lists (`docs/src/exit-codes.md`), by name: a CI script tells a
//! broken runner from a regression and from an undecided comparison by them.
/// `compare`, `ab`: at least one workload regressed.
pub const REGRESSED: u8 = 1;
/// Bad input or an error (a missing or malformed file, no root, no BTF, a failed workload).
pub const ERROR: u8 = 2;
/// `compare --fail-on inconclusive`: no regression, but a workload could not be decided.
pub const UNDECIDED: u8 = 3;
/// Output could not be written (full disk, closed stdout): whatever was measured is kept
/// (file, store or spool), as the error line says.
pub const WRITE_FAILED: u8 = 4;
/// Interrupted (SIGINT, SIGTERM, SIGHUP): a run writes what it measured, incomplete.
pub const INTERRUPTED: u8 = 130;
/// stdout's reader went away (EPIPE): what a shell reports for a process SIGPIPE ended, as
/// for any Unix tool in a pipeline that `head` cut short.
pub const BROKEN_PIPE: u8 = 141;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_the_manual_lists_is_named_here_and_no_other() {
        let manual = include_str!("../../docs/src/exit-codes.md");
        let listed: Vec<u8> = manual
            .lines()
            .filter_map(|l| l.strip_prefix("| ")?.split(' ').next()?.parse().ok())
            .collect();
        let named = [
            0,
            REGRESSED,
            ERROR,
            UNDECIDED,
            WRITE_FAILED,
            INTERRUPTED,
            BROKEN_PIPE,
        ];
        assert_eq!(listed, named);
    }
}
