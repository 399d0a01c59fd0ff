package console

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/filamq/fila/client/fila"
)

// xssQueue is a queue name that would run script if the console ever rendered a name as HTML.
// Queue names hold no spaces (meta.ValidQueueName), so the attributes are separated by slashes,
// which HTML parses as it parses spaces; the fairness key xssKey has the spaced form.
const (
	xssQueue = "<img/src=x/onerror=alert(1)>"
	xssKey   = "<img src=x onerror=alert(2)>"
	apiKey   = "console-test-bootstrap-key-0123456789"
)

// chromiumPath finds a Chromium or Chrome binary: $FILA_CHROMIUM, else the usual names.
func chromiumPath() string {
	if p := os.Getenv("FILA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is a headless Chromium tab on the console, recording dialogs and script errors.
type browser struct {
	t      *testing.T
	ctx    context.Context
	base   string
	shots  string
	mu     sync.Mutex
	faults []string // dialogs opened, uncaught exceptions, Content-Security-Policy violations
}

func newBrowser(t *testing.T, bin, base string) *browser {
	shots := os.Getenv("FILA_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 860), chromedp.Flag("hide-scrollbars", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shots: shots}
	dialogs := make(chan string, 8)
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			select {
			case dialogs <- e.Message:
			default:
			}
		}
	}); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() { // a dialog blocks the page: record it and dismiss it
		for msg := range dialogs {
			b.fault("a dialog opened: %q", msg)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	}()
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException || strings.Contains(m.Text, "Content Security Policy") {
				b.fault("%s: %s", m.Type, m.Text)
			}
		}
	}()
	return b
}

func (b *browser) fault(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults = append(b.faults, fmt.Sprintf(format, args...))
}

func (b *browser) checkFaults() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range b.faults {
		b.t.Errorf("in the page: %s", f)
	}
	b.faults = nil
}

// do runs steps within 30 s (generous: make test runs it beside every other package).
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\nthe page says: %s", what, err, b.text("body"))
	}
}

// waitJS waits until the expression is true.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("%s: %v\nthe page says: %s", what, err, b.text("body"))
	}
}

// waitText waits until the element sel's text holds s.
func (b *browser) waitText(what, sel, s string) {
	b.t.Helper()
	b.waitJS(what, fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.textContent.includes(%s); })()`, js(sel), js(s)))
}

func (b *browser) text(sel string) string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%s) || {}).innerText || ''`, js(sel))))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return s
}

func (b *browser) eval(expr string) bool {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// goTo sets the address after # and waits for the view's marker.
func (b *browser) goTo(hash string) {
	b.t.Helper()
	b.eval("(location.hash = " + js(hash) + ", true)")
}

// shot saves a screenshot as console-<name>.png: of the viewport, or of the whole page.
func (b *browser) shot(name string, whole bool) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	capture := chromedp.CaptureScreenshot()
	if whole {
		capture = chromedp.FullScreenshot(100) // 100: PNG
	}
	png, err := chromedp.Run(ctx, capture)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shots, "console-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s (%d KB)", path, len(png)/1024)
}

func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestConsoleInABrowser signs in, watches a queue's page take a message enqueued while it is
// open, explains a delayed and a throttled message and a fairness key, redrives a dead-letter
// queue, and checks that names made of HTML are shown as text, with no dialog and no script
// error or policy violation in the page.
func TestConsoleInABrowser(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium binary: install Debian's chromium package (apt-get install -y chromium; .ci/run does) or set FILA_CHROMIUM to one")
	}
	start := time.Now()
	srv := startServer(t, apiKey)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := fila.Dial(ctx, srv.addr, &fila.Options{APIKey: apiKey})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []fila.QueueConfig{{Name: "orders"}, {Name: "payments", MaxAttempts: 1}, {Name: xssQueue}} {
		if _, err := c.CreateQueue(ctx, q); err != nil {
			t.Fatalf("CreateQueue %q: %v", q.Name, err)
		}
	}
	enqueue := func(m fila.Message) fila.MessageID {
		t.Helper()
		res, err := c.Enqueue(ctx, m)
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			t.Fatalf("Enqueue to %s: %v", m.Queue, err)
		}
		return res[0].ID
	}
	delayed := enqueue(fila.Message{Queue: "orders", FairnessKey: "tenant-a", Payload: []byte(`{"order": 1, "when": "later"}`), Delay: time.Hour})
	held := []fila.MessageID{
		enqueue(fila.Message{Queue: "orders", FairnessKey: "tenant-b", Payload: []byte(`{"order": 2}`)}),
		enqueue(fila.Message{Queue: "orders", FairnessKey: "tenant-b", Payload: []byte(`{"order": 3}`)}),
	}
	enqueue(fila.Message{Queue: "orders", FairnessKey: xssKey, Payload: []byte(`<script>alert(3)</script>`)})
	enqueue(fila.Message{Queue: xssQueue, Payload: []byte("x")})

	// One delivery a minute from orders: the first is taken and acked, the others wait for the
	// throttle's bucket.
	orders, err := c.Consume(ctx, "orders", fila.ConsumeOptions{MaxUnacked: 10,
		Throttles: []fila.Throttle{{Name: "one-a-minute", Limits: []fila.ThrottleLimit{{Max: 1, Window: time.Minute}}}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := orders.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	throttled := held[0]
	if d.ID == held[0] {
		throttled = held[1]
	}
	// payments allows one attempt: a nack dead-letters the message.
	enqueue(fila.Message{Queue: "payments", Headers: map[string]string{"source": "checkout"}, Payload: []byte(`{"card": "4242", "amount": 1999}`)})
	pay, err := c.Consume(ctx, "payments", fila.ConsumeOptions{MaxUnacked: 1})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := pay.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Nack(ctx, "card declined", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := srv.api(t, apiKey, "GET", "/api/v1/queues/payments.dlq/messages")
		if status == 200 && strings.Contains(body, pd.ID.String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nacked message is not in payments.dlq: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pay.Close()
	t.Logf("server up and filled in %v", time.Since(start).Round(time.Millisecond))

	b := newBrowser(t, bin, "http://"+srv.httpAddr)

	// "/" redirects to the console, which asks for a key.
	b.do("opening the console", chromedp.Navigate(b.base+"/"), chromedp.WaitVisible(chromedp.CSS("#api-key")))
	b.shot("login", false)
	b.do("signing in", chromedp.SendKeys(chromedp.CSS("#api-key"), apiKey), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitText("the overview's queue table", "main", "payments")
	b.waitText("the overview's totals", ".cards", "Queues")

	// The name made of HTML is text in the table: no image element, the name visible.
	b.waitText("the HTML-named queue", "main", xssQueue)
	if b.eval(`document.querySelectorAll('main img').length > 0`) {
		t.Errorf("the queue named %q made an <img> element", xssQueue)
	}
	b.shot("overview", true)

	// The queue's page: its messages, keys and the rate chart; a message enqueued now appears.
	b.goTo("#/queues/orders")
	b.waitText("orders' fairness keys", "#keys", "tenant-b")
	b.waitText("orders' HTML fairness key as text", "#keys", xssKey)
	live := fmt.Sprintf("live-%d", time.Now().UnixNano())
	enqueue(fila.Message{Queue: "orders", FairnessKey: "tenant-c", Payload: []byte(`{"note": "` + live + `"}`)})
	b.waitText("the message enqueued while the page is open", "#messages", live)
	b.waitText("the throttle on orders", "#throttles", "one-a-minute")
	if b.eval(`document.querySelectorAll('main img, main script').length > 0`) {
		t.Errorf("a fairness key or payload made of HTML made an element")
	}
	time.Sleep(2500 * time.Millisecond) // a second sample on the chart
	b.shot("queue", true)

	// Explain: the delayed message, the throttled one, a key.
	b.goTo("#/queues/orders/messages/" + delayed.String())
	b.waitJS("the delayed message's explanation", `!!document.querySelector('#reasons [data-reason="delayed"]')`)
	b.shot("explain-delayed", false)
	b.goTo("#/queues/orders/messages/" + throttled.String())
	b.waitJS("the throttled message's explanation", `!!document.querySelector('#reasons [data-reason="throttled"]')`)
	b.waitText("the throttle's name in the explanation", "#reasons", "one-a-minute")
	b.shot("explain-throttled", false)
	b.goTo("#/queues/orders/keys/tenant-b")
	b.waitText("the key's explanation", "main", "Backlog")
	b.shot("explain-key", false)

	// The dead-letter queue: its message with the error, then a redrive (two clicks: arm, confirm).
	b.goTo("#/queues/payments")
	b.waitText("payments' dead-lettered message", "#dlq", "card declined")
	b.eval(`(document.querySelector('#dlq').scrollIntoView(), window.scrollBy(0, -70), true)`)
	b.shot("dlq", false)
	b.do("redriving", chromedp.Click(chromedp.CSS("#redrive")), chromedp.Click(chromedp.CSS("#redrive")))
	b.waitText("the redrive's result", "#redrive-result", "Redriven: 1")
	b.waitText("the emptied DLQ", "#dlq", "No dead-lettered messages")
	if status, body := srv.api(t, apiKey, "GET", "/api/v1/queues/payments/messages"); status != 200 || !strings.Contains(body, "4242") {
		t.Errorf("after the redrive payments holds: %d %s", status, body)
	}

	// API keys (the bootstrap key is a superadmin).
	b.goTo("#/keys")
	b.waitJS("the API keys page", `!!document.querySelector('#key-form') && document.querySelector('main table') !== null`)
	b.do("creating a key", chromedp.SendKeys(chromedp.CSS("#key-name"), "ci-reader"), chromedp.Click(chromedp.CSS("#key-form button")))
	b.waitJS("the new key's secret", `(document.querySelector('#key-secret') || {}).textContent > ''`)
	b.waitText("the new key in the list", "main table", "ci-reader")
	b.shot("keys", false)

	b.checkFaults()
	t.Logf("browser test done in %v", time.Since(start).Round(time.Millisecond))
}
