package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchBacklog measures what a standing backlog costs: it fills one queue step by step to each of
// -backlog-sizes messages (of -backlog-payload bytes, over -backlog-keys fairness keys), reads the
// server's RSS at each size, and measures lifecycle throughput on that queue while the backlog
// stands, against the same load on a fresh, empty queue of the same server measured just before
// and just after (their mean, so that a drift of the machine's load cancels). Per size it prints
// the figures and one summary line:
//
//	BACKLOG messages=10000000 payload=1024 keys=0 rss_mib=… bytes_per_msg=… lifecycle=… empty=… ratio=… empty_server=… rss_settled_mib=… scratch_mib=… scratch_cached_mib=… cpu_us=… empty_cpu_us=… empty_server_cpu_us=… compaction=… empty_compaction=… empty_server_compaction=… snapshot=… snapshots=… snapshot_mean_s=… fill_snapshots=… fill_snapshot_mean_s=…
//
// bytes_per_msg is (RSS − RSS before the fill) / messages, read 2 s after the fill; rss_settled_mib
// is read -backlog-settle later, idle; empty_server is the lifecycle rate
// measured first, on the empty server. scratch_mib is the engine's scratch regions (disk space; the
// swept records live there, in the page cache rather than RSS) and scratch_cached_mib the part of
// them in the page cache, read from the server's /metrics. cpu_us and
// empty_cpu_us are the server's CPU time per acked message on the backlog and on the empty queues
// beside it (their mean), empty_server_cpu_us the same on the fresh server; compaction,
// empty_compaction and empty_server_compaction are the seconds per second the server's store
// spent compacting in those phases; snapshot is the seconds the backlog's queue paused while the
// snapshots begun in its phase were written (fila_snapshot_seconds; one begun late in the phase
// may go on past it), per second of the phase; snapshots and snapshot_mean_s are how many ended in
// it and their mean pause, fill_snapshots and fill_snapshot_mean_s the same for the fill. The
// empty queues keep what their run left unconsumed. With -heap-profile DIR the server serves
// pprof and a heap profile is saved at each size.
func benchBacklog(r *runner) error {
	if r.srv.cmd == nil {
		fmt.Fprintln(os.Stderr, "   skipped: the server was not started by this tool")
		return nil
	}
	sizes, err := parseSizes(r.o.backlogSizes)
	if err != nil {
		return err
	}
	// The figure is a backlog in use: its queue must not hibernate while the figure reads RSS or
	// measures the empty queues beside it (waking restores every stored message).
	// The flag is this figure's only: the workloads after it (queues) measure hibernation.
	args := slices.Clip(r.srv.args)
	defer func() { r.srv.args = args }()
	r.srv.args = append(args, "--queue-idle-timeout", backlogIdleTimeout.String())
	if err := r.srv.restart(); err != nil {
		return err
	}
	fresh, err := r.backlogPhase("", "empty-server")
	if err != nil {
		return err
	}
	emptyServer := fresh.rate
	report("lifecycle_empty_server", emptyServer, "msg/s")
	report("server_cpu_per_msg_empty_server", fresh.cpuPerMsg, "us")
	q, err := r.newQueue("backlog")
	if err != nil {
		return err
	}
	base := r.srv.rssBytes()
	var stored int64 // messages in q: filled, plus enqueued − acked by the lifecycle runs
	for _, n := range sizes {
		fill0 := r.srv.scrape()
		added, err := r.fill(q, n-stored)
		if err != nil {
			return err
		}
		stored += added
		time.Sleep(2 * time.Second) // let the last batches apply
		fillPause, fillSnaps := meanPause(fill0, r.srv.scrape(), q)
		rss, measured, mem := r.srv.rssBytes(), stored, r.srv.memory()
		perMsg := float64(rss-base) / float64(stored)
		tag := fmt.Sprintf("%d_%db", n, r.o.backlogPayload)
		report("rss_backlog_"+tag, float64(rss)/(1<<20), "MiB")
		report("bytes_per_msg_backlog_"+tag, perMsg, "B")
		fmt.Fprintf(os.Stderr, "   RSS: %.0f MiB anonymous, %.0f MiB file-backed; engine: %.0f MiB mapped, scratch %.0f MiB on disk, %.0f MiB of it resident, %.0f MiB in the page cache\n",
			mib(mem.rssAnon), mib(mem.rssFile), mib(mem.mapped), mib(mem.scratch), mib(mem.scratchResident), mib(mem.scratchCached))
		if err := r.saveHeap("backlog-" + tag); err != nil {
			return err
		}
		time.Sleep(r.o.settle) // the fill's garbage goes back to the system at the scavenger's pace
		settled := r.srv.rssBytes()
		report("rss_backlog_settled_"+tag, float64(settled)/(1<<20), "MiB")
		before, err := r.backlogPhase("", "empty-before-"+tag)
		if err != nil {
			return err
		}
		snapshots, snap0 := fmt.Sprintf("%s{queue=%q}", snapshotSeconds, q), r.srv.scrape()
		standing, err := r.backlogPhase(q, "backlog-"+tag)
		if err != nil {
			return err
		}
		stored += standing.added
		after, err := r.backlogPhase("", "empty-after-"+tag)
		if err != nil {
			return err
		}
		// A snapshot is counted when it ends: one begun late in the backlog's phase has ended by
		// now (the queue was idle since), and its whole pause counts for the phase.
		snap1 := r.srv.scrape()
		snapshot := perSecond(snap0, snap1, snapshots, r.o.duration.Seconds())
		pause, snaps := meanPause(snap0, snap1, q)
		rate, empty := standing.rate, (before.rate+after.rate)/2
		cpu, emptyCPU := standing.cpuPerMsg, (before.cpuPerMsg+after.cpuPerMsg)/2
		compaction, emptyCompaction := standing.compaction, (before.compaction+after.compaction)/2
		report("lifecycle_backlog_"+tag, rate, "msg/s")
		report("lifecycle_empty_beside_"+tag, empty, "msg/s")
		report("lifecycle_backlog_vs_empty_"+tag, 100*rate/empty, "%")
		report("server_cpu_per_msg_backlog_"+tag, cpu, "us")
		report("server_cpu_per_msg_empty_beside_"+tag, emptyCPU, "us")
		report("server_compaction_backlog_"+tag, compaction, "s/s")
		report("server_compaction_empty_beside_"+tag, emptyCompaction, "s/s")
		report("snapshot_pause_backlog_"+tag, snapshot, "s/s")
		report("snapshot_mean_pause_backlog_"+tag, pause, "s")
		report("snapshot_mean_pause_fill_"+tag, fillPause, "s")
		fmt.Printf("BACKLOG messages=%d payload=%d keys=%d rss_mib=%.1f bytes_per_msg=%.1f lifecycle=%.0f empty=%.0f ratio=%.3f empty_server=%.0f rss_settled_mib=%.1f scratch_mib=%.1f scratch_cached_mib=%.1f cpu_us=%.2f empty_cpu_us=%.2f empty_server_cpu_us=%.2f compaction=%.2f empty_compaction=%.2f empty_server_compaction=%.2f snapshot=%.3f snapshots=%.0f snapshot_mean_s=%.4f fill_snapshots=%.0f fill_snapshot_mean_s=%.4f\n",
			measured, r.o.backlogPayload, r.o.backlogKeys, mib(rss), perMsg, rate, empty, rate/empty, emptyServer,
			mib(settled), mib(mem.scratch), mib(mem.scratchCached), cpu, emptyCPU, fresh.cpuPerMsg,
			compaction, emptyCompaction, fresh.compaction, snapshot, snaps, pause, fillSnaps, fillPause)
	}
	return nil
}

// phaseResult is one lifecycle run of the backlog figure.
type phaseResult struct {
	rate       float64 // messages acked per second
	cpuPerMsg  float64 // the server's CPU time (user + system) per acked message, µs
	compaction float64 // seconds the store spent compacting per second (fila_storage_lsm_compaction_seconds_total)
	added      int64   // messages enqueued but not acked meanwhile
}

// backlogPhase measures the lifecycle load on q (a fresh empty queue when ""), with the server's
// CPU time per acked message: unlike the rate, that does not depend on how much of the machine
// the server was given, so it separates builds measured while other work shares the cores.
func (r *runner) backlogPhase(q, label string) (phaseResult, error) {
	if q == "" {
		var err error
		if q, err = r.newQueue(label); err != nil {
			return phaseResult{}, err
		}
	}
	l := backlogLifecycle(r.o)
	l.queue = q
	ct := &counters{}
	stop, err := r.start(l, ct)
	if err != nil {
		return phaseResult{}, err
	}
	cpu, acked, start := r.srv.cpuSeconds(), ct.acked.Load(), time.Now()
	before := r.srv.scrape()
	rate := measure(label, r.o.duration, ct.acked.Load)
	cpu, acked = r.srv.cpuSeconds()-cpu, ct.acked.Load()-acked
	after, elapsed := r.srv.scrape(), time.Since(start).Seconds()
	stop()
	return phaseResult{rate: rate, cpuPerMsg: cpu / float64(max(acked, 1)) * 1e6,
		compaction: perSecond(before, after, compactionSeconds, elapsed),
		added:      ct.enqueued.Load() - ct.acked.Load()}, nil
}

// perSecond is how much a counter series grew per second between two scrapes: NaN when either
// scrape lacks it (unknown, not 0). A labelled series (a queue's snapshots) appears with its first
// sample, so a scrape that read other series counts it as 0.
func perSecond(before, after map[string]float64, series string, elapsed float64) float64 {
	v1, ok1 := after[series]
	v0, ok0 := before[series]
	if strings.Contains(series, "{") { // a labelled series is absent until its first sample
		ok0, ok1 = ok0 || len(before) > 0, ok1 || len(after) > 0
	}
	if !ok0 || !ok1 {
		return math.NaN()
	}
	return (v1 - v0) / elapsed
}

// compactionSeconds is the store's compaction time series (absent, so NaN, in a server without it).
const compactionSeconds = "fila_storage_lsm_compaction_seconds_total"

// snapshotSeconds is the seconds queues paused for their snapshots, a histogram's sum per queue.
const snapshotSeconds = "fila_snapshot_seconds_sum"

// meanPause is the mean pause of queue q's snapshots that ended between two scrapes, and how
// many there were (NaN and 0 for none).
func meanPause(before, after map[string]float64, q string) (mean, n float64) {
	series := fmt.Sprintf("{queue=%q}", q)
	n = after["fila_snapshot_seconds_count"+series] - before["fila_snapshot_seconds_count"+series]
	if n <= 0 {
		return math.NaN(), 0
	}
	return (after[snapshotSeconds+series] - before[snapshotSeconds+series]) / n, n
}

// backlogIdleTimeout keeps the backlog's queue awake for the whole figure.
const backlogIdleTimeout = 24 * time.Hour

// backlogLifecycle is the lifecycle load of the backlog figures: one consumer, 1 KB messages
// (the figure's payload and keys).
func backlogLifecycle(o options) load {
	l := lifecycleLoad(1, o.backlogKeys)
	l.payload = o.backlogPayload
	return l
}

// fill enqueues at least n more messages into q (whole batches; enqueues refused for back pressure
// are made up), showing progress (rate, RSS) as it goes, and returns how many it enqueued.
func (r *runner) fill(q string, n int64) (int64, error) {
	const batch = 500
	var done int64
	start := time.Now()
	for done < n {
		ct := &counters{}
		want := (n - done + batch - 1) / batch * batch
		l := load{queue: q, producers: 4, window: 4, batch: batch, payload: r.o.backlogPayload, keys: r.o.backlogKeys, limit: want}
		stop, err := r.start(l, ct)
		if err != nil {
			return done, err
		}
		for ct.enqueued.Load()+ct.failed.Load() < want {
			time.Sleep(time.Second)
			got := done + ct.enqueued.Load()
			rate := float64(got) / time.Since(start).Seconds()
			eta := time.Duration(float64(n-got) / max(rate, 1) * float64(time.Second)).Round(time.Second)
			fmt.Fprintf(os.Stderr, "\r   filling %s: %d / %d (%.0f msg/s, RSS %.0f MiB, ETA %v)   ",
				q, got, n, rate, float64(r.srv.rssBytes())/(1<<20), eta)
		}
		stop()
		done += ct.enqueued.Load()
	}
	fmt.Fprintf(os.Stderr, "\r   filled %s with %d in %v%40s\n", q, done, time.Since(start).Round(time.Second), "")
	return done, nil
}

// saveHeap writes the server's heap profile to <-heap-profile>/<name>.heap.pprof, when asked for.
func (r *runner) saveHeap(name string) error {
	if r.o.heapProfile == "" || !r.srv.pprof {
		return nil
	}
	res, err := http.Get("http://" + r.srv.httpAddr + "/debug/pprof/heap")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if err := os.MkdirAll(r.o.heapProfile, 0o755); err != nil {
		return err
	}
	path := filepath.Join(r.o.heapProfile, name+".heap.pprof")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "   heap profile: %s\n", path)
	if err := f.Close(); err != nil {
		return err
	}
	return r.reportGC(name)
}

// reportGC prints the server's garbage-collection count, its share of CPU so far and where the Go
// runtime's memory is (heap in use, idle, returned to the system; stacks; the runtime's total),
// from the runtime statistics at the end of the text heap profile.
func (r *runner) reportGC(name string) error {
	res, err := http.Get("http://" + r.srv.httpAddr + "/debug/pprof/heap?debug=1")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		for _, stat := range []string{"NumGC", "GCCPUFraction", "HeapInuse", "HeapIdle", "HeapReleased", "NextGC", "StackInuse", "Sys"} {
			if v, ok := strings.CutPrefix(sc.Text(), "# "+stat+" = "); ok {
				fmt.Fprintf(os.Stderr, "   %s: %s = %s\n", name, stat, v)
			}
		}
	}
	return sc.Err()
}

// parseSizes reads a comma-separated list of message counts, ascending.
func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(f), "_", ""), 10, 64)
		if err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("-backlog-sizes: %q is not an ascending list of positive counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
