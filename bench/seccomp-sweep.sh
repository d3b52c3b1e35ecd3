#!/usr/bin/env bash
# seccomp-sweep.sh: hookprof's seccomp filter sweep on null_call against a plain C loop timing
# getppid under the same stacks of filters, back to back, as slopes (ns per filter).
#
#   sudo bench/quiet-cpu1.sh bench/seccomp-sweep.sh [VALUES] [PAIRS]   (VALUES 0,1,2,4,8; PAIRS 3)
#
# Each pair runs, in turn:
#   hookprof run --workloads null_call --probes none --rounds 6 --sweep seccomp-filters:getppid=VALUES
#   the C loop: per round, per value (in order), a child that installs that many filters and
#   times 2,000,000 getppid calls (CLOCK_MONOTONIC, the best of 3 batches)
# The C loop's filters do what hookprof's do: errno for acct, errno for getppid when its first
# argument is 0xfeedfacedeadbeef (which it never is, so the kernel's action cache cannot answer
# for getppid and runs every filter), allow otherwise. Its slope is fitted within rounds too.
# Prints each pair's two slopes and their ratio. Build: cc from apt (`cargo xtask setup`).
set -euo pipefail
VALUES=${1:-0,1,2,4,8}
PAIRS=${2:-3}
HOOKPROF=${HOOKPROF:-target/release/hookprof}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/loop.c" <<'C'
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif
#define ARG0_LO offsetof(struct seccomp_data, args[0])
#define ARG0_HI (offsetof(struct seccomp_data, args[0]) + 4)

static void install(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_acct, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getppid, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_HI),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xfeedfaceu, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LO),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xdeadbeefu, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) { perror("seccomp"); exit(1); }
}

static double ns_per_call(long calls) {
    double best = 1e18;
    for (int b = 0; b < 3; b++) {
        struct timespec s, e;
        clock_gettime(CLOCK_MONOTONIC, &s);
        for (long i = 0; i < calls; i++) syscall(SYS_getppid);
        clock_gettime(CLOCK_MONOTONIC, &e);
        double ns = ((e.tv_sec - s.tv_sec) * 1e9 + (e.tv_nsec - s.tv_nsec)) / calls;
        if (ns < best) best = ns;
    }
    return best;
}

int main(int argc, char **argv) {
    int rounds = atoi(argv[1]);
    for (int r = 0; r < rounds; r++)
        for (int a = 2; a < argc; a++) {
            int n = atoi(argv[a]);
            int fds[2];
            if (pipe(fds)) return 1;
            pid_t pid = fork();
            if (pid == 0) {
                prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                for (int i = 0; i < n; i++) install();
                double ns = ns_per_call(2000000);
                if (write(fds[1], &ns, sizeof ns) != sizeof ns) _exit(1);
                _exit(0);
            }
            double ns;
            if (read(fds[0], &ns, sizeof ns) != sizeof ns) return 1;
            waitpid(pid, NULL, 0);
            close(fds[0]); close(fds[1]);
            printf("%d %d %.2f\n", r, n, ns);
        }
    return 0;
}
C
cc -O2 -o "$WORK/loop" "$WORK/loop.c"

python3 - "$HOOKPROF" "$VALUES" "$PAIRS" "$WORK" <<'PY'
import json, subprocess, sys
hookprof, values, pairs, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
xs = [int(v) for v in values.split(",")]

def blocked_slope(points):
    """Least squares slope of (round, x, y) with each round's mean taken out."""
    rounds = sorted({r for r, _, _ in points})
    num = den = 0.0
    for r in rounds:
        own = [(x, y) for q, x, y in points if q == r]
        mx = sum(x for x, _ in own) / len(own)
        my = sum(y for _, y in own) / len(own)
        num += sum((x - mx) * (y - my) for x, y in own)
        den += sum((x - mx) ** 2 for x, _ in own)
    return num / den

print(f"{'pair':>4}  {'hookprof ns/filter':>18}  {'95%':>17}  {'C loop ns/filter':>16}  {'ratio':>6}")
for pair in range(1, pairs + 1):
    out = subprocess.run(
        [hookprof, "run", "--workloads", "null_call", "--probes", "none", "--rounds", "6",
         "-q", "--no-store", "--format", "json", "--sweep", f"seccomp-filters:getppid={values}"],
        check=True, capture_output=True, text=True).stdout
    line = json.loads(out)["workloads"][0]["op"]["line"]
    lines = subprocess.run([f"{work}/loop", "6", *map(str, xs)], check=True,
                           capture_output=True, text=True).stdout.split("\n")
    c = blocked_slope([tuple(map(float, l.split())) for l in lines if l])
    h = line["slope"]
    print(f"{pair:>4}  {h:>18.2f}  {line['slope_low']:>7.2f} to {line['slope_high']:>6.2f}  {c:>16.2f}  {h / c:>6.2f}")
PY
