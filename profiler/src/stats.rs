//! Summary statistics (placeholder until the statistics issue lands).
