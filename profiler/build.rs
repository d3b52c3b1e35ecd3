// Builds ../profiler-ebpf for bpfel with the `debian` toolchain (linked by `cargo xtask setup`):
// it is a stable channel that ships a prebuilt `core` for bpfel, so no -Z build-std is needed.
fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=HOOKPROF_EBPF_TOOLCHAIN");
    let toolchain = std::env::var("HOOKPROF_EBPF_TOOLCHAIN").unwrap_or_else(|_| "debian".into());
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../profiler-ebpf");
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "profiler-ebpf",
            root_dir: root,
            ..Default::default()
        }],
        aya_build::Toolchain::Custom(&toolchain),
    )
}
