package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"
)

// app holds the global flags, the I/O streams and the connection of one invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	addr    string
	apiKey  string
	useTLS  bool
	caFile  string
	tls     fila.TLSFiles // --cert, --key, --server-name (and --ca)
	json    bool
	timeout duration

	client *fila.Client
}

// duration is a time.Duration flag value that prints itself for error messages.
type duration struct{ time.Duration }

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "fila",
		Short:         "Administer a Fila broker, enqueue and consume messages",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	group(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.addr, "addr", envOr("FILA_ADDR", "127.0.0.1:5555"), "broker address host:port, or nodes of a cluster separated by commas, tried in turn (env FILA_ADDR)")
	pf.StringVar(&a.apiKey, "api-key", os.Getenv("FILA_API_KEY"), "API key (env FILA_API_KEY)")
	pf.BoolVar(&a.useTLS, "tls", false, "connect with TLS")
	pf.StringVar(&a.caFile, "ca", "", "PEM file of the CA that signed the server certificate (implies --tls)")
	pf.StringVar(&a.tls.Cert, "cert", "", "PEM client certificate, for a server that requires mTLS (implies --tls; needs --key)")
	pf.StringVar(&a.tls.Key, "key", "", "PEM private key of --cert")
	pf.StringVar(&a.tls.ServerName, "server-name", "", "name the server certificate must carry (default: the host of --addr; implies --tls)")
	pf.BoolVar(&a.json, "json", false, "print JSON instead of tables")
	a.timeout.Duration = 10 * time.Second
	pf.DurationVar(&a.timeout.Duration, "timeout", a.timeout.Duration, "time limit for connecting and for each request")
	queue := a.queueCommand()
	queue.AddCommand(a.queuePeekCommand(), a.queuePurgeCommand()) // messages.go: over the HTTP listener
	root.AddCommand(queue, a.enqueueCommand(), a.consumeCommand(), a.redriveCommand(),
		a.configCommand(), a.clusterCommand(), a.keyCommand(), a.aclCommand(), a.riftCommand(), a.versionCommand(), a.ackCommand(), a.nackCommand(),
		a.throttleCommand(), a.luaCommand(), a.backupCommand(), a.messageCommand(), a.explainCommand())
	a.completeQueueArgs(root)
	return root
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// group makes cmd a command that only holds subcommands: without arguments it prints its
// help; an unknown subcommand is a usage error.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd
}

// commandName is the command path without the program name, for messages.
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// Argument validators that report usage errors.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", commandName(cmd), args[0])
	}
	return nil
}

func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usagef("%s needs %s", commandName(cmd), strings.Join(names, " "))
		}
		return nil
	}
}

func rangeArgs(lo, hi int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef("usage: %s %s", commandName(cmd), names)
		}
		return nil
	}
}

// seeds are the addresses of --addr: one broker, or several nodes of a cluster.
func (a *app) seeds() []string {
	var seeds []string
	for s := range strings.SplitSeq(a.addr, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// connect dials the broker once per invocation: the first address of --addr that answers.
func (a *app) connect(ctx context.Context) (*fila.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	c, err := a.dial(ctx, a.seeds()...)
	if err != nil {
		return nil, err
	}
	a.client = c
	return c, nil
}

// dial connects to the first of addrs that answers, with the connection flags.
func (a *app) dial(ctx context.Context, addrs ...string) (*fila.Client, error) {
	if len(addrs) == 0 {
		return nil, usagef("--addr names no address")
	}
	opts := &fila.Options{APIKey: a.apiKey, DialTimeout: a.timeout.Duration}
	if a.useTLS || a.caFile != "" || a.tls != (fila.TLSFiles{}) {
		files := a.tls
		files.CA = a.caFile
		cfg, err := files.Config()
		if err != nil {
			return nil, err
		}
		opts.TLS = cfg
	}
	c, err := fila.DialSeeds(ctx, addrs, opts)
	if err != nil {
		if explained := a.explainConnect(err); explained != err || len(addrs) == 1 {
			return nil, explained
		}
		return nil, fmt.Errorf("none of the %d addresses of --addr (%s) answered; the last: %w", len(addrs), strings.Join(addrs, ", "), err)
	}
	return c, nil
}

func (a *app) close() {
	if a.client != nil {
		a.client.Close()
	}
}

// request connects and returns a context bounded by --timeout for one request.
func (a *app) request(cmd *cobra.Command) (*fila.Client, context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout.Duration)
	c, err := a.connect(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return c, ctx, cancel, nil
}

// ask makes one request on a connected client (do) and prints its answer: as JSON with --json,
// else through text.
func ask[T any](a *app, cmd *cobra.Command, do func(context.Context, *fila.Client) (T, error), text func(T) error) error {
	c, ctx, cancel, err := a.request(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	v, err := do(ctx, c)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(v)
	}
	return text(v)
}

// printf writes to the command's output.
func (a *app) printf(format string, args ...any) error {
	_, err := fmt.Fprintf(a.stdout, format, args...)
	return err
}

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printTable writes a borderless, left-aligned table; a nil header prints rows only.
func (a *app) printTable(header []string, rows [][]string) error {
	var buf bytes.Buffer
	t := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenRows: tw.Off, BetweenColumns: tw.Off},
				Lines:      tw.Lines{ShowHeaderLine: tw.Off},
			},
		})),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithPadding(tw.Padding{Right: "   ", Overwrite: true}),
		tablewriter.WithTrimSpace(tw.Off),
	)
	if header != nil {
		t.Header(header)
	}
	shownRows := make([][]string, len(rows)) // cells carry names and keys producers chose
	for i, row := range rows {
		shownRows[i] = make([]string, len(row))
		for j, cell := range row {
			shownRows[i][j] = shown(cell)
		}
	}
	if err := t.Bulk(shownRows); err != nil {
		return err
	}
	if err := t.Render(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := fmt.Fprintln(a.stdout, strings.TrimRight(line, " \n")); err != nil {
			return err
		}
	}
	return nil
}

// Formatting helpers for table cells.
func num[T ~uint32 | ~uint64 | ~int64 | ~int](v T) string { return fmt.Sprint(v) }

func orDash[T comparable](v T) string {
	var zero T
	if v == zero {
		return "-"
	}
	return fmt.Sprint(v)
}

func timeCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
