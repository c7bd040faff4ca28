#!/bin/busybox sh
# The loops' parent in the guest of `numasim kernel-run` (started by /init as
# `taskset -c 0 sh /spawn.sh`, so it begins on CPU 0); /etc/numasim.env says what to start.
. /etc/numasim.env
T=/sys/kernel/tracing

# The workload's loops. A pure CPU loop is a subshell that spins (no exec, so no exec balancing
# is involved); a memory loop is dd copying /dev/zero into its own MEM_MB buffer, which writes
# every page of that buffer once per block (work for NUMA balancing).
loop() {
	if [ "$MEM_MB" -gt 0 ]; then
		exec dd if=/dev/zero of=/dev/null bs=${MEM_MB}M 2>/dev/null
	fi
	while :; do :; done
}

# START=fork: this parent runs on CPU 0 (taskset -c 0 started it) and gives itself every CPU
# back before its first fork, since a child inherits its parent's affinity: the kernel places each
# child. The change is made from the last CPU while the parent keeps running on CPU 0: a task
# waiting on a busy CPU once its affinity widens is soon pulled elsewhere, and one that slept is
# placed anew when it wakes. pinned: it pins itself to CPU i before forking loop i, so loop i is
# born on CPU i and stays there. released: it stays pinned to CPU 0, so every loop starts on
# CPU 0; RELEASE_S after the last fork each loop is given every CPU.
widen() {
	[ "$NCPUS" -gt 1 ] || return
	taskset -c $((NCPUS - 1)) taskset -p -c "$ALL_CPUS" $$ > /dev/null &
	while :; do
		while read -r key value; do
			if [ "$key" = "Cpus_allowed_list:" ] && [ "$value" = "$ALL_CPUS" ]; then
				return
			fi
		done < /proc/self/status
	done
}

: > /tmp/pids
if [ "$START" = fork ]; then
	widen
fi
i=0
while [ $i -lt "$TASKS" ]; do
	if [ "$START" = pinned ]; then
		taskset -p -c $((i % NCPUS)) $$ > /dev/null
	fi
	loop &
	echo $! >> /tmp/pids
	i=$((i + 1))
done
echo "numasim spawned" > $T/trace_marker
if [ "$START" = released ]; then
	sleep "$RELEASE_S"
	echo "numasim release" > $T/trace_marker
	for p in $(cat /tmp/pids); do
		taskset -p -c "$ALL_CPUS" "$p" > /dev/null
	done
	echo "numasim released" > $T/trace_marker
fi
sleep 100000
