#!/bin/sh
# What bpftrace adds to a getppid loop when it does the job of hookprof's syscall probes (time
# each syscall of one process, per syscall number, on raw_syscalls), beside what hookprof's
# probes and an empty raw_tracepoint pair add (`hookprof calibrate`). Every figure is the
# loop's thread CPU time per call, median of ROUNDS; rounds alternate bare and bpftrace runs.
# Needs root, bpftrace (apt-get install bpftrace), a C compiler and tracefs
# (mount -t tracefs tracefs /sys/kernel/tracing). Usage: bench/bpftrace-compare.sh [HOOKPROF]
set -eu
HOOKPROF=${1:-target/release/hookprof}
ROUNDS=${ROUNDS:-5}
CALLS=${CALLS:-2000000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The loop: waits for a line on stdin (so bpftrace can attach to its pid first), then prints
# its thread CPU time per getppid call.
cat > "$dir/loop.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static long long cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
int main(int argc, char **argv) {
    long calls = atol(argv[1]);
    char line[8];
    if (!fgets(line, sizeof line, stdin)) return 1;
    long long start = cpu_ns();
    for (long i = 0; i < calls; i++) getppid();
    printf("%.1f\n", (double)(cpu_ns() - start) / calls);
    return 0;
}
C
cc -O2 -o "$dir/loop" "$dir/loop.c"

cat > "$dir/syscalls.bt" <<'BT'
tracepoint:raw_syscalls:sys_enter /pid == $1/ { @start[tid] = nsecs; @nr[tid] = args->id; }
tracepoint:raw_syscalls:sys_exit /@start[tid]/ {
    $ns = nsecs - @start[tid];
    @calls[@nr[tid]] = count(); @total_ns[@nr[tid]] = sum($ns); @hist[@nr[tid]] = hist($ns);
    delete(@start[tid]); delete(@nr[tid]);
}
BT

run_loop() { # run_loop TRACE: ns per call, with bpftrace on the loop's pid if TRACE=1
    mkfifo "$dir/go"
    "$dir/loop" "$CALLS" < "$dir/go" > "$dir/out" &
    pid=$!
    exec 3> "$dir/go"
    if [ "$1" = 1 ]; then
        bpftrace -B line "$dir/syscalls.bt" "$pid" > "$dir/bt.out" 2>&1 &
        bt=$!
        until grep -q Attaching "$dir/bt.out" 2>/dev/null; do sleep 0.2; done
        sleep 0.5
    fi
    echo go >&3
    exec 3>&-
    wait "$pid"
    if [ "$1" = 1 ]; then kill -INT "$bt"; wait "$bt" || true; fi
    rm -f "$dir/go"
    cat "$dir/out"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

: > "$dir/bare"; : > "$dir/traced"; : > "$dir/cal"
for _ in $(seq "$ROUNDS"); do
    run_loop 0 >> "$dir/bare"
    run_loop 1 >> "$dir/traced"
    "$HOOKPROF" calibrate --json > "$dir/cal.json"
    python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["empty_syscall_pair_ns"], c["syscall_probes_ns"], c["untracked_syscall_ns"])' "$dir/cal.json" >> "$dir/cal"
done
bare=$(median < "$dir/bare")
traced=$(median < "$dir/traced")
floor=$(cut -d' ' -f1 "$dir/cal" | median)
hookprof=$(cut -d' ' -f2 "$dir/cal" | median)
untracked=$(cut -d' ' -f3 "$dir/cal" | median)
awk -v b="$bare" -v t="$traced" -v f="$floor" -v h="$hookprof" -v u="$untracked" 'BEGIN {
    printf "getppid bare %.1f ns; bpftrace adds %.1f ns per syscall\n", b, t - b
    printf "hookprof calibrate: empty raw_tracepoint pair %.1f ns, hookprof %.1f ns (untracked %.1f ns)\n", f, h, u
    printf "hookprof / floor %.2fx, hookprof / bpftrace %.2fx\n", h / f, h / (t - b)
}'
