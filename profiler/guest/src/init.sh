#!/bin/busybox sh
# PID 1 of the hookprof test guest: mount what the kernel-level tests need, load 9p, run
# /payload/run.sh as root, report its exit code on the console (and in the share), power off.
/bin/busybox --install -s
export PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin HOME=/root

mnt() { mkdir -p "$3"; mount -t "$1" "$2" "$3" || echo "hookprof-vm: cannot mount $1 on $3"; }
mnt proc proc /proc
mnt sysfs sysfs /sys
mnt devtmpfs devtmpfs /dev
mnt devpts devpts /dev/pts
mnt tmpfs tmpfs /dev/shm
mnt securityfs securityfs /sys/kernel/security
mnt tracefs tracefs /sys/kernel/tracing
mnt debugfs debugfs /sys/kernel/debug
mnt bpf bpf /sys/fs/bpf
mnt cgroup2 cgroup2 /sys/fs/cgroup
# The root filesystem is already a tmpfs (no root= is given): /tmp stays on it, since a mount
# there would hide host files copied in at their own path, such as a checkout under /tmp.
mkdir -p /tmp && chmod 1777 /tmp
# BPF maps of kernels before 5.11 are charged to RLIMIT_MEMLOCK
ulimit -l unlimited
hostname -F /etc/hostname
ip link set lo up 2>/dev/null

# the Debian kernel has virtio-pci and 9p as modules; this is their dependency order
for m in $(cat /lib/modules/order); do
    insmod "/lib/modules/$m" || echo "hookprof-vm: insmod $m failed"
done
share=
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 host0 /mnt/host; then
    share=/mnt/host
    export VMTEST_SHARE=/mnt/host
else
    echo "hookprof-vm: cannot mount the 9p share on /mnt/host"
fi

echo "hookprof-vm: kernel $(uname -r), lsm $(cat /sys/kernel/security/lsm), up $(cut -d' ' -f1 /proc/uptime) s"
cd /root
/bin/sh /payload/run.sh
rc=$?
cd /
echo "hookprof-vm: up $(cut -d' ' -f1 /proc/uptime) s"
echo "HOOKPROF-VM-EXIT=$rc"
if [ -n "$share" ]; then
    echo "$rc" > /mnt/host/.hookprof-vm-exit
    sync
    umount /mnt/host
fi
sync
poweroff -f
