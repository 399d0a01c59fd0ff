#!/usr/bin/env bash
# make cluster: three fila-server nodes founding a cluster on loopback, data under
# $CLUSTER_DIR/N (./data/cluster by default), each node's log in $CLUSTER_DIR/N.log. A first run
# founds the cluster; later runs restart it on the same directories. Ctrl-C (or any node
# exiting) stops all three.
set -u
bin=${FILA_SERVER:-bin/fila-server}
dir=${CLUSTER_DIR:-data/cluster}
founders="1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003"
pids=()
stopping=
stop() {
	stopping=1
	kill -TERM "${pids[@]}" 2>/dev/null
	wait
}
trap stop INT TERM
for i in 1 2 3; do
	mkdir -p "$dir/$i"
	"$bin" --node-id "$i" --data-dir "$dir/$i" --listen "127.0.0.1:556$i" --http-listen "127.0.0.1:956$i" \
		--cluster-listen "127.0.0.1:700$i" --initial-cluster "$founders" >>"$dir/$i.log" 2>&1 &
	pids+=($!)
done
echo "cluster: nodes 1, 2, 3 on FIBP 127.0.0.1:5561, 5562, 5563 (HTTP 9561, 9562, 9563), logs in $dir/N.log; Ctrl-C stops all"
echo "  fila --addr 127.0.0.1:5561 cluster status"
wait -n
code=$?
if [ -z "$stopping" ]; then
	echo "a node exited (status $code): stopping the others; see $dir/N.log" >&2
	stop
	exit 1
fi
