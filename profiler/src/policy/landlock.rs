//! `--policy landlock:FILE`: a Landlock ruleset of one or more layers, as JSON:
//!
//! ```json
//! { "layers": [
//!     { "handled": "all",
//!       "allow": [ { "path": "/usr", "access": ["read_file", "read_dir", "execute"] },
//!                  { "path": "/tmp", "access": "all" } ] },
//!     { "handled": ["write_file", "make_reg"],
//!       "allow": [ { "path": "/tmp", "access": "all" } ] } ] }
//! ```
//!
//! Each layer is a ruleset of its own, enforced on top of the ones before it (a Landlock
//! domain per layer), as nested sandboxes stack. `handled` lists the access rights the layer
//! restricts; every other right stays allowed. `access` grants rights beneath a path; a right
//! the layer does not handle is allowed anyway, so it is left out of the rule. Names: the
//! kernel's `LANDLOCK_ACCESS_FS_*` in lower case (execute, write_file, read_file, read_dir,
//! remove_dir, remove_file, make_char, make_dir, make_reg, make_sock, make_fifo, make_block,
//! make_sym, refer, truncate, ioctl_dev), or the groups `read` (execute, read_file,
//! read_dir), `write` (every other right) and `all`. Rights this kernel's Landlock does not
//! know are dropped (best effort); a kernel without Landlock is an error.
use anyhow::{bail, Context, Result};
use landlock::{
    Access, AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, ABI,
};
use serde::{Deserialize, Serialize};

use super::OneOrMany;

/// The newest ABI whose filesystem rights this file names; `all` means these.
const KNOWN_ABI: ABI = ABI::V5;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandlockRuleset {
    layers: Vec<Layer>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Layer {
    handled: OneOrMany,
    #[serde(default)]
    allow: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    path: String,
    access: OneOrMany,
}

impl LandlockRuleset {
    pub fn from_json(text: &str) -> Result<LandlockRuleset> {
        let ruleset: LandlockRuleset = serde_json::from_str(text).context("not a ruleset")?;
        if ruleset.layers.is_empty() {
            bail!("a ruleset needs at least one layer");
        }
        for (i, layer) in ruleset.layers.iter().enumerate() {
            let handled = rights(&layer.handled).with_context(|| format!("layer {}", i + 1))?;
            if handled.is_empty() {
                bail!("layer {}: 'handled' names no access right", i + 1);
            }
            for rule in &layer.allow {
                rights(&rule.access)
                    .with_context(|| format!("layer {}, rule for {}", i + 1, rule.path))?;
            }
        }
        Ok(ruleset)
    }

    /// `2 layers, 15 rules`.
    pub fn summary(&self) -> String {
        let rules: usize = self.layers.iter().map(|l| l.allow.len()).sum();
        format!(
            "{} layer{}, {rules} rule{}",
            self.layers.len(),
            if self.layers.len() == 1 { "" } else { "s" },
            if rules == 1 { "" } else { "s" }
        )
    }

    pub fn record(&self) -> serde_json::Value {
        let layers: Vec<_> = self
            .layers
            .iter()
            .map(|l| {
                let allow: Vec<_> = l
                    .allow
                    .iter()
                    .map(|r| serde_json::json!({ "path": r.path, "access": r.access.names() }))
                    .collect();
                serde_json::json!({ "handled": l.handled.names(), "allow": allow })
            })
            .collect();
        serde_json::json!({ "layers": layers })
    }

    /// Every rule's path must exist: Landlock grants rights beneath an open file.
    pub fn check(&self) -> Result<()> {
        for rule in self.layers.iter().flat_map(|l| &l.allow) {
            std::fs::metadata(&rule.path).with_context(|| format!("rule path {}", rule.path))?;
        }
        Ok(())
    }

    /// Enforces each layer in turn on the calling thread (no_new_privs is set first, as
    /// Landlock requires of a task without CAP_SYS_ADMIN).
    pub fn apply(&self) -> Result<()> {
        for (i, layer) in self.layers.iter().enumerate() {
            let handled = rights(&layer.handled)?;
            let mut ruleset = Ruleset::default()
                .handle_access(handled)
                .context("handle_access")?
                .create()
                .context("landlock_create_ruleset")?;
            for rule in &layer.allow {
                let granted = rights(&rule.access)? & handled;
                if granted.is_empty() {
                    continue;
                }
                let fd = PathFd::new(&rule.path).with_context(|| format!("open {}", rule.path))?;
                ruleset = ruleset
                    .add_rule(PathBeneath::new(fd, granted))
                    .with_context(|| format!("landlock_add_rule {}", rule.path))?;
            }
            let status = ruleset.restrict_self().context("landlock_restrict_self")?;
            if status.ruleset == RulesetStatus::NotEnforced {
                bail!(
                    "layer {}: the kernel enforced none of it (Landlock missing or disabled)",
                    i + 1
                );
            }
        }
        Ok(())
    }
}

/// The access rights a list of names stands for.
fn rights(names: &OneOrMany) -> Result<BitFlags<AccessFs>> {
    let mut all = BitFlags::EMPTY;
    for name in names.names() {
        all |= right(name)?;
    }
    Ok(all)
}

fn right(name: &str) -> Result<BitFlags<AccessFs>> {
    Ok(match name {
        "all" => AccessFs::from_all(KNOWN_ABI),
        "read" => AccessFs::from_read(KNOWN_ABI),
        "write" => AccessFs::from_write(KNOWN_ABI),
        "execute" => AccessFs::Execute.into(),
        "write_file" => AccessFs::WriteFile.into(),
        "read_file" => AccessFs::ReadFile.into(),
        "read_dir" => AccessFs::ReadDir.into(),
        "remove_dir" => AccessFs::RemoveDir.into(),
        "remove_file" => AccessFs::RemoveFile.into(),
        "make_char" => AccessFs::MakeChar.into(),
        "make_dir" => AccessFs::MakeDir.into(),
        "make_reg" => AccessFs::MakeReg.into(),
        "make_sock" => AccessFs::MakeSock.into(),
        "make_fifo" => AccessFs::MakeFifo.into(),
        "make_block" => AccessFs::MakeBlock.into(),
        "make_sym" => AccessFs::MakeSym.into(),
        "refer" => AccessFs::Refer.into(),
        "truncate" => AccessFs::Truncate.into(),
        "ioctl_dev" => AccessFs::IoctlDev.into(),
        other => bail!(
            "unknown access right '{other}'; valid: all, read, write, execute, write_file, \
             read_file, read_dir, remove_dir, remove_file, make_char, make_dir, make_reg, \
             make_sock, make_fifo, make_block, make_sym, refer, truncate, ioctl_dev"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_LAYERS: &str = r#"{ "layers": [
        { "handled": "all",
          "allow": [ { "path": "/usr", "access": ["read_file", "read_dir", "execute"] },
                     { "path": "/tmp", "access": "all" } ] },
        { "handled": ["write_file", "make_reg"],
          "allow": [ { "path": "/tmp", "access": "write" } ] } ] }"#;

    #[test]
    fn a_two_layer_ruleset_parses_with_names_and_groups() {
        let r = LandlockRuleset::from_json(TWO_LAYERS).unwrap();
        assert_eq!(r.summary(), "2 layers, 3 rules");
        assert_eq!(r.record()["layers"][1]["handled"][1], "make_reg");
        assert_eq!(
            rights(&r.layers[0].allow[0].access).unwrap(),
            AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute
        );
        assert_eq!(
            right("read").unwrap() | right("write").unwrap(),
            right("all").unwrap()
        );
        assert!(right("write").unwrap().contains(AccessFs::Truncate));
    }

    #[test]
    fn malformed_rulesets_say_what_is_wrong() {
        let err = |s: &str| format!("{:#}", LandlockRuleset::from_json(s).unwrap_err());
        assert!(err("{").contains("not a ruleset"));
        assert!(err(r#"{"layers": []}"#).contains("at least one layer"));
        assert!(err(r#"{"layers": [{"handled": []}]}"#).contains("names no access right"));
        let e =
            err(r#"{"layers": [{"handled": "all", "allow": [{"path": "/", "access": "rw"}]}]}"#);
        assert!(
            e.contains("rule for /") && e.contains("unknown access right 'rw'"),
            "{e}"
        );
        assert!(err(r#"{"layers": [{"handled": "all", "rules": []}]}"#).contains("unknown field"));
    }

    #[test]
    fn a_missing_rule_path_fails_the_check() {
        let r = LandlockRuleset::from_json(
            r#"{"layers": [{"handled": "all", "allow": [{"path": "/nonexistent/x", "access": "read"}]}]}"#,
        )
        .unwrap();
        assert!(format!("{:#}", r.check().unwrap_err()).contains("/nonexistent/x"));
    }
}
