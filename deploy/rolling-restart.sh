#!/usr/bin/env bash
# make rolling-restart: restarts the nodes of the local test cluster (make cluster) one at a
# time, as docs/cluster.md's "Rolling restart" procedure does it on any cluster:
#
#   1. fila cluster drain N    every leadership moves off node N (the command waits until none is
#                              left); its clients' subscriptions move with them
#   2. stop node N (SIGTERM) and start it again — here: upgrade it, change its settings
#   3. wait until node N is ready and the cluster status shows it up
#   4. fila cluster undrain N  it may lead again (rebalancing, when enabled, gives it its share)
#
# then the next node. Nothing acknowledged is lost and no lease is dropped on the way: a drain
# moves leaderships by controlled transfers, and a drained node leads nothing when it stops.
# The same CLUSTER_DIR, CLUSTER_PORT_OFFSET and FILA_SERVER as make cluster; FILA is the CLI.
set -euo pipefail
fila=${FILA:-bin/fila}
bin=${FILA_SERVER:-bin/fila-server}
dir=${CLUSTER_DIR:-data/cluster}
off=${CLUSTER_PORT_OFFSET:-0}
seeds="127.0.0.1:$((5561 + off)),127.0.0.1:$((5562 + off)),127.0.0.1:$((5563 + off))"
ready_wait=${READY_WAIT:-120} # seconds a restarted node may take to be ready

for i in 1 2 3; do
	if [ ! -f "$dir/$i.pid" ]; then
		echo "rolling-restart: node $i is not running under make cluster ($dir/$i.pid is missing)" >&2
		exit 1
	fi
done
for i in 1 2 3; do
	echo "rolling-restart: node $i: draining"
	"$fila" --addr "$seeds" cluster drain "$i"
	old=$(cat "$dir/$i.pid")
	echo "rolling-restart: node $i: restarting (pid $old)"
	touch "$dir/$i.restart"
	kill -TERM "$old"
	for ((t = 0; ; t++)); do
		if [ -f "$dir/$i.pid" ] && [ "$(cat "$dir/$i.pid")" != "$old" ] &&
			"$bin" healthcheck --http-addr "127.0.0.1:$((9560 + off + i))" --timeout 1s >/dev/null 2>&1; then
			break
		fi
		if ((t >= ready_wait * 4)); then
			echo "rolling-restart: node $i is not ready ${ready_wait}s after its restart; it stays drained (see $dir/$i.log)" >&2
			exit 1
		fi
		sleep 0.25
	done
	echo "rolling-restart: node $i: ready; undraining"
	"$fila" --addr "$seeds" cluster undrain "$i"
done
echo "rolling-restart: all three nodes restarted"
"$fila" --addr "$seeds" cluster status
