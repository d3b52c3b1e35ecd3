-- Version 2: the order every selector reads runs in (start time, then id) as one index, so
-- `last:N` reads N index entries instead of sorting every run, and runs are found by id in
-- `baselines` (a pruned run's entries) without scanning it.
DROP INDEX runs_started_at;
CREATE INDEX runs_started_at_run_id ON runs (started_at, run_id);
CREATE INDEX baselines_run_id ON baselines (run_id);
