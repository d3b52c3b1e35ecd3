//! Which colour each frame of a flame graph takes, by what the function is: a `security_*` hook,
//! one LSM's function (`probes::catalog::lsm_of`, a colour per LSM), hookprof's own probes
//! (grey), user mode, or any other kernel function (sand tones, told apart by name). The colours
//! reach inferno through its palette map, which it consults before its own palettes.
use inferno::flamegraph::color::{Color, PaletteMap};

use crate::{
    attribution::is_probe_frame,
    probes::catalog::lsm_of,
    results::{self, PathKind},
};

/// One colour per path kind, on every chart of every page.
pub(crate) fn kind_colour(kind: PathKind) -> &'static str {
    match kind {
        PathKind::Syscall => "#4e79a7",
        PathKind::Hook => "#f28e2b",
        PathKind::Lsm => "#e15759",
        PathKind::TaskPath => "#59a14f",
        PathKind::Seccomp => "#76b7b2",
        PathKind::Audit => "#edc948",
        PathKind::Netfilter => "#9c755f",
        PathKind::BpfProgram => "#b07aa1",
    }
}

/// The residual (time outside every probed path), grey wherever it is drawn.
pub(crate) const RESIDUAL_COLOUR: &str = "#bbbbbb";

/// What a frame is, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A `security_*` hook (the LSM framework's dispatch).
    Hook,
    /// A function of the named LSM.
    Lsm(&'static str),
    /// hookprof's measuring programs and the kernel's way into them.
    Probe,
    /// A user-mode sample (user stacks are not walked).
    User,
    /// The stacks past the results' limit, summed.
    OtherStacks,
    Kernel,
}

impl FrameKind {
    pub fn of(frame: &str) -> FrameKind {
        if frame == results::USER_FRAME {
            FrameKind::User
        } else if frame == results::OTHER_STACKS {
            FrameKind::OtherStacks
        } else if is_probe_frame(frame) {
            FrameKind::Probe
        } else if frame.starts_with("security_") {
            FrameKind::Hook
        } else if let Some(lsm) = lsm_of(frame) {
            FrameKind::Lsm(lsm)
        } else {
            FrameKind::Kernel
        }
    }
}

/// Hooks orange, as every chart of the report draws them.
pub const HOOK: &str = "#f28e2b";
pub const PROBE: &str = "#a0a0a0";
pub const USER: &str = "#8cd17d";
pub const OTHER_STACKS: &str = "#e0e0e0";
/// The LSMs `lsm_of` knows, each its own colour; AppArmor red like the report's LSM rows.
const LSMS: &[(&str, &str)] = &[
    ("apparmor", "#e15759"),
    ("selinux", "#b07aa1"),
    ("landlock", "#ff9da7"),
    ("bpf", "#9c755f"),
    ("capability", "#76b7b2"),
    ("yama", "#edc948"),
    ("smack", "#d37295"),
    ("tomoyo", "#499894"),
    ("lockdown", "#a0cbe8"),
    ("safesetid", "#b6992d"),
    ("loadpin", "#79706e"),
    ("ipe", "#f1ce63"),
];
/// An LSM missing from `LSMS` (one `lsm_of` learns later) is still not a kernel frame.
const OTHER_LSM: &str = "#8f4f9f";

/// The colour of one frame, as `#rrggbb`.
pub fn hex(frame: &str) -> String {
    match FrameKind::of(frame) {
        FrameKind::Hook => HOOK.into(),
        FrameKind::Lsm(lsm) => lsm_colour(lsm).into(),
        FrameKind::Probe => PROBE.into(),
        FrameKind::User => USER.into(),
        FrameKind::OtherStacks => OTHER_STACKS.into(),
        FrameKind::Kernel => sand(frame),
    }
}

pub fn lsm_colour(lsm: &str) -> &'static str {
    LSMS.iter()
        .find(|(name, _)| *name == lsm)
        .map_or(OTHER_LSM, |(_, colour)| colour)
}

/// A light sand tone, lighter or darker by the name's hash, so neighbouring kernel frames stay
/// apart without drawing the eye from the hooks and LSMs.
fn sand(frame: &str) -> String {
    // FNV-1a: stable across runs and platforms, so a function keeps its tone.
    let hash = frame.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let shade = (hash % 29) as u8; // 0..=28
    let [r, g, b] = [0xc8_u8, 0xc0, 0xae].map(|c| c + shade);
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// Every frame of `stacks` (folded, `STACK COUNT` or `STACK BEFORE AFTER`) with its colour.
pub fn palette_map<'a>(stacks: impl IntoIterator<Item = &'a str>) -> PaletteMap {
    let mut map = PaletteMap::default();
    // The root bar ("all") has no function name.
    map.insert("", colour_of(OTHER_STACKS));
    for line in stacks {
        // The stack less its one or two counts (frames may hold spaces).
        let mut stack = line.trim_end();
        for _ in 0..2 {
            match stack.rsplit_once(' ') {
                Some((rest, n)) if n.parse::<f64>().is_ok() => stack = rest,
                _ => break,
            }
        }
        for frame in stack.split(';') {
            if map.get(frame).is_none() {
                map.insert(frame, colour_of(&hex(frame)));
            }
        }
    }
    map
}

fn colour_of(hex: &str) -> Color {
    inferno::flamegraph::color::parse_hex_color(hex).expect("a #rrggbb colour")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_lsms_probes_and_user_mode_each_take_their_colour() {
        assert_eq!(hex("security_file_open"), HOOK);
        assert_eq!(hex("apparmor_file_open"), "#e15759");
        assert_eq!(hex("hook_file_open"), "#ff9da7"); // landlock
        assert_eq!(hex("bpf_lsm_file_open"), "#9c755f");
        assert_eq!(hex("cap_capable"), "#76b7b2");
        assert_eq!(hex("bpf_prog_0123456789abcdef_sys_enter"), PROBE);
        assert_eq!(hex("bpf_trace_run2"), PROBE);
        assert_eq!(hex("[user]"), USER);
        assert_eq!(hex("[other stacks]"), OTHER_STACKS);
        // --inject's program is the workload's, not a probe: a kernel frame.
        assert_eq!(
            FrameKind::of("bpf_prog_0123456789abcdef_inject_file_o"),
            FrameKind::Kernel
        );
        // Every LSM lsm_of names has a colour of its own, none a hook's or a probe's.
        let colours: std::collections::HashSet<&str> = LSMS.iter().map(|(_, c)| *c).collect();
        assert_eq!(colours.len(), LSMS.len());
        assert!(!colours.contains(HOOK) && !colours.contains(PROBE) && !colours.contains(USER));
        assert_eq!(lsm_colour("newlsm"), OTHER_LSM);
    }

    #[test]
    fn other_kernel_frames_are_sand_tones_that_tell_names_apart() {
        let tones: std::collections::HashSet<String> = [
            "do_syscall_64",
            "__x64_sys_openat",
            "do_filp_open",
            "path_openat",
            "vfs_open",
        ]
        .iter()
        .map(|f| hex(f))
        .collect();
        assert!(tones.len() >= 3, "{tones:?}");
        for tone in &tones {
            let c = colour_of(tone);
            // Light, warm and low in saturation: red >= green >= blue, within 0x1a of each other.
            assert!(
                c.b >= 0xae && c.r >= c.g && c.g >= c.b && c.r - c.b <= 0x1a,
                "{tone}"
            );
        }
        assert_eq!(hex("vfs_open"), hex("vfs_open"));
    }

    #[test]
    fn the_palette_map_holds_every_frame_of_plain_and_differential_lines() {
        let map = palette_map([
            "a;security_file_open;apparmor_file_open 3",
            "[user] 2 5",
            "[other stacks] 1",
        ]);
        assert_eq!(map.get("security_file_open"), Some(colour_of(HOOK)));
        assert_eq!(map.get("apparmor_file_open"), Some(colour_of("#e15759")));
        assert_eq!(map.get("[user]"), Some(colour_of(USER)));
        assert!(map.get("a").is_some() && map.get("").is_some());
        assert_eq!(map.get("[other stacks]"), Some(colour_of(OTHER_STACKS)));
        assert_eq!(map.iter().count(), 6);
    }
}
