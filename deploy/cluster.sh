#!/usr/bin/env bash
# make cluster: three fila-server nodes founding a cluster on loopback, data under
# $CLUSTER_DIR/N (./data/cluster by default), each node's log in $CLUSTER_DIR/N.log. A first run
# founds the cluster; later runs restart it on the same directories. Ctrl-C (or any node
# exiting) stops all three — except a node stopped for a restart (deploy/rolling-restart.sh
# creates $CLUSTER_DIR/N.restart before it stops node N), which is started again at once.
# CLUSTER_PORT_OFFSET moves every port by that much (a second cluster beside the first).
set -u
bin=${FILA_SERVER:-bin/fila-server}
dir=${CLUSTER_DIR:-data/cluster}
off=${CLUSTER_PORT_OFFSET:-0}
founders="1=127.0.0.1:$((7001 + off)),2=127.0.0.1:$((7002 + off)),3=127.0.0.1:$((7003 + off))"
pids=()
stopping=
stop() {
	stopping=1
	for i in 1 2 3; do
		[ -f "$dir/$i.pid" ] && kill -TERM "$(cat "$dir/$i.pid")" 2>/dev/null
	done
	wait
}
trap stop INT TERM

# node runs node $1 until it exits other than for a restart; its server's PID is in $dir/$1.pid.
node() {
	local i=$1 code
	while :; do
		"$bin" --node-id "$i" --data-dir "$dir/$i" --listen "127.0.0.1:$((5560 + off + i))" \
			--http-listen "127.0.0.1:$((9560 + off + i))" --cluster-listen "127.0.0.1:$((7000 + off + i))" \
			--initial-cluster "$founders" >>"$dir/$i.log" 2>&1 &
		echo $! >"$dir/$i.pid"
		wait $!
		code=$?
		if [ -e "$dir/$i.restart" ]; then
			rm -f "$dir/$i.restart"
			echo "cluster: node $i stopped (status $code) for a restart: starting it again" >&2
			continue
		fi
		rm -f "$dir/$i.pid"
		return $code
	done
}

for i in 1 2 3; do
	mkdir -p "$dir/$i"
	rm -f "$dir/$i.restart"
	node "$i" &
	pids+=($!)
done
echo "cluster: nodes 1, 2, 3 on FIBP 127.0.0.1:$((5561 + off)), $((5562 + off)), $((5563 + off)) (HTTP $((9561 + off))-$((9563 + off))), logs in $dir/N.log; Ctrl-C stops all"
echo "  fila --addr 127.0.0.1:$((5561 + off)) cluster status"
wait -n
code=$?
if [ -z "$stopping" ]; then
	echo "a node exited (status $code): stopping the others; see $dir/N.log" >&2
	stop
	exit 1
fi
