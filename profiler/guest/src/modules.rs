//! The kernel modules the guest's 9p share needs, in the order insmod must load them. A Debian
//! kernel package ships no modules.dep (depmod writes it on install), and what is a module
//! moves between releases (6.12's 9pnet needs netfs; its virtio_pci is built in), so each
//! module's own `depends=` (in its .modinfo) says what goes first.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// What the share needs; whatever they depend on comes along.
const WANTED: &[&str] = &["virtio_pci", "9pnet_virtio", "9p"];
/// Deeper than any real chain: a cycle in broken metadata stops here.
const MAX_DEPTH: usize = 32;

pub struct Module {
    pub name: String,
    /// Uncompressed: busybox insmod cannot read compressed modules.
    pub data: Vec<u8>,
}

/// The modules under `tree` (`lib/modules/RELEASE/kernel`) that the 9p share needs, each after
/// its dependencies. One that is not there is taken as built in (or absent: init says so when
/// the mount fails).
pub fn for_9p(tree: &Path) -> Result<Vec<Module>> {
    let mut index = BTreeMap::new();
    index_tree(tree, &mut index)?;
    let mut order = Vec::new();
    for name in WANTED {
        visit(name, &index, &mut order, 0)?;
    }
    Ok(order)
}

fn visit(
    name: &str,
    index: &BTreeMap<String, PathBuf>,
    order: &mut Vec<Module>,
    depth: usize,
) -> Result<()> {
    if order.iter().any(|m| m.name == name) {
        return Ok(());
    }
    let Some(path) = index.get(name) else {
        return Ok(());
    };
    if depth > MAX_DEPTH {
        bail!("module dependencies of {} loop", path.display());
    }
    let data = read_module(path)?;
    for dependency in depends(&data) {
        visit(&dependency, index, order, depth + 1)?;
    }
    if !order.iter().any(|m| m.name == name) {
        order.push(Module {
            name: name.to_string(),
            data,
        });
    }
    Ok(())
}

/// Module name (as `depends=` writes it) to file, for every `.ko` and `.ko.xz` under `dir`.
fn index_tree(dir: &Path, index: &mut BTreeMap<String, PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            index_tree(&path, index)?;
            continue;
        }
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if let Some(stem) = file
            .strip_suffix(".ko")
            .or_else(|| file.strip_suffix(".ko.xz"))
        {
            index.insert(module_name(stem), path.clone());
        }
    }
    Ok(())
}

/// The kernel writes module names with `_` where file names may have `-`.
fn module_name(s: &str) -> String {
    s.replace('-', "_")
}

fn read_module(path: &Path) -> Result<Vec<u8>> {
    let data = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "xz") {
        return crate::kernel::unxz(&data)
            .with_context(|| format!("decompress {}", path.display()));
    }
    Ok(data)
}

/// The names in the module's `depends=` .modinfo entry.
fn depends(module: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"\0depends=";
    let Some(at) = module.windows(KEY.len()).position(|w| w == KEY) else {
        return Vec::new();
    };
    let rest = &module[at + KEY.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .filter(|d| !d.is_empty())
        .map(module_name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(depends: &str) -> Vec<u8> {
        format!("\x7fELF...\0license=GPL\0depends={depends}\0intree=Y\0").into_bytes()
    }

    #[test]
    fn dependencies_load_first_and_built_in_ones_are_skipped() {
        let tree = tempfile::tempdir().unwrap();
        let put = |path: &str, data: Vec<u8>| {
            let p = tree.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        };
        // as in 6.12: virtio_pci built in, 9pnet needs netfs
        put("net/9p/9pnet.ko", module("netfs"));
        put("net/9p/9pnet_virtio.ko", module("9pnet"));
        put("fs/9p/9p.ko", module("netfs,9pnet"));
        put("fs/netfs/netfs.ko", module(""));
        put("drivers/other/unrelated.ko", module(""));
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 1);
        std::io::Write::write_all(&mut xz, &module("")).unwrap();
        put("drivers/virtio/virtio_ring.ko.xz", xz.finish().unwrap());

        let order: Vec<String> = for_9p(tree.path())
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(order, ["netfs", "9pnet", "9pnet_virtio", "9p"]);
    }

    #[test]
    fn depends_reads_the_modinfo_entry() {
        assert_eq!(
            depends(&module("virtio,virtio_ring")),
            ["virtio", "virtio_ring"]
        );
        assert!(depends(&module("")).is_empty());
        assert!(depends(b"no modinfo here").is_empty());
        assert_eq!(depends(&module("snd-pcm")), ["snd_pcm"]);
    }
}
