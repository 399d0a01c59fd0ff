package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/tools/internal/procfs"
	"github.com/filamq/fila/tools/internal/repo"
)

// TestConsoleLoad measures what open console tabs cost the broker (docs/console.md, "What ten
// tabs cost"): on a server holding FILA_CONSOLE_LOAD queues (10000 for the documented figures),
// the server's CPU while idle without tabs and with 10 tabs open (5 on the overview sorted by
// depth, 5 on queue pages), the requests the tabs make per second, then tools/bench's lifecycle
// figures with no console, with the tabs polling, and with a replay of the tabs' requests from
// Go (the broker's share alone, without the browser's CPU on the same machine), in
// FILA_CONSOLE_LOAD_ROUNDS rounds (3). It runs only when asked.
func TestConsoleLoad(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FILA_CONSOLE_LOAD"))
	if n <= 0 {
		t.Skip("a measurement: FILA_CONSOLE_LOAD=10000 go test -run TestConsoleLoad -v -timeout 30m ./tools/console/")
	}
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium binary: install Debian's chromium package or set FILA_CHROMIUM")
	}
	srv := startServer(t, "", "--max-queues", strconv.Itoa(n+10)) // authentication off: tools/bench connects without a key; room for its queues
	ctx := context.Background()
	c, err := fila.Dial(ctx, srv.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if _, err := c.CreateQueue(ctx, fila.QueueConfig{Name: fmt.Sprintf("load-%05d", i)}); err != nil {
					errs <- err
					return
				}
				if i%10 == 0 { // a message in every tenth, for depths to sort by
					if _, err := c.Enqueue(ctx, fila.Message{Queue: fmt.Sprintf("load-%05d", i), FairnessKey: "k" + strconv.Itoa(i%7), Payload: []byte("x")}); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d queues created in %v", n, time.Since(start).Round(time.Millisecond))
	pid := srv.cmd.Process.Pid
	cpu := func(d time.Duration) float64 { // the server's CPU over d, in cores
		before := procfs.CPU(pid)
		time.Sleep(d)
		return (procfs.CPU(pid) - before).Seconds() / d.Seconds()
	}
	const window = 20 * time.Second
	time.Sleep(3 * time.Second)
	idle := cpu(window)
	t.Logf("no tab: server CPU %.2f%% of a core", 100*idle)

	b := newBrowser(t, bin, "http://"+srv.httpAddr)
	urls := make([]string, 10)
	for i := range urls {
		if i < 5 {
			urls[i] = b.base + "/console/#/"
		} else {
			urls[i] = b.base + "/console/#/queues/" + fmt.Sprintf("load-%05d", i*10)
		}
	}
	tabs := make([]context.Context, len(urls))
	for i := range tabs {
		tabs[i], _ = chromedp.NewContext(b.ctx)
		// The tab opens with the context it is first run with: its own, not a timeout's child.
		if err := chromedp.Do(tabs[i]); err != nil {
			t.Fatalf("opening tab %d: %v", i, err)
		}
	}
	open := func(shown func(i int) bool) {
		for i, tab := range tabs {
			u := urls[i]
			if !shown(i) {
				u = "about:blank"
			}
			tctx, cancel := context.WithTimeout(tab, 30*time.Second)
			if err := chromedp.Do(tctx, chromedp.Navigate(u)); err != nil {
				t.Fatalf("tab %d: %v", i, err)
			}
			cancel()
		}
	}
	evalAll := func(expr string) (sum int) {
		for i, tab := range tabs {
			tctx, cancel := context.WithTimeout(tab, 10*time.Second)
			v, err := chromedp.Run(tctx, chromedp.Evaluate[int](expr))
			cancel()
			if err != nil {
				t.Fatalf("tab %d: %v", i, err)
			}
			sum += v
		}
		return sum
	}
	all := func(int) bool { return true }
	open(all)
	evalAll(`(performance.setResourceTimingBufferSize(1e6), 0)`)
	for i, tab := range tabs {
		if i >= 5 {
			continue
		}
		// the overview sorted by depth, the sort an operator opens at 10,000 queues
		tctx, cancel := context.WithTimeout(tab, 10*time.Second)
		_ = chromedp.Do(tctx, chromedp.WaitVisible(chromedp.CSS("#queue-sort")), chromedp.SetValue(chromedp.CSS("#queue-sort"), "depth"))
		_, _ = chromedp.Run(tctx, chromedp.Evaluate[bool](`document.querySelector('#queue-sort').dispatchEvent(new Event('change'))`))
		cancel()
	}
	hidden := evalAll(`document.hidden ? 1 : 0`)
	time.Sleep(5 * time.Second)
	const count = `performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/')).length`
	before, browserBefore := evalAll(count), chromiumCPU()
	busy := cpu(window)
	requests, browser := evalAll(count)-before, (chromiumCPU()-browserBefore).Seconds()/window.Seconds()
	t.Logf("10 tabs (%d hidden): %.1f requests/s, server CPU %.2f%% of a core (%.2f%% without tabs); Chromium's own CPU %.1f%% of a core",
		hidden, float64(requests)/window.Seconds(), 100*busy, 100*idle, 100*browser)
	// Each kind of page alone (a reload: the overview's sort is back to by name).
	for _, kind := range []struct {
		name  string
		shown func(i int) bool
	}{{"5 overview tabs (by name)", func(i int) bool { return i < 5 }}, {"5 queue tabs", func(i int) bool { return i >= 5 }}} {
		open(kind.shown)
		time.Sleep(5 * time.Second)
		t.Logf("%s: server CPU %.2f%% of a core", kind.name, 100*cpu(window))
	}

	// The lifecycle benchmark with the tabs blank and polling, alternated.
	benchBin := filepath.Join(t.TempDir(), "bench")
	root, _ := repo.Root()
	build := exec.Command("go", "build", "-o", benchBin, "./tools/bench")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building tools/bench: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`BENCH name=(lifecycle_\S+) value=(\S+)`)
	results := map[string][]string{}
	rounds, _ := strconv.Atoi(os.Getenv("FILA_CONSOLE_LOAD_ROUNDS"))
	if rounds <= 0 {
		rounds = 3
	}
	for round := 0; round < rounds; round++ {
		for _, mode := range []string{"none", "tabs", "replay"} {
			open(func(int) bool { return mode == "tabs" })
			stop := make(chan struct{})
			if mode == "replay" {
				replay(srv.httpAddr, stop)
			}
			time.Sleep(2 * time.Second)
			for _, q := range []string{"lifecycle-1c-1", "lifecycle-4c-2"} { // tools/bench's names, the same each run
				_ = c.DeleteQueue(ctx, q)
			}
			out, err := exec.Command(benchBin, "-addr", srv.addr, "-only", "lifecycle", "-duration", "5s").CombinedOutput()
			close(stop)
			if err != nil {
				t.Fatalf("tools/bench: %v\n%s", err, out)
			}
			for _, m := range line.FindAllStringSubmatch(string(out), -1) {
				results[m[1]+" "+mode] = append(results[m[1]+" "+mode], m[2])
			}
		}
	}
	for k, v := range results {
		sum := 0.0
		for _, x := range v {
			f, _ := strconv.ParseFloat(x, 64)
			sum += f
		}
		t.Logf("%s: %v msg/s, mean %.0f", k, v, sum/float64(len(v)))
	}
}

// chromiumCPU is the CPU time used so far by every running Chromium process (the browser, its
// renderers and helpers, all named chromium or chrome).
func chromiumCPU() time.Duration {
	var total time.Duration
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if name := string(comm); strings.HasPrefix(name, "chromium") || strings.HasPrefix(name, "chrome") {
			total += procfs.CPU(pid)
		}
	}
	return total
}

// replay makes the requests of the ten tabs (overview.js, queue.js) from Go until stop is
// closed: five overviews (totals every 2 s, the queue list every 10 s at 10,000 queues) and five
// queue pages (summary, keys, messages, dead letters every 2 s, throttles every 10 s).
func replay(httpAddr string, stop chan struct{}) {
	get := func(path string) {
		res, err := http.Get("http://" + httpAddr + path)
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	for tab := 0; tab < 10; tab++ {
		go func() {
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			q := fmt.Sprintf("load-%05d", tab*10)
			for n := 0; ; n++ {
				if tab < 5 {
					get("/api/v1/overview")
					if n%5 == 0 {
						get("/api/v1/queues?sort=name&limit=50")
					}
				} else {
					get("/api/v1/queues/" + q)
					get("/api/v1/queues/" + q + "/keys?sort=backlog&limit=50")
					get("/api/v1/queues/" + q + "/messages?count=20")
					get("/api/v1/queues/" + q + ".dlq/messages?count=10")
					if n%5 == 0 {
						get("/api/v1/throttles")
					}
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
	}
}
