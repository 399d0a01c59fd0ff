package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/filamq/fila/server/storage"
)

// check is `fila-server check --data-dir DIR`: it verifies a data directory offline (the server
// must not be running on it: a directory in use is refused, saying so) and changes nothing. Exit
// status: 0 sound, 1 damaged, 2 unusable arguments, a directory in use or one that cannot be read.
func check(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("fila-server check", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "", "the data directory to verify (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fila-server check --data-dir DIR")
		fmt.Fprintln(stderr, "  verifies a stopped server's data directory (manifest, every WAL chunk, every key and value) without changing it")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	rep, err := storage.Check(*dir)
	if errors.Is(err, storage.ErrInUse) {
		fmt.Fprintf(stderr, "fila-server check: %v.\n  check reads a stopped server's directory; to verify a running one's data, "+
			"take a backup (fila backup create) and check the backup's directory\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "fila-server check:", err)
		return 2
	}
	rep.WriteTo(stdout)
	if len(rep.Problems) > 0 {
		return 1
	}
	return 0
}
