#!/bin/sh
# Runs a measurement with CPU 1 to itself: every other task that can move is confined to CPU 0
# (a cpuset) while COMMAND runs, then gets CPU 1 back. On a 2-vCPU machine shared with builds,
# side-by-side figures swing several-fold without it. Pin the measured tools to CPU 1 inside
# (`hookprof run --pin 1`, `taskset -c 1`). One window at a time (a lock). Needs root and the
# cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset.
# Usage: bench/quiet-cpu1.sh COMMAND [ARGS...]
set -eu
CG=/sys/fs/cgroup/cpuset
if [ ! -w "$CG/tasks" ]; then
    echo "quiet-cpu1: needs root and a cgroup v1 cpuset hierarchy at $CG" >&2
    exit 2
fi
exec 9>/run/hookprof-quiet-cpu1.lock
flock 9
mkdir -p "$CG/rest" "$CG/bench"
for g in rest bench; do echo 0 > "$CG/$g/cpuset.mems"; done
echo 0-1 > "$CG/rest/cpuset.cpus"
echo 1 > "$CG/bench/cpuset.cpus"
echo $$ > "$CG/bench/tasks"
# Per-CPU kernel threads refuse to move; everything else goes.
for t in $(cat "$CG/tasks"); do echo "$t" > "$CG/rest/tasks" 2>/dev/null || true; done
trap 'echo 0-1 > "$CG/rest/cpuset.cpus"' EXIT INT TERM
echo 0 > "$CG/rest/cpuset.cpus"
"$@"
