//! The qemu test guest (see the VM issue): placeholder until the runner lands.
use anyhow::{bail, Result};

#[derive(clap::Args, Default)]
pub struct VmArgs {
    #[arg(trailing_var_arg = true)]
    pub command: Vec<String>,
}

#[derive(clap::Args, Default)]
pub struct VmTestArgs {}

pub fn vm(_args: &VmArgs) -> Result<i32> {
    bail!("the VM runner is not built yet")
}

pub fn vm_test(_args: &VmTestArgs) -> Result<i32> {
    bail!("the VM runner is not built yet")
}
