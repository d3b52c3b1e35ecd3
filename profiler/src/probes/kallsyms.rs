//! Kernel addresses to function names, from /proc/kallsyms (core kernel, modules, and JIT'd
//! BPF programs as `bpf_prog_<tag>_<name>`): a table of its text symbols, read once and kept
//! (`KeptTable`) where the same run names new addresses again and again.
use std::{
    collections::{HashMap, HashSet},
    io::{BufRead, BufReader, Read},
    ops::Range,
};

use anyhow::{Context, Result};

pub const KALLSYMS: &str = "/proc/kallsyms";

/// What an address is: the function it lies in, and how far into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub offset: u64,
}

/// Why kallsyms names nothing when it lists every address as 0, in one line naming the cause
/// (a namespace's, or kernel.kptr_restrict's) and its fix.
pub fn hidden_reason() -> String {
    let (cause, fix) = crate::machine::namespaces::kallsyms_hidden(KALLSYMS);
    format!(
        "{KALLSYMS} lists every address as 0 ({cause}): sampled kernel stacks cannot be \
         named; {fix}, or leave the stacks out"
    )
}

/// True when kallsyms lists no function at a nonzero address (kptr_restrict hides them from
/// this process): read until its first text symbol with an address, which is its first line
/// where they show.
pub fn addresses_hidden() -> Result<bool> {
    let file = std::fs::File::open(KALLSYMS).with_context(|| format!("read {KALLSYMS}"))?;
    let mut reader = BufReader::new(file);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).context("read kallsyms")? == 0 {
            return Ok(true);
        }
        if text_symbol(&line).is_some_and(|(start, _)| start != 0) {
            return Ok(false);
        }
    }
}

/// The names of the kernel's functions, whether or not its addresses are shown: what the
/// hook plan looks for beside BTF.
#[derive(Debug, Default)]
pub struct FunctionNames {
    names: HashSet<String>,
    /// Names the compiler made copies of (`apparmor_file_open` of `apparmor_file_open.isra.0`).
    copied: HashSet<String>,
}

impl FunctionNames {
    /// The running kernel's.
    pub fn read() -> Result<FunctionNames> {
        let file = std::fs::File::open(KALLSYMS).with_context(|| format!("read {KALLSYMS}"))?;
        FunctionNames::from_text(file)
    }

    pub fn from_text(text: impl Read) -> Result<FunctionNames> {
        let mut out = FunctionNames::default();
        for_each_text_symbol(text, |_, name| {
            match name.split_once('.') {
                Some((base, _)) => out.copied.insert(base.to_string()),
                None => out.names.insert(name.to_string()),
            };
            Ok(())
        })?;
        Ok(out)
    }

    pub fn has(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Whether only a compiler's copy of `name` is listed.
    pub fn only_copied(&self, name: &str) -> bool {
        !self.has(name) && self.copied.contains(name)
    }
}

/// Calls `each` with the start and name of every function (text) symbol of kallsyms text.
fn for_each_text_symbol(
    text: impl Read,
    mut each: impl FnMut(u64, &str) -> Result<()>,
) -> Result<()> {
    let mut reader = BufReader::new(text);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).context("read kallsyms")? == 0 {
            return Ok(());
        }
        if let Some((start, name)) = text_symbol(&line) {
            each(start, name)?;
        }
    }
}

/// A kallsyms line's start address and name, when it is a function's (text) symbol.
fn text_symbol(line: &str) -> Option<(u64, &str)> {
    let mut fields = line.split_whitespace();
    let (address, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
    if !matches!(kind, "t" | "T") {
        return None;
    }
    Some((u64::from_str_radix(address, 16).ok()?, name))
}

/// Every text symbol at one moment, sorted by address, for a reader that names new addresses
/// again and again (`top` every interval, `run` after each pass for the stacks alone and as it
/// ends): one pass over the file, then a binary search per address. About 5 MB for 121,000
/// symbols.
pub struct SymbolTable {
    /// (start, where its name begins in `names`, its length), by start.
    symbols: Vec<(u64, u32, u32)>,
    names: String,
    /// The kernel's own text, `_stext` to `_etext`: code that never moves while it runs.
    core_text: Option<Range<u64>>,
}

impl SymbolTable {
    /// The table read (again, where `previous` is the one it replaces: dropped first and its
    /// sizes reserved, so a reader that keeps a table never holds two, nor the ~4 MB a
    /// vector's doublings copy as it grows).
    pub fn reload(previous: Option<SymbolTable>) -> Result<SymbolTable> {
        let room = previous.map(|t| (t.symbols.len(), t.names.len()));
        let file = std::fs::File::open(KALLSYMS).with_context(|| format!("read {KALLSYMS}"))?;
        SymbolTable::from_text_sized(file, room.unwrap_or_default())
    }

    /// The table of any kallsyms text; refused where it lists every address as 0 (every
    /// symbol at 0 would name every address after the last one listed).
    pub fn from_text(text: impl Read) -> Result<SymbolTable> {
        SymbolTable::from_text_sized(text, (0, 0))
    }

    /// `from_text` with room for about `symbols` symbols and `names` bytes of names (and a
    /// little more: programs and modules come and go between reads).
    fn from_text_sized(text: impl Read, (symbols, names): (usize, usize)) -> Result<SymbolTable> {
        let mut table = SymbolTable {
            symbols: Vec::with_capacity(symbols + symbols / 32),
            names: String::with_capacity(names + names / 32),
            core_text: None,
        };
        let (mut stext, mut etext) = (None, None);
        for_each_text_symbol(text, |start, name| {
            match name {
                "_stext" => stext = Some(start),
                "_etext" => etext = Some(start),
                _ => {}
            }
            let at = u32::try_from(table.names.len()).context("kallsyms too large")?;
            table.names.push_str(name);
            table.symbols.push((start, at, name.len() as u32));
            Ok(())
        })?;
        anyhow::ensure!(
            table.symbols.iter().any(|s| s.0 != 0),
            "{}",
            hidden_reason()
        );
        table.symbols.sort_unstable_by_key(|s| s.0);
        // Kept over a run: the room reserved or the last doubling left is not.
        table.symbols.shrink_to_fit();
        table.names.shrink_to_fit();
        table.core_text = stext
            .zip(etext)
            .map(|(s, e)| s..e)
            .filter(|r| !r.is_empty());
        Ok(table)
    }

    /// Each of `addresses` named (`name`).
    pub fn names(&self, addresses: &[u64]) -> HashMap<u64, Symbol> {
        addresses.iter().map(|&a| (a, self.name(a))).collect()
    }

    /// What names `address`: the text symbol with the greatest start at or below it (hex when
    /// below every symbol). Kallsyms lists what existed when it was read: the code of something
    /// gone since (a BPF trampoline freed at a detach) is named after whatever lies below it.
    pub fn name(&self, address: u64) -> Symbol {
        match self.symbols.partition_point(|s| s.0 <= address) {
            0 => Symbol {
                name: format!("{address:#x}"),
                offset: 0,
            },
            i => {
                let (start, at, len) = self.symbols[i - 1];
                Symbol {
                    name: self.names[at as usize..(at + len) as usize].to_string(),
                    offset: address - start,
                }
            }
        }
    }
}

/// A [`SymbolTable`] kept over a run and read again only when it may be out of date for a
/// new address: the kernel's core text never moves, nor does a function `stays` names (a BPF
/// program loaded for the whole run), so an address in either is named from the table as it
/// was read; any other (a module's, a trampoline's, another program's: code that comes and
/// goes) has the table read again first, once for all the new addresses of a call. Code
/// loaded since the last read right after a program that stays is named after that program
/// until an address outside both reads the table again: good enough to count samples by
/// (`run`'s passes for the stacks alone stop by that count), not to attribute them.
#[derive(Default)]
pub struct KeptTable {
    table: Option<SymbolTable>,
}

impl KeptTable {
    /// Names into `named` each of `addresses` it does not hold yet.
    pub fn name_new(
        &mut self,
        addresses: &[u64],
        named: &mut HashMap<u64, Symbol>,
        stays: impl Fn(&str) -> bool,
    ) -> Result<()> {
        self.name_new_from(addresses, named, stays, SymbolTable::reload)
    }

    /// A fresh read, for naming everything at once, that replaces the table kept.
    pub fn take_fresh(&mut self) -> Result<SymbolTable> {
        SymbolTable::reload(self.table.take())
    }

    /// `name_new` with the table read again by `read` (given the one it replaces).
    fn name_new_from(
        &mut self,
        addresses: &[u64],
        named: &mut HashMap<u64, Symbol>,
        stays: impl Fn(&str) -> bool,
        read: impl FnOnce(Option<SymbolTable>) -> Result<SymbolTable>,
    ) -> Result<()> {
        let new: Vec<u64> = addresses
            .iter()
            .copied()
            .filter(|a| !named.contains_key(a))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let current = self.table.as_ref().is_some_and(|t| {
            new.iter().all(|&a| {
                t.core_text.as_ref().is_some_and(|core| core.contains(&a)) || stays(&t.name(a).name)
            })
        });
        if !current {
            self.table = Some(read(self.table.take())?);
        }
        let table = self.table.as_ref().expect("read above");
        named.extend(new.into_iter().map(|a| (a, table.name(a))));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff81001000 t do_syscall_64
ffffffff81002000 D some_data
ffffffff81003000 T security_file_open
ffffffffc0001000 t hook_file_open\t[landlock]
ffffffff81002800 t apparmor_file_open
";

    #[test]
    fn each_address_takes_the_text_symbol_that_starts_at_or_below_it() {
        let names = SymbolTable::from_text(TEXT.as_bytes()).unwrap().names(&[
            0xffffffff81001010,
            0xffffffff81002100, // past some_data, which is not text
            0xffffffff81002900, // a symbol listed out of address order
            0xffffffff81003000,
            0xffffffffc0001004,
            0x1000, // below every symbol
        ]);
        let name = |a: u64| names[&a].name.as_str();
        assert_eq!(name(0xffffffff81001010), "do_syscall_64");
        assert_eq!(names[&0xffffffff81001010].offset, 0x10);
        assert_eq!(name(0xffffffff81002100), "do_syscall_64");
        assert_eq!(name(0xffffffff81002900), "apparmor_file_open");
        assert_eq!(name(0xffffffff81003000), "security_file_open");
        assert_eq!(name(0xffffffffc0001004), "hook_file_open");
        assert_eq!(name(0x1000), "0x1000");
    }

    #[test]
    fn a_kept_table_is_read_again_only_for_a_new_address_in_code_that_comes_and_goes() {
        let text = format!(
            "{TEXT}ffffffff81004000 T _etext\n\
             ffffffffc0002000 t bpf_prog_0123456789abcdef_sys_enter\t[bpf]\n\
             ffffffffc0003000 t bpf_trampoline_6442\t[bpf]\n"
        );
        let mut kept = KeptTable::default();
        let mut named = HashMap::new();
        let mut reads = 0;
        let stays = |name: &str| name.ends_with("_sys_enter");
        let mut name = |kept: &mut KeptTable, named: &mut HashMap<u64, Symbol>, a: u64| {
            kept.name_new_from(&[a], named, stays, |previous| {
                // Each read after the first is handed the table it replaces.
                assert_eq!(previous.is_some(), reads > 0);
                reads += 1;
                SymbolTable::from_text(text.as_bytes())
            })
            .unwrap();
            reads
        };
        // The first call reads; core-text addresses after it do not, named or new.
        assert_eq!(name(&mut kept, &mut named, 0xffffffff81001010), 1);
        assert_eq!(name(&mut kept, &mut named, 0xffffffff81001010), 1);
        assert_eq!(name(&mut kept, &mut named, 0xffffffff81003004), 1);
        assert_eq!(named[&0xffffffff81003004].name, "security_file_open");
        // Nor does a new address in a program that stays.
        assert_eq!(name(&mut kept, &mut named, 0xffffffffc0002010), 1);
        assert_eq!(name(&mut kept, &mut named, 0xffffffffc0002020), 1);
        // A new address in a module or a trampoline reads again; once named, it does not.
        assert_eq!(name(&mut kept, &mut named, 0xffffffffc0001004), 2);
        assert_eq!(name(&mut kept, &mut named, 0xffffffffc0001004), 2);
        assert_eq!(named[&0xffffffffc0001004].name, "hook_file_open");
        assert_eq!(name(&mut kept, &mut named, 0xffffffffc0003010), 3);
        // Past _etext is not core text.
        assert_eq!(name(&mut kept, &mut named, 0xffffffff81004010), 4);
    }

    #[test]
    fn hidden_addresses_name_nothing() {
        let hidden = TEXT
            .lines()
            .map(|l| format!("0000000000000000{}\n", &l[16..]))
            .collect::<String>();
        let e = SymbolTable::from_text(hidden.as_bytes())
            .err()
            .expect("refused");
        assert!(e.to_string().contains("kptr_restrict"), "{e}");
    }

    #[test]
    fn the_running_kernel_names_its_own_syscall_entry() {
        // Root reads real addresses; others see zeros and are told so.
        let Some(line) = std::fs::read_to_string(KALLSYMS).ok().and_then(|t| {
            t.lines()
                .find(|l| l.ends_with(" do_syscall_64"))
                .map(String::from)
        }) else {
            return;
        };
        let address = u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap();
        match SymbolTable::reload(None) {
            Ok(table) => assert_eq!(table.name(address + 1).name, "do_syscall_64"),
            Err(e) => assert!(e.to_string().contains("kptr_restrict"), "{e}"),
        }
    }
}
