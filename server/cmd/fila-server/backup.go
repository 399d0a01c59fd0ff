package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/config"
	"github.com/filamq/fila/server/internal/buildinfo"
	"github.com/filamq/fila/server/rift/stream"
	"github.com/filamq/fila/server/storage"
)

// Online backups (docs/backup.md). POST /api/v1/backup on the HTTP listener writes a backup of
// the running node into a directory of its own under backup_dir and answers where, how large and
// how long it took. A backup is a data directory a server can start on (after fila-server
// restore copies it into place): the broker's store as of one moment (broker.Checkpoint: every
// request answered before the POST arrived is in it), Rift's durable streams as of a moment
// just after, and backupManifest, written last. It is written under <name>.partial and renamed
// into place once complete, so that a crash mid-backup leaves no directory that looks whole.
//
// Who may ask: with authentication on, a superadmin API key in Authorization: Bearer <key>,
// checked as a FIBP Handshake's key is, from any address; with it off, clients on loopback only,
// unless backup_allow_remote. Against cross-site requests from a browser, a request must have
// Content-Type: application/json and no Origin header (a browser adds Origin to every
// cross-site POST, and sends that content type only after a preflight, which is never
// answered); cookies are never read.

// backupPath is the endpoint's path.
const backupPath = "/api/v1/backup"

// backupManifest is the file that makes a directory a complete backup.
const backupManifest = "BACKUP.json"

// backupFormat is the version of the backup layout; restore refuses another.
const backupFormat = 1

// manifest is backupManifest's content.
type manifest struct {
	Format      int       `json:"format"`       // backupFormat
	Created     time.Time `json:"created"`      // when the store was copied
	Server      string    `json:"server"`       // the release that wrote it
	StoreFormat uint32    `json:"store_format"` // storage.FormatVersion of the copied store
	Rift        bool      `json:"rift"`         // Rift's durable streams are in rift/
}

// backupResult is the endpoint's answer.
type backupResult struct {
	Path        string  `json:"path"`         // the backup's directory, absolute
	Bytes       int64   `json:"bytes"`        // the size of its files (hard-linked ones share their blocks with the store)
	Files       int     `json:"files"`        // how many
	DurationMs  float64 `json:"duration_ms"`  // from the request to the answer
	StoreFormat uint32  `json:"store_format"` // storage.FormatVersion
}

// backups serves backupPath. The broker and Rift's streams are set once they are open; close
// waits for a backup being written and refuses later ones (the stores are about to close).
type backups struct {
	dir         string
	allowRemote bool
	log         *slog.Logger
	b           atomic.Pointer[broker.Broker]
	streams     atomic.Pointer[stream.Store]

	mu     sync.Mutex // held while a backup is written, and by close
	closed bool
}

func newBackups(cfg config.Config, log *slog.Logger) *backups {
	return &backups{dir: cfg.BackupDir, allowRemote: cfg.BackupAllowRemote, log: log}
}

// close waits for the backup being written, if any, and refuses every later one.
func (bk *backups) close() {
	bk.mu.Lock()
	bk.closed = true
	bk.mu.Unlock()
}

// httpError is a refusal with its status.
type httpError struct {
	status int
	msg    string
	code   string // the admin API's machine-readable reason (adminapi.go); empty elsewhere
}

func (e *httpError) Error() string { return e.msg }

func refuse(status int, format string, args ...any) *httpError {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

func (bk *backups) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if herr := bk.allowed(r); herr != nil {
		writeJSONError(w, herr)
		return
	}
	if !bk.mu.TryLock() {
		writeJSONError(w, refuse(http.StatusConflict, "a backup is being written already; ask again once it is done"))
		return
	}
	defer bk.mu.Unlock()
	if bk.closed {
		writeJSONError(w, refuse(http.StatusServiceUnavailable, "the server is stopping"))
		return
	}
	// A backup of a large store on another file system may take longer than the listener's
	// timeouts (httpTimeout), which are for clients that stall, not for this server's own work.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	res, err := bk.write(start)
	if err != nil {
		bk.log.Error("backup failed", "err", err)
		var herr *httpError
		if !errors.As(err, &herr) {
			herr = refuse(http.StatusInternalServerError, "backup failed: %v", err)
		}
		writeJSONError(w, herr)
		return
	}
	bk.log.Info("backup written", "path", res.Path, "bytes", res.Bytes, "files", res.Files, "took", time.Since(start))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// allowed checks the request's method, headers and caller.
func (bk *backups) allowed(r *http.Request) *httpError {
	if r.Method != http.MethodPost {
		return refuse(http.StatusMethodNotAllowed, "%s takes POST", backupPath)
	}
	if r.Header.Get("Origin") != "" {
		return refuse(http.StatusForbidden, "requests from a web page (with an Origin header) are refused")
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return refuse(http.StatusUnsupportedMediaType, "send Content-Type: application/json")
	}
	b := bk.b.Load()
	if b == nil {
		return refuse(http.StatusServiceUnavailable, "the server is still opening its store; ask again once /readyz says ready")
	}
	if herr := bk.authorized(r, b); herr != nil {
		return herr
	}
	if bk.dir == "" {
		return refuse(http.StatusConflict, "backups are off: set backup_dir (--backup-dir, FILA_BACKUP_DIR) to the directory that is to hold them")
	}
	return nil
}

// authorized checks the caller: with authentication on as the admin API does (caller: a known,
// unexpired key), and then that the key is a superadmin key; with it off, an address on loopback
// unless backup_allow_remote. (allowed has refused an Origin header already.)
func (bk *backups) authorized(r *http.Request, b *broker.Broker) *httpError {
	if !b.Auth().Enabled() {
		if !bk.allowRemote && !fromLoopback(r) {
			return refuse(http.StatusForbidden, "authentication is off, so backups are taken for clients on loopback only "+
				"(turn authentication on, or set backup_allow_remote)")
		}
		return nil
	}
	p, herr := caller(b, r)
	switch {
	case herr != nil:
		return herr
	case p != nil && !p.Superadmin():
		return refuse(http.StatusForbidden, "API key %s is not a superadmin key; a backup copies every queue", p.ID())
	}
	return nil
}

// fromLoopback reports whether the request came over a loopback address.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// write writes one backup: under <name>.partial, renamed to <name> once complete.
func (bk *backups) write(start time.Time) (backupResult, error) {
	if err := os.MkdirAll(bk.dir, 0o755); err != nil {
		return backupResult{}, err
	}
	final, err := bk.newName(start)
	if err != nil {
		return backupResult{}, err
	}
	partial := final + ".partial"
	m, err := bk.copyStores(partial, start)
	if err == nil {
		err = writeManifest(partial, m)
	}
	if err == nil {
		err = os.Rename(partial, final)
	}
	if err == nil {
		err = syncPath(bk.dir)
	}
	if err != nil {
		os.RemoveAll(partial)
		return backupResult{}, err
	}
	files, bytes, err := treeSize(final)
	if err != nil {
		return backupResult{}, err
	}
	abs, err := filepath.Abs(final)
	if err != nil {
		abs = final
	}
	return backupResult{Path: abs, Bytes: bytes, Files: files, StoreFormat: storage.FormatVersion,
		DurationMs: float64(time.Since(start).Microseconds()) / 1000}, nil
}

// newName returns a path under bk.dir for a backup started at t that no backup has taken.
func (bk *backups) newName(t time.Time) (string, error) {
	base := filepath.Join(bk.dir, "fila-backup-"+t.UTC().Format("20060102T150405Z"))
	for i := 0; i < 100; i++ {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		_, err1 := os.Lstat(name)
		_, err2 := os.Lstat(name + ".partial")
		if errors.Is(err1, fs.ErrNotExist) && errors.Is(err2, fs.ErrNotExist) {
			return name, nil
		}
	}
	return "", fmt.Errorf("%s: 100 backups named after this second exist already", base)
}

// copyStores copies the broker's store and Rift's durable streams into dir.
func (bk *backups) copyStores(dir string, start time.Time) (manifest, error) {
	m := manifest{Format: backupFormat, Created: start.UTC(), Server: buildinfo.Read().String("fila-server"),
		StoreFormat: storage.FormatVersion}
	if err := bk.b.Load().Checkpoint(dir); err != nil {
		if errors.Is(err, storage.ErrWritesFailing) {
			return m, refuse(http.StatusServiceUnavailable, "the store does not accept writes, so it is not copied: %v", err)
		}
		return m, err
	}
	if st := bk.streams.Load(); st != nil {
		taken, err := st.Checkpoint(filepath.Join(dir, riftDirName))
		if err == nil && taken {
			err = storage.TrimWALs(filepath.Join(dir, riftDirName))
		}
		if err != nil {
			return m, fmt.Errorf("rift streams: %w", err)
		}
		m.Rift = taken
	}
	return m, nil
}

// writeManifest writes backupManifest into dir, synced, last of the backup's files.
func writeManifest(dir string, m manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, backupManifest), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	return syncPath(dir)
}

// syncPath fsyncs a directory.
func syncPath(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// treeSize counts the regular files under dir and their bytes.
func treeSize(dir string) (files int, bytes int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		files++
		bytes += info.Size()
		return nil
	})
	return files, bytes, err
}

// writeJSONError answers {"error": msg} (and "code" when the refusal has one) with the refusal's
// status.
func writeJSONError(w http.ResponseWriter, e *httpError) {
	w.Header().Set("Content-Type", "application/json")
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="fila"`)
	}
	if e.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
	}
	w.WriteHeader(e.status)
	body := map[string]string{"error": e.msg}
	if e.code != "" {
		body["code"] = e.code
	}
	_ = json.NewEncoder(w).Encode(body)
}
