#!/bin/sh
# Runs an already-built lmbench3 beside hookprof, metric by metric, and prints the side-by-side
# table of docs/lmbench.md. It never builds lmbench: build it yourself outside this repository
# (github.com/intel/lmbench, with the libtirpc lines of scripts/build enabled) and point LMBIN
# at its bin/<arch> directory.
#
# Each round runs, per metric, one lmbench command and one `hookprof run --probes none` of the
# same workload, both pinned to CPU 1 (lmbench's servers too), the order alternating from one
# metric and one round to the next. A round's value is lmbench's own result (the median of its
# 11 intervals) and the median of hookprof's 11 clean samples. Every value is appended to OUT, so
# rounds run in separate calls add up; the table is printed from all of OUT: the median over the
# rounds, the ratio of the medians (hookprof / lmbench, for bandwidths too) and the spread of the
# per-round ratios; `*` marks a ratio more than 10% from 1.
#
# With QUIET=1 every GROUP metrics (default 6) of a round run in a window with CPU 1 to
# themselves (bench/quiet-cpu1.sh, as root), so no window lasts more than a few minutes. REPS
# (default 11, lmbench's TRIES) is lmbench's -N and hookprof's --samples.
#
# Usage: LMBIN=DIR [HOOKPROF=hookprof] [ROUNDS=3] [REPS=11] [QUIET=1] [GROUP=6] \
#            [OUT=lmbench-beside.tsv] bench/lmbench-beside.sh [METRIC...]
#        (no METRIC: every comparable row)
#        OUT=FILE bench/lmbench-beside.sh --table       (only print the table of FILE)
# fs rows (as root) run each tool on a journaled ext4 of its own, made for the one command
# (a 512 MB loop image), as the page explains.
set -eu

ALL="null_call null_io stat open_close select_tcp select_file sig_install sig_catch
fork_proc exec_proc sh_proc ctx_2p_0k ctx_2p_16k ctx_2p_64k ctx_8p_16k ctx_8p_64k ctx_16p_16k
ctx_16p_64k lat_pipe lat_unix lat_udp lat_tcp lat_tcp_connect fs_create_0k fs_delete_0k
fs_create_10k fs_delete_10k mmap_latency prot_fault page_fault bw_pipe bw_unix bw_tcp
bw_file_reread bw_mmap_reread bw_bcopy_libc bw_bcopy_hand bw_mem_read bw_mem_write mem_l1 mem_l2"

HOOKPROF=${HOOKPROF:-hookprof}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-11}
GROUP=${GROUP:-6}
OUT=${OUT:-lmbench-beside.tsv}
HERE=$(cd "$(dirname "$0")" && pwd)
SELF="$HERE/$(basename "$0")"

# What lmbench's config-run would export on such a machine: no recalibration in every binary.
export ENOUGH=${ENOUGH:-5000} TIMING_O=${TIMING_O:-0} LOOP_O=${LOOP_O:-0}

table() {
    awk -F'\t' '
    function median(list, n,   a, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        key = $2 SUBSEP $1
        if (!($2 in unit)) { order[++m] = $2 }
        unit[$2] = $3
        if ($4 == "hookprof") h[key] = $5; else l[key] = $5
        rounds[$2] = rounds[$2] " " $1
    }
    END {
        print "| metric | unit | hookprof | lmbench3 | ratio of medians | per-round ratios | rounds |"
        print "|---|---|---|---|---|---|---|"
        within = 0; total = 0
        for (k = 1; k <= m; k++) {
            name = order[k]; hs = ""; ls = ""; lo = ""; hi = ""; n = 0
            split(rounds[name], rs, " "); delete seen
            for (i in rs) {
                r = rs[i]; if (r in seen) continue; seen[r] = 1
                key = name SUBSEP r
                if (!(key in h) || !(key in l) || l[key] <= 0) continue
                hs = hs " " h[key]; ls = ls " " l[key]; q = h[key] / l[key]; n++
                if (lo == "" || q < lo) lo = q
                if (hi == "" || q > hi) hi = q
            }
            if (n == 0) { printf "| %s | %s | | | not compared | | 0 |\n", name, unit[name]; continue }
            hm = median(hs); lm = median(ls); ratio = hm / lm
            mark = (ratio < 0.9 || ratio > 1.1) ? " *" : ""
            total++; if (mark == "") within++
            printf "| %s | %s | %.4g | %.4g | %.2f%s | %.2f-%.2f | %d |\n", name, unit[name], hm, lm, ratio, mark, lo, hi, n
        }
        printf "\n%d of %d rows within 10%%\n", within, total
    }' "$OUT"
}

if [ "${1:-}" = "--table" ]; then
    table
    exit 0
fi

: "${LMBIN:?set LMBIN to the bin/<arch> directory of a built lmbench3}"
[ -x "$LMBIN/lat_syscall" ] || { echo "no lat_syscall in LMBIN=$LMBIN" >&2; exit 2; }

# lmbench's process rows exec /tmp/hello (its script copies it there).
[ -x /tmp/hello ] || cp "$LMBIN/hello" /tmp/hello

cache_size() { # LEVEL TYPE-PATTERN: the size in bytes of CPU 0's cache of that level
    for d in /sys/devices/system/cpu/cpu0/cache/index*; do
        if [ "$(cat "$d/level")" = "$1" ] && grep -Eq "$2" "$d/type"; then
            numfmt --from=iec "$(cat "$d/size")"
            return
        fi
    done
    echo 0
}
last_level() {
    best=0
    for d in /sys/devices/system/cpu/cpu0/cache/index*; do
        l=$(cat "$d/level"); [ "$l" -ge "$best" ] && { best=$l; size=$(numfmt --from=iec "$(cat "$d/size")"); }
    done
    echo "$size"
}

# lmbench's value of METRIC in hookprof's unit, run in scratch dir $S.
lmbench() {
    m=$1; S=$2
    L() { p=$1; shift; taskset -c 1 "$LMBIN/$p" -N "$REPS" "$@" 2>&1; }
    micro() { sed -n 's/.*: \([0-9.e+-]*\) microseconds.*/\1/p' | tail -1; }
    second() { awk 'NF >= 2 { v = $2 } END { print v }'; }
    file() { "$LMBIN/lmdd" of="$S/FILE" move=8m fsync=1 print=0; }
    case $m in
    null_call) L lat_syscall null | micro ;;
    null_io)
        r=$(L lat_syscall read | micro); w=$(L lat_syscall write | micro)
        echo "$r $w" | awk '{ print ($1 + $2) / 2 }' ;;
    stat) printf 'hookprof\n' > "$S/target"; L lat_syscall stat "$S/target" | micro ;;
    open_close) printf 'hookprof\n' > "$S/target"; L lat_syscall open "$S/target" | micro ;;
    select_tcp) L lat_select -n 100 tcp | micro ;;
    select_file) (cd "$S" && L lat_select -n 100 file) | micro ;;
    sig_install) L lat_sig install | micro ;;
    sig_catch) L lat_sig catch | micro ;;
    prot_fault) L lat_sig prot "$LMBIN/lat_sig" | micro ;;
    fork_proc) L lat_proc fork | micro ;;
    exec_proc) L lat_proc exec | micro ;;
    sh_proc) L lat_proc shell | micro ;;
    ctx_*)
        n=$(echo "$m" | sed 's/ctx_\([0-9]*\)p_.*/\1/'); k=$(echo "$m" | sed 's/.*_\([0-9]*\)k$/\1/')
        L lat_ctx -s "$k" "$n" | awk -v n="$n" '$1 == n { print $2 }' ;;
    lat_pipe) L lat_pipe | micro ;;
    lat_unix) L lat_unix | micro ;;
    lat_udp | lat_tcp)
        taskset -c 1 "$LMBIN/$m" -s localhost; sleep 0.2
        v=$(L "$m" localhost | micro); "$LMBIN/$m" -S localhost >/dev/null 2>&1 || true; echo "$v" ;;
    lat_tcp_connect)
        taskset -c 1 "$LMBIN/lat_connect" -s localhost; sleep 0.2
        v=$(L lat_connect localhost | micro); "$LMBIN/lat_connect" -S localhost >/dev/null 2>&1 || true; echo "$v" ;;
    fs_*)
        size=$(echo "$m" | sed 's/.*_\([0-9]*k\)$/\1/'); col=3; case $m in fs_delete*) col=4 ;; esac
        # One lat_fs run gives a size's creates and deletes: the round's other row reuses it.
        # (-s 0 means every size to lat_fs; 0k comes first.)
        saved="$OUT.lat_fs.$round.$size"
        if [ ! -s "$saved" ]; then
            fs_mount "$S"; L lat_fs -s "$size" "$S/mnt" | awk -v s="$size" '$1 == s' > "$saved"; fs_umount "$S"
        fi
        awk -v c="$col" '{ print 1e6 / $c }' "$saved" ;;
    mmap_latency) file; L lat_mmap 8m "$S/FILE" | second ;;
    page_fault) file; L lat_pagefault "$S/FILE" | micro ;;
    bw_pipe) L bw_pipe | sed -n 's/.*: \([0-9.]*\) MB\/sec.*/\1/p' ;;
    bw_unix) L bw_unix | sed -n 's/.*: \([0-9.]*\) MB\/sec.*/\1/p' ;;
    bw_tcp)
        taskset -c 1 "$LMBIN/bw_tcp" -s localhost; sleep 0.2
        v=$(L bw_tcp -m 65536 localhost | second); "$LMBIN/bw_tcp" -S localhost >/dev/null 2>&1 || true; echo "$v" ;;
    bw_file_reread) file; L bw_file_rd 8m io_only "$S/FILE" | second ;;
    bw_mmap_reread) file; L bw_mmap_rd 8m mmap_only "$S/FILE" | second ;;
    bw_bcopy_libc | bw_bcopy_hand | bw_mem_read | bw_mem_write)
        # hookprof's buffer: twice the last-level cache, 8-512 MB, whole MB.
        mb=$(( $(last_level) * 2 / 1048576 )); [ $mb -lt 8 ] && mb=8; [ $mb -gt 512 ] && mb=512
        case $m in bw_bcopy_libc) op=bcopy ;; bw_bcopy_hand) op=fcp ;; bw_mem_read) op=frd ;; *) op=fwr ;; esac
        L bw_mem "${mb}m" $op | second ;;
    mem_l1 | mem_l2)
        # hookprof's chains: half of L1d; half of L2 (at least 4x L1d).
        l1=$(cache_size 1 'Data|Unified'); l2=$(cache_size 2 'Data|Unified')
        if [ $m = mem_l1 ]; then size=$((l1 / 2)); else size=$((l2 / 2)); [ $size -lt $((l1 * 4)) ] && size=$((l1 * 4)); fi
        mbs=$(awk -v s="$size" 'BEGIN { printf "%.5f", s / 1048576 }')
        max=$(awk -v s="$size" 'BEGIN { printf "%d", s / 1048576 + 1 }')
        L lat_mem_rd "$max" 128 | awk -v k="$mbs" '$1 == k { print $2 }' ;;
    *) echo "no lmbench command for $m" >&2; return 1 ;;
    esac
}

fs_mount() {
    truncate -s 512M "$1/img" && mkfs.ext4 -q -F "$1/img" && mkdir -p "$1/mnt" && mount -o loop "$1/img" "$1/mnt"
}
fs_umount() {
    umount "$1/mnt" && rm -f "$1/img"
}

hookprof_value() { # METRIC SCRATCH: the median of its clean samples
    m=$1; S=$2
    case $m in fs_*) fs_mount "$S"; export TMPDIR="$S/mnt" ;; *) export TMPDIR="$S" ;; esac
    "$HOOKPROF" run --probes none --pin 1 --workloads "$m" --rounds 1 --samples "$REPS" -q --no-store \
        -o "$S/h.json" >/dev/null
    case $m in fs_*) fs_umount "$S" ;; esac
    python3 -c '
import json, statistics, sys
w = json.load(open(sys.argv[1]))["workloads"][0]
print(w["unit"], statistics.median(w["clean"]))' "$S/h.json"
}

pair() { # METRIC ROUND INDEX: both tools, in the order this metric and round take
    m=$1; r=$2; i=$3; round=$r
    S=$(mktemp -d)
    if [ $(( (i + r) % 2 )) -eq 0 ]; then
        lv=$(lmbench "$m" "$S"); hv=$(hookprof_value "$m" "$S")
    else
        hv=$(hookprof_value "$m" "$S"); lv=$(lmbench "$m" "$S")
    fi
    rm -rf "$S"
    unit=${hv% *}
    [ -n "$lv" ] || { echo "$m: lmbench printed no value" >&2; lv=0; }
    printf '%s\t%s\t%s\tlmbench\t%s\n' "$r" "$m" "$unit" "$lv" >> "$OUT"
    printf '%s\t%s\t%s\thookprof\t%s\n' "$r" "$m" "$unit" "${hv#* }" >> "$OUT"
    echo "round $r $m: hookprof ${hv#* } lmbench $lv $unit" >&2
}

if [ "${1:-}" = "--group" ]; then # ROUND INDEX METRIC...: a run of pairs, the first at INDEX
    r=$2; i=$3; shift 3
    for m in "$@"; do pair "$m" "$r" "$i"; i=$((i + 1)); done
    exit 0
fi

METRICS=${*:-$ALL}
# Rounds continue after those already in OUT.
first=$(awk -F'\t' 'BEGIN { r = 0 } $1 > r { r = $1 } END { print r + 1 }' "$OUT" 2>/dev/null || echo 1)
r=$first
while [ $r -lt $((first + ROUNDS)) ]; do
    i=0
    set -- $METRICS
    while [ $# -gt 0 ]; do
        group=""; n=0
        while [ $# -gt 0 ] && [ $n -lt "$GROUP" ]; do group="$group $1"; shift; n=$((n + 1)); done
        if [ "${QUIET:-0}" = 1 ]; then
            "$HERE/quiet-cpu1.sh" env LMBIN="$LMBIN" HOOKPROF="$HOOKPROF" OUT="$OUT" REPS="$REPS" \
                "$SELF" --group $r $i $group
        else
            "$SELF" --group $r $i $group
        fi
        i=$((i + n))
    done
    r=$((r + 1))
done
table
