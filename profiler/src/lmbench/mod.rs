//! The lmbench 2.0 summary layout: the ONE table that maps summary columns to hookprof workload
//! names, used both to import posted summaries and to print results as one.
pub mod summary;

use crate::results::{Family, Unit};

/// What a summary column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Host,
    Os,
    Mhz,
    /// A workload's metric, imported from and printed in this column.
    Workload(&'static str),
    /// A workload printed again for reading convenience (2p/0K in the latency section); it is
    /// imported from its own section.
    Repeat(&'static str),
    /// A column hookprof has no workload for (Guesses).
    Unused,
}

#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The two heading lines' text for this column ("" when a line is blank there).
    pub head: [&'static str; 2],
    /// The width of the column's dashes under the heading.
    pub width: usize,
    pub cell: Cell,
    /// Decimals lmbench prints for values below 10 (usually width - 2).
    pub small_decimals: usize,
    /// Present only in lmbench 3.0 summaries.
    pub lmbench3_only: bool,
    /// How hookprof's workload deliberately differs from lmbench's benchmark, if it does: the
    /// summary marks the column and prints this under the section.
    pub differs: Option<&'static str>,
}

impl Column {
    /// The column's heading on one line (`fork proc`, `Mhz`).
    pub fn heading(&self) -> String {
        let words: Vec<&str> = self
            .head
            .iter()
            .copied()
            .filter(|h| !h.is_empty())
            .collect();
        words.join(" ")
    }
}

#[derive(Debug)]
pub struct Section {
    /// The title line as lmbench prints it.
    pub title: &'static str,
    /// Lines printed under the title before the rule (the memory section's warning).
    pub subtitle: Option<&'static str>,
    pub family: Family,
    pub unit: Unit,
    pub columns: &'static [Column],
}

impl Section {
    /// The columns of an lmbench 2.0 (false) or 3.0 (true) summary.
    pub fn columns_of(&self, lmbench3: bool) -> Vec<&'static Column> {
        self.columns
            .iter()
            .filter(|c| lmbench3 || !c.lmbench3_only)
            .collect()
    }

    /// Is `line` this section's title? Titles are matched on their words before the first " - "
    /// or " in ", ignoring case and the `*` around "Local".
    pub fn is_title(&self, line: &str) -> bool {
        // Asked of every line an import reads, so it compares in place, allocating nothing.
        let stem = self.title.split(" - ").next().unwrap_or(self.title);
        let stem = stem.split(" in ").next().unwrap_or(stem);
        let key = |s: &'static str| {
            s.chars()
                .filter(|&c| c != '*')
                .skip_while(|c| c.is_whitespace())
        };
        let mut line = line
            .chars()
            .filter(|&c| c != '*')
            .skip_while(|c| c.is_whitespace());
        key(stem).all(|t| line.next().is_some_and(|l| l.eq_ignore_ascii_case(&t)))
    }
}

const fn col(head: [&'static str; 2], width: usize, cell: Cell) -> Column {
    Column {
        head,
        width,
        cell,
        small_decimals: width.saturating_sub(2),
        lmbench3_only: false,
        differs: None,
    }
}

const fn differs(c: Column, how: &'static str) -> Column {
    Column {
        differs: Some(how),
        ..c
    }
}

const fn v3(c: Column) -> Column {
    Column {
        lmbench3_only: true,
        ..c
    }
}

const fn decimals(c: Column, small_decimals: usize) -> Column {
    Column {
        small_decimals,
        ..c
    }
}

use Cell::{Host, Mhz, Os, Repeat, Unused, Workload as W};

const HOST: Column = col(["Host", ""], 9, Host);
const OS: Column = col(["OS", ""], 13, Os);

const RPC_DIFFERS: &str = "hookprof's own ONC RPC null call over a socket: no libtirpc \
     (lmbench's client and svc_run server also poll() before each receive), no rpcbind";

/// Every summary section hookprof reads and writes, in lmbench's order.
pub static SECTIONS: &[Section] = &[
    Section {
        title: "Processor, Processes - times in microseconds - smaller is better",
        subtitle: None,
        family: Family::Processes,
        unit: Unit::Microseconds,
        columns: &[
            HOST,
            OS,
            col(["Mhz", ""], 4, Mhz),
            col(["null", "call"], 4, W("null_call")),
            col(["null", "I/O"], 4, W("null_io")),
            col(["", "stat"], 4, W("stat")),
            col(["open", "clos"], 4, W("open_close")),
            col(["selct", "TCP"], 5, W("select_tcp")),
            col(["sig", "inst"], 4, W("sig_install")),
            col(["sig", "hndl"], 4, W("sig_catch")),
            differs(
                col(["fork", "proc"], 4, W("fork_proc")),
                "the child leaves with _exit(), not exit(): lmbench's child also runs libc's \
                 exit-time code, whose writes to pages shared with the parent are copied \
                 (about a fifth of a small C process's fork+exit)",
            ),
            col(["exec", "proc"], 4, W("exec_proc")),
            col(["sh", "proc"], 4, W("sh_proc")),
        ],
    },
    Section {
        title: "Context switching - times in microseconds - smaller is better",
        subtitle: None,
        family: Family::ContextSwitch,
        unit: Unit::Microseconds,
        columns: &[
            HOST,
            OS,
            col(["2p/0K", "ctxsw"], 5, W("ctx_2p_0k")),
            col(["2p/16K", "ctxsw"], 6, W("ctx_2p_16k")),
            col(["2p/64K", "ctxsw"], 6, W("ctx_2p_64k")),
            col(["8p/16K", "ctxsw"], 6, W("ctx_8p_16k")),
            col(["8p/64K", "ctxsw"], 6, W("ctx_8p_64k")),
            col(["16p/16K", "ctxsw"], 7, W("ctx_16p_16k")),
            col(["16p/64K", "ctxsw"], 7, W("ctx_16p_64k")),
        ],
    },
    Section {
        title: "*Local* Communication latencies in microseconds - smaller is better",
        subtitle: None,
        family: Family::LocalLatency,
        unit: Unit::Microseconds,
        columns: &[
            HOST,
            OS,
            col(["2p/0K", "ctxsw"], 5, Repeat("ctx_2p_0k")),
            col(["Pipe", ""], 5, W("lat_pipe")),
            col(["AF", "UNIX"], 4, W("lat_unix")),
            col(["UDP", ""], 5, W("lat_udp")),
            differs(col(["RPC/", "UDP"], 5, W("lat_rpc_udp")), RPC_DIFFERS),
            col(["TCP", ""], 5, W("lat_tcp")),
            differs(col(["RPC/", "TCP"], 5, W("lat_rpc_tcp")), RPC_DIFFERS),
            differs(
                col(["TCP", "conn"], 4, W("lat_tcp_connect")),
                "listen backlog 65535, not 100: a full accept queue drops SYNs, and each \
                 dropped one costs lmbench a 1 s retransmit",
            ),
        ],
    },
    Section {
        title: "File & VM system latencies in microseconds - smaller is better",
        subtitle: None,
        family: Family::FileVm,
        unit: Unit::Microseconds,
        columns: &[
            HOST,
            OS,
            col(["0K File", "Create"], 6, W("fs_create_0k")),
            col(["", "Delete"], 6, W("fs_delete_0k")),
            col(["10K File", "Create"], 6, W("fs_create_10k")),
            col(["", "Delete"], 6, W("fs_delete_10k")),
            col(["Mmap", "Latency"], 7, W("mmap_latency")),
            differs(
                col(["Prot", "Fault"], 5, W("prot_fault")),
                "the signal delivery cost it subtracts is measured in the same process right \
                 before each sample's faults, where lmbench subtracts a catch cost measured once \
                 in another child: a difference of two totals five times its size, so 5% on \
                 either moves it 25%",
            ),
            // lmbench 2.0 prints page faults with five decimals, wider than the column.
            decimals(col(["Page", "Fault"], 5, W("page_fault")), 5),
            v3(col(["100fd", "selct"], 5, W("select_file"))),
        ],
    },
    Section {
        title: "*Local* Communication bandwidths in MB/s - bigger is better",
        subtitle: None,
        family: Family::Bandwidth,
        unit: Unit::MegabytesPerSecond,
        columns: &[
            HOST,
            OS,
            col(["Pipe", ""], 4, W("bw_pipe")),
            col(["AF", "UNIX"], 4, W("bw_unix")),
            col(["TCP", ""], 4, W("bw_tcp")),
            col(["File", "reread"], 6, W("bw_file_reread")),
            col(["Mmap", "reread"], 6, W("bw_mmap_reread")),
            col(["Bcopy", "(libc)"], 6, W("bw_bcopy_libc")),
            col(["Bcopy", "(hand)"], 6, W("bw_bcopy_hand")),
            col(["Mem", "read"], 4, W("bw_mem_read")),
            col(["Mem", "write"], 5, W("bw_mem_write")),
        ],
    },
    Section {
        title: "Memory latencies in nanoseconds - smaller is better",
        subtitle: Some("(WARNING - may not be correct, check graphs)"),
        family: Family::MemoryLatency,
        unit: Unit::Nanoseconds,
        columns: &[
            HOST,
            OS,
            col(["Mhz", ""], 4, Mhz),
            col(["L1 $", ""], 5, W("mem_l1")),
            col(["L2 $", ""], 6, W("mem_l2")),
            col(["Main mem", ""], 8, W("mem_main")),
            v3(col(["Rand mem", ""], 8, W("mem_rand"))),
            col(["Guesses", ""], 7, Unused),
        ],
    },
];

/// A value the way lmbench's summary prints it: values below 10 with the column's small
/// decimals (`0.39`, `4.4500`), larger ones with one decimal when it fits the column (`29.8`,
/// `142.5`), else a trailing point (`121.`), else as an integer (`1233`).
pub fn format_value(v: f64, column: &Column) -> String {
    if v.abs() < 10.0 {
        return format!("{v:.*}", column.small_decimals);
    }
    let one = format!("{v:.1}");
    if one.len() <= column.width {
        return one;
    }
    let point = format!("{v:.0}.");
    if point.len() <= column.width {
        return point;
    }
    format!("{v:.0}")
}

/// Reads a summary cell: `250.`, `.04`, `1233`, `2.00000`, and `1.5K` / `2M` suffixes. Anything
/// else is refused with the reason, as are values a results file cannot hold (negative, or too
/// large for a finite number), so an import never writes what `report` would refuse.
pub fn read_value(cell: &str) -> Result<f64, &'static str> {
    let (digits, scale) = match cell.as_bytes().last() {
        Some(b'K' | b'k') => (&cell[..cell.len() - 1], 1e3),
        Some(b'M') => (&cell[..cell.len() - 1], 1e6),
        _ => (cell, 1.0),
    };
    let unsigned = digits.strip_prefix('-').unwrap_or(digits);
    let plain = unsigned.chars().all(|c| c.is_ascii_digit() || c == '.')
        && unsigned.chars().filter(|&c| c == '.').count() <= 1
        && unsigned.chars().any(|c| c.is_ascii_digit());
    if !plain {
        return Err("is not a number");
    }
    if unsigned.len() != digits.len() {
        return Err("is negative (a time or a rate cannot be)");
    }
    let v = digits.parse::<f64>().map_err(|_| "is not a number")? * scale;
    if v.is_finite() {
        Ok(v)
    } else {
        Err("is too large for a finite number")
    }
}

/// Does `token` read as a summary value (a number, negative ones included)? Such tokens mark a
/// line as a table row rather than prose.
pub fn looks_numeric(token: &str) -> bool {
    let unsigned = token.strip_prefix('-').unwrap_or(token);
    !matches!(read_value(unsigned), Err("is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(width: usize) -> Column {
        col(["", ""], width, Unused)
    }

    #[test]
    fn values_print_like_lmbench() {
        for (v, width, shown) in [
            (0.39, 4, "0.39"),
            (29.8, 5, "29.8"),
            (121.0, 4, "121."),
            (1233.0, 4, "1233"),
            (1.16, 5, "1.160"),
            (4.45, 6, "4.4500"),
            (142.5, 6, "142.5"),
            (737.0, 4, "737."),
        ] {
            assert_eq!(format_value(v, &column(width)), shown, "{v} in {width}");
        }
        let page_fault = SECTIONS
            .iter()
            .flat_map(|s| s.columns.iter())
            .find(|c| matches!(c.cell, Cell::Workload("page_fault")))
            .unwrap();
        assert_eq!(format_value(2.0, page_fault), "2.00000");
    }

    #[test]
    fn cells_parse_with_suffixes_and_bare_points() {
        assert_eq!(read_value("250."), Ok(250.0));
        assert_eq!(read_value(".04"), Ok(0.04));
        assert_eq!(read_value("1.5K"), Ok(1500.0));
        assert_eq!(read_value("2M"), Ok(2e6));
        for not_a_number in [
            "2.4.9", "Linux", ".", "", "abc", "NaN", "inf", "1e400", "+1", "1.5KK", "0x10",
        ] {
            assert_eq!(
                read_value(not_a_number),
                Err("is not a number"),
                "{not_a_number}"
            );
        }
        assert!(read_value("-0.39").unwrap_err().starts_with("is negative"));
        assert!(looks_numeric("-0.39") && looks_numeric("121.") && !looks_numeric("NaN"));
        let huge = "9".repeat(400);
        assert_eq!(read_value(&huge), Err("is too large for a finite number"));
    }

    #[test]
    fn every_workload_has_one_home_column() {
        let mut names: Vec<&str> = SECTIONS
            .iter()
            .flat_map(|s| s.columns.iter())
            .filter_map(|c| match c.cell {
                Cell::Workload(n) => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(names.len(), 45);
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 45);
        let home = |w: &str| {
            SECTIONS.iter().find(|s| {
                s.columns
                    .iter()
                    .any(|c| matches!(c.cell, Cell::Workload(n) if n == w))
            })
        };
        assert!(home("ctx_2p_0k").is_some_and(|s| s.family == Family::ContextSwitch));
    }

    #[test]
    fn titles_match_posted_variants() {
        let local = &SECTIONS[2];
        assert!(
            local.is_title("*Local* Communication latencies in microseconds - smaller is better")
        );
        assert!(local.is_title("Local Communication latencies in microseconds"));
        assert!(!SECTIONS[4].is_title(local.title));
    }
}
