package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

var reclassifyNames = map[string]fila.Reclassify{
	"all": fila.ReclassifyAll, "unclassified": fila.ReclassifyUnclassifiedOnly, "none": fila.ReclassifyNone,
}

// defaultRedriveBatch is how many messages one Redrive request moves: small enough that the
// server answers well within --timeout, large enough that a million messages take few requests.
const defaultRedriveBatch = 10_000

func (a *app) redriveCommand() *cobra.Command {
	var count, batch uint64
	var reclassify string
	cmd := &cobra.Command{
		Use:   "redrive DLQ",
		Short: "Move dead-lettered messages back to their queue",
		Long: "Move dead-lettered messages back to their queue, oldest first, in batches of --batch\n" +
			"messages: each batch is one request (bounded by --timeout) that moves its messages at once,\n" +
			"so at every moment each message is counted in exactly one of the two queues. Progress is\n" +
			"shown on a terminal. Messages leased from the dead-letter queue stay there.",
		Args: exactArgs("DLQ"),
	}
	cmd.Flags().Uint64VarP(&count, "count", "n", 0, "how many messages, oldest first (0 = all)")
	cmd.Flags().Uint64Var(&batch, "batch", defaultRedriveBatch, "messages moved per request")
	cmd.Flags().StringVar(&reclassify, "reclassify", "all", "run on_enqueue again for: all, unclassified or none")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		rc, err := choice("reclassify", reclassify, reclassifyNames)
		if err != nil {
			return err
		}
		if batch == 0 {
			return usagef("--batch must be positive")
		}
		r := redrive{a: a, cmd: cmd, dlq: args[0], count: count, batch: batch, reclassify: rc}
		return r.run()
	}
	return cmd
}

// redrive is one `fila redrive`: a loop of Redrive requests until count messages moved or the
// dead-letter queue has no more that can move.
type redrive struct {
	a          *app
	cmd        *cobra.Command
	dlq        string
	count      uint64 // 0 = all
	batch      uint64
	reclassify fila.Reclassify
	total      fila.RedriveResult
}

func (r *redrive) run() error {
	c, ctx, cancel, err := r.a.request(r.cmd)
	if err != nil {
		return err
	}
	st, err := c.GetStats(ctx, r.dlq)
	cancel()
	if err != nil {
		return err
	}
	goal := st.Depth
	if r.count > 0 {
		goal = min(goal, r.count)
	}
	bar := r.a.progress(int64(goal), "redriving "+r.dlq)
	for r.count == 0 || r.total.Redriven < r.count {
		want := r.batch
		if r.count > 0 {
			want = min(want, r.count-r.total.Redriven)
		}
		res, err := r.step(c, want)
		if err != nil {
			bar.Exit()
			return r.failed(c, err)
		}
		r.total.Redriven += res.Redriven
		r.total.LeftUnclassified += res.LeftUnclassified
		r.total.RejectedByScript += res.RejectedByScript
		bar.Add64(int64(res.Redriven))
		if res.Redriven < want {
			break // what is left is in flight, or there is nothing left
		}
	}
	bar.Finish()
	return r.report()
}

func (r *redrive) step(c *fila.Client, want uint64) (*fila.RedriveResult, error) {
	ctx, cancel := context.WithTimeout(r.cmd.Context(), r.a.timeout.Duration)
	defer cancel()
	return c.Redrive(ctx, r.dlq, want, r.reclassify)
}

func (r *redrive) report() error {
	if r.a.json {
		return r.a.printJSON(r.total)
	}
	_, err := fmt.Fprintf(r.a.stdout, "redriven %d; left in %s: %d unclassified, %d rejected by script\n",
		r.total.Redriven, r.dlq, r.total.LeftUnclassified, r.total.RejectedByScript)
	return err
}

// failed reports a batch that got no answer or an error, saying what is known to have moved:
// when the answer did not arrive in time, the server may still complete the batch, so the
// message says how to see the outcome instead of claiming a failure.
func (r *redrive) failed(c *fila.Client, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		if r.total.Redriven == 0 {
			return err
		}
		return fmt.Errorf("%w (after %d messages had been redriven)", err, r.total.Redriven)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.a.timeout.Duration)
	defer cancel()
	left := "unknown"
	if st, serr := c.GetStats(ctx, r.dlq); serr == nil {
		left = fmt.Sprint(st.Depth)
	}
	return fmt.Errorf("redriven %d for certain; a batch of up to %d got no answer within %v and may still complete on the server "+
		"(%s messages in %s now; run 'fila queue stats %s', or use a smaller --batch or a longer --timeout)",
		r.total.Redriven, r.batch, r.a.timeout, left, r.dlq, r.dlq)
}

// progress returns a progress bar on stderr when stderr is a terminal, and a silent one otherwise.
func (a *app) progress(total int64, label string) *progressbar.ProgressBar {
	w := io.Discard
	if f, ok := a.stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			w = f
		}
	}
	return progressbar.NewOptions64(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
}
