//! Facts about the machine a run was made on, recorded in every results file.
use crate::results::Environment;

pub fn detect() -> Environment {
    // SAFETY: an all-zero utsname is valid, and uname fills it.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    unsafe { libc::uname(&mut uts) };
    let field = |f: &[libc::c_char]| {
        // SAFETY: uname NUL-terminates each field within its array.
        unsafe { std::ffi::CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    Environment {
        kernel_release: field(&uts.release),
        kernel_version: field(&uts.version),
        machine: field(&uts.machine),
        active_lsms: active_lsms(),
        lockdown: lockdown_mode(),
        cpu_model: cpu_model(),
        cpus_online: cpus_online(),
        cpus_allowed: allowed_cpus().map_or(0, |cpus| cpus.len() as u32),
        hostname: field(&uts.nodename),
        hookprof_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        profiler_peak_rss_kib: None,
        profiler_peak_rss_by_phase: Vec::new(),
        machine_load: None,
        other_bpf_programs: None,
        namespaces: Some(*crate::machine::namespaces::Namespaces::detected()),
    }
}

/// The CPUs this process may run on (its affinity mask, which `taskset` and cpusets narrow): the
/// CPUs `--pin` may name.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: all-zero is a valid cpu_set_t; the out-pointer is valid for its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let max = 8 * size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET reads the set filled above, `cpu` below its bit count.
    Ok((0..max)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// The CPUs the machine has online (0 if the system cannot say).
fn cpus_online() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(0)
}

/// A `kB` field of /proc/self/status (VmHWM: the peak resident set), in KiB.
pub fn status_kib(field: &str) -> Option<u64> {
    status_field_kib(&std::fs::read_to_string("/proc/self/status").ok()?, field)
}

/// A `FIELD:   123 kB` line of a /proc status text, in KiB.
pub fn status_field_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// The active LSMs in call order, from securityfs (mounted on demand by `ensure_securityfs`).
pub fn active_lsms() -> Vec<String> {
    std::fs::read_to_string(SECURITYFS.to_string() + "/lsm")
        .map(|s| {
            s.trim()
                .split(',')
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

const SECURITYFS: &str = "/sys/kernel/security";

/// The bracketed word of `[none] integrity confidentiality`.
pub fn lockdown_mode() -> String {
    std::fs::read_to_string(SECURITYFS.to_string() + "/lockdown")
        .ok()
        .and_then(|s| parse_lockdown(&s))
        .unwrap_or_else(|| "unknown".into())
}

fn parse_lockdown(s: &str) -> Option<String> {
    let start = s.find('[')? + 1;
    let end = start + s[start..].find(']')?;
    Some(s[start..end].to_string())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| cpu_model_of(&s))
        .unwrap_or_else(|| "unknown".into())
}

/// x86's `model name`; arm64's cpuinfo has none, only the implementer and part numbers (MIDR),
/// which name a core design (0x41/0xd0c: Arm's Neoverse N1).
fn cpu_model_of(cpuinfo: &str) -> Option<String> {
    let field = |name: &str| {
        cpuinfo
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim().to_string())
    };
    field("model name").or_else(|| {
        let (implementer, part) = (field("CPU implementer")?, field("CPU part")?);
        Some(format!("implementer {implementer} part {part}"))
    })
}

/// Mounts securityfs if it is not (the LSM list and lockdown mode live there). A machine
/// without it mounted is common in containers and minimal VMs.
pub fn ensure_securityfs() {
    if std::path::Path::new(&(SECURITYFS.to_string() + "/lsm")).exists() {
        return;
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src, dst, fs) = (c("securityfs"), c(SECURITYFS), c("securityfs"));
    // SAFETY: valid C strings; a failure only leaves the LSM list unknown.
    unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_is_its_model_name_or_its_arm_implementer_and_part() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU\n";
        assert_eq!(cpu_model_of(x86).as_deref(), Some("Intel(R) Xeon(R) CPU"));
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n\
                   CPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n";
        assert_eq!(
            cpu_model_of(arm).as_deref(),
            Some("implementer 0x41 part 0xd0c")
        );
        assert_eq!(cpu_model_of("processor\t: 0\n"), None);
    }

    #[test]
    fn lockdown_mode_is_the_bracketed_word() {
        assert_eq!(
            parse_lockdown("none [integrity] confidentiality\n").as_deref(),
            Some("integrity")
        );
        assert_eq!(parse_lockdown("none integrity"), None);
    }
}
