#!/bin/busybox sh
# The guest side of `numasim kernel-run`: the initramfs's /init (busybox ash).
#
# It checks what the kernel saw (nodes, distances, scheduling domains), sets NUMA balancing,
# starts tracing, runs the workload of /etc/numasim.env for WINDOW_S seconds, stops tracing and
# sends what it recorded, as a gzipped tar encoded in base64, over the second serial port
# (ttyS1) between two marker lines. Progress lines ("numasim-guest: ...") go to the console.
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
. /etc/numasim.env

T=/sys/kernel/tracing
O=/tmp/out
mkdir -p $O

say() { echo "numasim-guest: $*"; }
fail() {
	say "error: $*"
	poweroff -f
}

say "up $(cut -d' ' -f1 /proc/uptime)"
uname -r > $O/release
cat /proc/cmdline > $O/cmdline
cat /sys/devices/system/cpu/online > $O/online
for n in /sys/devices/system/node/node[0-9]*; do
	echo "${n##*/node} $(cat $n/cpulist) | $(cat $n/distance)"
done > $O/nodes
echo Y > /sys/kernel/debug/sched/verbose 2> /dev/null
for d in /sys/kernel/debug/sched/domains/cpu*/domain*; do
	echo "$d $(cat $d/name)"
done > $O/domains

echo "$NUMA_BALANCING" > /proc/sys/kernel/numa_balancing || fail "cannot set kernel.numa_balancing"
cat /proc/sys/kernel/numa_balancing > $O/numa_balancing
cat /proc/sys/kernel/sched_schedstats > $O/schedstats_enabled
cat /sys/kernel/debug/sched/features > $O/sched_features 2> /dev/null

# Tracing: every event of EVENTS, the call stack of every migration, a global clock (ordered
# across CPUs), BUFFER_KB per CPU.
echo 0 > $T/tracing_on
echo global > $T/trace_clock || fail "cannot set trace_clock"
echo "$BUFFER_KB" > $T/buffer_size_kb || fail "cannot set buffer_size_kb to $BUFFER_KB"
echo > $T/trace
for e in $EVENTS; do
	echo 1 > $T/events/$e/enable || fail "no trace event $e"
done
echo stacktrace > $T/events/sched/sched_migrate_task/trigger || fail "no stacktrace trigger"
# Every hrtimer that expires is counted, by CPU and by function, in the kernel (a histogram,
# not the trace): the tick's own hrtimer counts the ticks each CPU handled.
echo 'hist:keys=common_cpu,function.sym:size=4096' > $T/events/timer/hrtimer_expire_entry/trigger ||
	say "note: no hist trigger (the kernel lacks CONFIG_HIST_TRIGGERS): ticks are not counted"
cat $T/buffer_size_kb > $O/buffer_size_kb

# The counters: balancing passes (schedstat), timer interrupts, CPU times, the hrtimers that
# expired (the histogram above) and the hrtimer interrupts' retries (timer_list, whose "now at"
# times the reading). One process reads them all, one after the other (head's "==> F <=="
# headers separate them), so that at each end they are read within a short time.
counters() {
	head -n 1000000 /proc/schedstat /proc/interrupts /proc/stat \
		$T/events/timer/hrtimer_expire_entry/hist /proc/timer_list > $O/counters.$1
}
echo 1 > $T/tracing_on
counters start
cat /proc/vmstat > $O/vmstat.start
echo "numasim window-start" > $T/trace_marker
say "window-start"
taskset -c 0 sh /spawn.sh &
SPAWNER=$!
sleep "$WINDOW_S"
echo "numasim window-end" > $T/trace_marker
say "window-end"
counters end
# The loops are stopped (no more migrations) while tracing still runs, so the trace holds every
# migration the kernel counted in each loop's /proc/PID/sched (a check of the trace).
kill -STOP $SPAWNER $(cat /tmp/pids) 2> /dev/null
cat /proc/vmstat > $O/vmstat.end
for p in $(cat /tmp/pids); do
	cat /proc/$p/sched > $O/sched.$p 2> /dev/null
done
echo 0 > $T/tracing_on

kill -9 $SPAWNER $(cat /tmp/pids) 2> /dev/null
echo "$SPAWNER" > $O/spawner
cp /tmp/pids $O/pids
for c in $T/per_cpu/cpu*; do
	echo "cpu ${c##*/cpu}"
	cat $c/stats
done > $O/per_cpu_stats
cat $T/trace | gzip -c > $O/trace.gz
dmesg > $O/dmesg
say "sending $(du -k $O | tail -n 1 | cut -f1) kB"
stty -F /dev/ttyS1 raw -echo 2> /dev/null
{
	echo "=== numasim-data begin"
	tar -C $O -cf - . | gzip -c | base64
	echo "=== numasim-data end"
} > /dev/ttyS1
say "done"
poweroff -f
