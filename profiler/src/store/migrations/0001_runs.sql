-- hookprof's results store, version 1. One text for SQLite and PostgreSQL alike: TEXT,
-- BIGINT and DOUBLE PRECISION columns only, no engine-specific types, so one set of queries
-- (and Grafana's or Otava's) reads either.

-- One row per recorded run (`run`, `stat`, each `ab` boot, `runs --add`): what to select on,
-- and the whole results document, which loads back as the file would.
CREATE TABLE runs (
    run_id           TEXT PRIMARY KEY,
    command          TEXT NOT NULL,   -- run, stat, ab, add
    started_at       BIGINT NOT NULL, -- Unix seconds, from the results
    stored_at        BIGINT NOT NULL, -- Unix seconds, when the store took it
    label            TEXT NOT NULL,
    complete         BIGINT NOT NULL, -- 1, or 0 for an interrupted run or failed workload
    source           TEXT NOT NULL,   -- hookprof, import:lmbench, import:time
    machine_id       TEXT NOT NULL,   -- /etc/machine-id of the recording machine
    hostname         TEXT NOT NULL,
    kernel_release   TEXT NOT NULL,
    kernel_version   TEXT NOT NULL,
    command_line     TEXT NOT NULL,   -- JSON array of the arguments
    lsm              TEXT NOT NULL,   -- active LSMs in call order, comma-separated
    lockdown         TEXT NOT NULL,
    cpu_model        TEXT NOT NULL,
    hookprof_version TEXT NOT NULL,
    options          TEXT NOT NULL,   -- JSON object, as in the results
    document         TEXT NOT NULL    -- the results JSON
);
CREATE INDEX runs_started_at ON runs (started_at);
CREATE INDEX runs_label ON runs (label);
CREATE INDEX runs_kernel_release ON runs (kernel_release);
CREATE INDEX runs_machine_id ON runs (machine_id);

-- `--meta KEY=VALUE` pairs (a git commit, a config name, a CI job).
CREATE TABLE run_meta (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);

-- Per run and workload: the clean metric summarised (NULL where there were no samples) and
-- `value`, the point `history` plots (the mean of the round medians, or the median of one
-- round).
CREATE TABLE workloads (
    run_id      TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    workload    TEXT NOT NULL,
    family      TEXT NOT NULL,
    unit        TEXT NOT NULL,
    samples     BIGINT NOT NULL,
    rounds      BIGINT NOT NULL,
    value       DOUBLE PRECISION,
    mean        DOUBLE PRECISION,
    median      DOUBLE PRECISION,
    stdev       DOUBLE PRECISION,
    min         DOUBLE PRECISION,
    max         DOUBLE PRECISION,
    probed_mean DOUBLE PRECISION,
    failure     TEXT,
    PRIMARY KEY (run_id, workload)
);

-- Per run, workload and attributed path (syscall, hook, LSM function, task path).
CREATE TABLE paths (
    run_id              TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    workload            TEXT NOT NULL,
    kind                TEXT NOT NULL, -- syscall, hook, lsm, task_path
    name                TEXT NOT NULL,
    parent              TEXT NOT NULL, -- '' when none
    lsm                 TEXT NOT NULL, -- '' when none
    calls_per_op        DOUBLE PRECISION NOT NULL,
    ns_per_call         DOUBLE PRECISION NOT NULL,
    ns_per_op           DOUBLE PRECISION NOT NULL,
    corrected_ns_per_op DOUBLE PRECISION NOT NULL,
    share               DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, workload, kind, name, parent)
);

-- Named baselines: `run --save-baseline NAME` replaces a name's runs, `--append-baseline`
-- adds to them (keeping the newest --baseline-keep).
CREATE TABLE baselines (
    name     TEXT NOT NULL,
    run_id   TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (name, run_id)
);
