package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
// figures with the tabs on a blank page and polling, alternated twice. It runs only when asked.
func TestConsoleLoad(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FILA_CONSOLE_LOAD"))
	if n <= 0 {
		t.Skip("a measurement: FILA_CONSOLE_LOAD=10000 go test -run TestConsoleLoad -v -timeout 30m ./tools/console/")
	}
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium binary: install Debian's chromium package or set FILA_CHROMIUM")
	}
	srv := startServer(t, "") // authentication off: tools/bench connects without a key
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
	}
	open := func(blank bool) {
		for i, tab := range tabs {
			u := urls[i]
			if blank {
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
	open(false)
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
	before := evalAll(count)
	busy := cpu(window)
	requests := evalAll(count) - before
	t.Logf("10 tabs (%d hidden): %.1f requests/s, server CPU %.2f%% of a core (%.2f%% without tabs)",
		hidden, float64(requests)/window.Seconds(), 100*busy, 100*idle)

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
	for _, polling := range []bool{false, true, false, true} {
		open(!polling)
		time.Sleep(2 * time.Second)
		out, err := exec.Command(benchBin, "-addr", srv.addr, "-only", "lifecycle", "-duration", "5s").CombinedOutput()
		if err != nil {
			t.Fatalf("tools/bench: %v\n%s", err, out)
		}
		label := "blank"
		if polling {
			label = "polling"
		}
		for _, m := range line.FindAllStringSubmatch(string(out), -1) {
			results[m[1]+" "+label] = append(results[m[1]+" "+label], m[2])
		}
	}
	for k, v := range results {
		t.Logf("%s: %v msg/s", k, v)
	}
}
