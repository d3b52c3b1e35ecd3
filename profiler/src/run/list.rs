//! `run --list`: the workloads, one line each, with their family, unit, suite and what they
//! measure.
use crate::workloads;

pub(super) fn print_list() -> Result<(), crate::stdio::WriteFailed> {
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_header(["workload", "family", "unit", "suite", "what it measures"]);
    for spec in workloads::registry() {
        table.add_row([
            spec.name,
            spec.family.key(),
            spec.metric.unit().symbol(),
            &format!("{:?}", spec.suite).to_lowercase(),
            spec.description,
        ]);
    }
    crate::stdio::print(format!("{table}\n"))
}
