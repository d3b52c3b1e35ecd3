-- Version 3: a path's share may be absent (NULL): a row that outgrew its workload's whole
-- has none. Rebuilt rather than altered: SQLite cannot drop a NOT NULL in place, and this
-- runs as it is on SQLite and PostgreSQL alike.
CREATE TABLE paths_v3 (
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
    share               DOUBLE PRECISION, -- NULL where the row outgrew its whole
    PRIMARY KEY (run_id, workload, kind, name, parent)
);
INSERT INTO paths_v3
    SELECT run_id, workload, kind, name, parent, lsm, calls_per_op, ns_per_call, ns_per_op,
           corrected_ns_per_op, share
    FROM paths;
DROP TABLE paths;
ALTER TABLE paths_v3 RENAME TO paths;
