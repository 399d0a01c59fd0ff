package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Backups are asked for over the server's HTTP listener (POST /api/v1/backup), not FIBP, which
// has no frame for them; the server writes the backup under its backup_dir and answers where.

// backupAnswer is the server's answer to POST /api/v1/backup.
type backupAnswer struct {
	Path        string  `json:"path"`
	Bytes       int64   `json:"bytes"`
	Files       int     `json:"files"`
	DurationMs  float64 `json:"duration_ms"`
	StoreFormat uint32  `json:"store_format"`
}

// backupFlags are fila backup create's own flags.
type backupFlags struct {
	httpAddr string
	wait     time.Duration
}

func (a *app) backupCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "backup", Short: "Back up a running broker"})
	f := &backupFlags{}
	create := &cobra.Command{
		Use:   "create",
		Short: "Write an online backup of the broker into its backup_dir",
		Long: "Asks the broker's HTTP listener (POST /api/v1/backup) for a backup of the running node: every message\n" +
			"whose enqueue was answered before the request is in it. The broker writes it into a directory of its own\n" +
			"under its backup_dir setting and answers the path; restore it with\n" +
			"fila-server restore --from PATH --data-dir DIR. With authentication on, --api-key must be a superadmin key;\n" +
			"it is sent in clear over HTTP, so keep http_listen on a private network.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.createBackup(cmd.Context(), f) },
	}
	create.Flags().StringVar(&f.httpAddr, "http-addr", envOr("FILA_HTTP_ADDR", "127.0.0.1:9555"),
		"the broker's HTTP listener host:port, its http_listen (env FILA_HTTP_ADDR)")
	create.Flags().DurationVar(&f.wait, "wait", time.Hour, "time limit for the broker to write the backup (--timeout bounds connecting)")
	cmd.AddCommand(create)
	return cmd
}

// createBackup asks for a backup and prints where it was written.
func (a *app) createBackup(ctx context.Context, f *backupFlags) error {
	ctx, cancel := context.WithTimeout(ctx, f.wait)
	defer cancel()
	url := "http://" + f.httpAddr + "/api/v1/backup"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		return usagef("--http-addr %q: %v", f.httpAddr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if a.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+a.apiKey)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: a.timeout.Duration}).DialContext}}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the broker's HTTP listener at %s (its http_listen; pass --http-addr or set FILA_HTTP_ADDR): %w", f.httpAddr, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return a.backupRefused(f.httpAddr, res.StatusCode, body)
	}
	var ans backupAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("the answer of %s is not a backup's: %v", url, err)
	}
	if a.json {
		return a.printJSON(ans)
	}
	return a.printf("backup written: %s (%d files, %s, %.0f ms)\nrestore it with: fila-server restore --from %s --data-dir DIR\n",
		ans.Path, ans.Files, sizeText(ans.Bytes), ans.DurationMs, ans.Path)
}

// backupRefused says why the broker did not write a backup.
func (a *app) backupRefused(addr string, status int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		if status == http.StatusNotFound {
			return fmt.Errorf("%s has no backup endpoint: it is not a fila-server HTTP listener, or its release predates backups (HTTP %d)", addr, status)
		}
		return fmt.Errorf("the broker did not write a backup: HTTP %d: %s", status, strings.TrimSpace(string(body)))
	}
	err := fmt.Errorf("the broker did not write a backup: %s (HTTP %d)", e.Error, status)
	if status == http.StatusUnauthorized && a.apiKey == "" {
		return fmt.Errorf("%w; pass --api-key or set FILA_API_KEY to a superadmin key", err)
	}
	return err
}

// sizeText writes a byte count with a binary unit.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
