//! One pass over the kernel's raw BTF (the format of the kernel's Documentation/bpf/btf.rst)
//! for the few things the profiler asks of it: every function with its parameter count, a
//! struct's member offsets, a typedef's prototype. btf_rs resolves every type into hash maps
//! first, a quarter of a second and 40 MB for the ~150,000 types of a distribution kernel,
//! on the path of every command's set-up; this reads the records where they lie.
use anyhow::{bail, ensure, Context, Result};

const MAGIC: u16 = 0xeb9f;
const HEADER_LEN: usize = 24;
/// A type's common record: name offset, info (kind, vlen, kind_flag), size or type.
const RECORD_LEN: usize = 12;

// The kinds this reads by name (`BTF_KIND_*`).
const PTR: u8 = 2;
const STRUCT: u8 = 4;
const TYPEDEF: u8 = 8;
const VOLATILE: u8 = 9;
const CONST: u8 = 10;
const RESTRICT: u8 = 11;
const FUNC: u8 = 12;
const FUNC_PROTO: u8 = 13;
const TYPE_TAG: u8 = 18;

/// Raw BTF with each type's record located (type ids from 1).
pub struct RawBtf<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    little: bool,
    /// Where each type's record starts in `types`, by id (index 0 is the void type's, unused).
    at: Vec<u32>,
}

/// One type's common record.
#[derive(Clone, Copy)]
struct Record {
    name_off: u32,
    kind: u8,
    vlen: usize,
    kind_flag: bool,
    size_or_type: u32,
    /// Where what follows the common record starts in `types`.
    tail: usize,
}

impl<'a> RawBtf<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<RawBtf<'a>> {
        ensure!(bytes.len() >= HEADER_LEN, "BTF shorter than its header");
        let little = match [bytes[0], bytes[1]] {
            b if u16::from_le_bytes(b) == MAGIC => true,
            b if u16::from_be_bytes(b) == MAGIC => false,
            _ => bail!("not BTF (no magic number)"),
        };
        let word = |at: usize| read_u32(bytes, at, little);
        let header_len = word(4)? as usize;
        let section = |off: usize, len: usize| -> Result<&'a [u8]> {
            let start = header_len.checked_add(off).context("BTF section offset")?;
            let end = start.checked_add(len).context("BTF section length")?;
            bytes.get(start..end).context("BTF section past the end")
        };
        let types = section(word(8)? as usize, word(12)? as usize)?;
        let strings = section(word(16)? as usize, word(20)? as usize)?;
        let mut btf = RawBtf {
            types,
            strings,
            little,
            at: vec![0],
        };
        let mut at = 0;
        while at < types.len() {
            btf.at.push(u32::try_from(at).context("BTF over 4 GB")?);
            let r = btf.record_at(at)?;
            at = r.tail + r.tail_len()?;
        }
        Ok(btf)
    }

    /// Every function's name with its parameter count (None where its prototype is not one).
    pub fn functions(&self) -> Result<Vec<(&'a str, Option<usize>)>> {
        let mut functions = Vec::new();
        for id in 1..self.at.len() {
            let r = self.record(id as u32)?;
            if r.kind != FUNC {
                continue;
            }
            let proto = self.record(r.size_or_type).ok();
            let params = proto.filter(|p| p.kind == FUNC_PROTO).map(|p| p.vlen);
            functions.push((self.name(r.name_off)?, params));
        }
        Ok(functions)
    }

    /// The byte offset of each of `members` in the first struct named `name` that has
    /// members, in `members`' order (None for one it does not have).
    pub fn member_offsets(&self, name: &str, members: &[&str]) -> Result<Vec<Option<u32>>> {
        let mut found = vec![None; members.len()];
        let Some(s) = self.first_named(name, |r| r.kind == STRUCT && r.vlen > 0)? else {
            return Ok(found);
        };
        for m in 0..s.vlen {
            let at = s.tail + m * 12;
            let member = self.name(self.word(at)?)?;
            let offset = self.word(at + 8)?;
            // With kind_flag the offset's low 24 bits are the bit offset (a bitfield's size
            // above them).
            let bits = if s.kind_flag {
                offset & 0xff_ffff
            } else {
                offset
            };
            for (i, wanted) in members.iter().enumerate() {
                if found[i].is_none() && member == *wanted {
                    found[i] = Some(bits / 8);
                }
            }
        }
        Ok(found)
    }

    /// The parameter count of the prototype the typedef `name` stands for (through pointers
    /// and qualifiers), if it stands for one.
    pub fn typedef_params(&self, name: &str) -> Result<Option<usize>> {
        let Some(mut r) = self.first_named(name, |r| r.kind == TYPEDEF)? else {
            return Ok(None);
        };
        // A chain of references ends at a prototype or elsewhere; ids only grow by so much.
        for _ in 0..self.at.len() {
            match r.kind {
                FUNC_PROTO => return Ok(Some(r.vlen)),
                PTR | TYPEDEF | VOLATILE | CONST | RESTRICT | TYPE_TAG => {
                    r = match self.record(r.size_or_type) {
                        Ok(next) => next,
                        Err(_) => return Ok(None),
                    }
                }
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    fn first_named(&self, name: &str, keep: impl Fn(&Record) -> bool) -> Result<Option<Record>> {
        for id in 1..self.at.len() {
            let r = self.record(id as u32)?;
            if keep(&r) && self.name(r.name_off)? == name {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }

    fn record(&self, id: u32) -> Result<Record> {
        let at = *self
            .at
            .get(id as usize)
            .filter(|_| id > 0)
            .with_context(|| format!("BTF type id {id} out of range"))?;
        self.record_at(at as usize)
    }

    fn record_at(&self, at: usize) -> Result<Record> {
        let info = self.word(at + 4)?;
        Ok(Record {
            name_off: self.word(at)?,
            kind: ((info >> 24) & 0x1f) as u8,
            vlen: (info & 0xffff) as usize,
            kind_flag: info >> 31 == 1,
            size_or_type: self.word(at + 8)?,
            tail: at + RECORD_LEN,
        })
    }

    fn word(&self, at: usize) -> Result<u32> {
        read_u32(self.types, at, self.little)
    }

    fn name(&self, off: u32) -> Result<&'a str> {
        let rest = self
            .strings
            .get(off as usize..)
            .context("BTF name offset past the strings")?;
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .context("BTF name without its end")?;
        std::str::from_utf8(&rest[..end]).context("BTF name not UTF-8")
    }
}

impl Record {
    /// The bytes that follow the common record for this kind.
    fn tail_len(&self) -> Result<usize> {
        Ok(match self.kind {
            // INT, VAR, DECL_TAG: one word; ARRAY: three.
            1 | 14 | 17 => 4,
            3 => 12,
            // STRUCT, UNION, DATASEC, ENUM64: three words a member; ENUM, FUNC_PROTO: two.
            4 | 5 | 15 | 19 => 12 * self.vlen,
            6 | 13 => 8 * self.vlen,
            // PTR, FWD, TYPEDEF, the qualifiers, FUNC, FLOAT, TYPE_TAG: nothing.
            2 | 7..=12 | 16 | 18 => 0,
            kind => bail!("BTF kind {kind} unknown to this build: its records cannot be skipped"),
        })
    }
}

fn read_u32(bytes: &[u8], at: usize, little: bool) -> Result<u32> {
    let b: [u8; 4] = bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .context("BTF record past the end")?;
    Ok(if little {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian BTF of `types` (each a common record and its tail) and `strings`.
    fn btf(types: &[Vec<u32>], strings: &[u8]) -> Vec<u8> {
        let types: Vec<u8> = types
            .iter()
            .flatten()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let mut out = Vec::new();
        out.extend(MAGIC.to_le_bytes());
        out.extend([1, 0]);
        for w in [
            HEADER_LEN as u32,
            0,
            types.len() as u32,
            types.len() as u32,
            strings.len() as u32,
        ] {
            out.extend(w.to_le_bytes());
        }
        out.extend(types);
        out.extend(strings);
        out
    }

    fn info(kind: u32, vlen: u32, kind_flag: bool) -> u32 {
        (u32::from(kind_flag) << 31) | (kind << 24) | vlen
    }

    #[test]
    fn functions_members_and_a_typedef_s_prototype_are_read_where_they_lie() {
        // Names at: 1 "f", 3 "task_struct", 15 "pid", 19 "__state", 27 "tp".
        let strings = b"\0f\0task_struct\0pid\0__state\0tp\0";
        let types = [
            vec![0, info(1, 0, false), 4, 32], // 1: int, its encoding word
            vec![0, info(13, 2, false), 1, 0, 1, 0, 1], // 2: proto (int, int)
            vec![1, info(12, 0, false), 2],    // 3: func f
            vec![3, info(4, 2, true), 8, 15, 1, 64, 19, 1, (4 << 24) | 96], // 4: struct
            vec![0, info(2, 0, false), 2],     // 5: pointer to 2
            vec![27, info(8, 0, false), 5],    // 6: typedef tp
        ];
        let bytes = btf(&types, strings);
        let raw = RawBtf::parse(&bytes).unwrap();
        assert_eq!(raw.functions().unwrap(), [("f", Some(2))]);
        assert_eq!(
            raw.member_offsets("task_struct", &["pid", "__state", "state"])
                .unwrap(),
            [Some(8), Some(12), None]
        );
        assert_eq!(raw.typedef_params("tp").unwrap(), Some(2));
        assert_eq!(raw.typedef_params("f").unwrap(), None);
        // Any byte spoiled is read as an error or as other values, never a panic.
        for at in 0..bytes.len() {
            for spoiled in [0, 0x7f, 0xff] {
                let mut bad = bytes.clone();
                bad[at] = spoiled;
                if let Ok(raw) = RawBtf::parse(&bad) {
                    let _ = raw.functions();
                    let _ = raw.member_offsets("task_struct", &["pid"]);
                    let _ = raw.typedef_params("tp");
                }
            }
        }
    }

    /// The running kernel's BTF, read as btf_rs reads it: the same functions with the same
    /// parameter counts.
    #[test]
    fn the_kernel_s_functions_are_btf_rs_s() {
        let path = super::super::btf::VMLINUX_BTF;
        let bytes = std::fs::read(path).expect("the kernel's BTF (CONFIG_DEBUG_INFO_BTF)");
        let raw = RawBtf::parse(&bytes).unwrap();
        let mut ours: Vec<(String, Option<usize>)> = raw
            .functions()
            .unwrap()
            .into_iter()
            .map(|(n, p)| (n.to_string(), p))
            .collect();
        let btf = btf_rs::Btf::from_bytes(&bytes).unwrap();
        let mut theirs = Vec::new();
        for id in 1.. {
            let Ok(t) = btf.resolve_type_by_id(id) else {
                break;
            };
            if let btf_rs::Type::Func(f) = &t {
                let params = match btf.resolve_chained_type(f) {
                    Ok(btf_rs::Type::FuncProto(p)) => Some(p.parameters.len()),
                    _ => None,
                };
                theirs.push((btf.resolve_name(f).unwrap(), params));
            }
        }
        for list in [&mut ours, &mut theirs] {
            list.sort_unstable();
            list.dedup_by(|a, b| a.0 == b.0);
        }
        assert!(ours.len() > 10_000, "{} functions", ours.len());
        assert_eq!(ours, theirs);
    }
}
