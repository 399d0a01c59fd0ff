package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// healthcheck is `fila-server healthcheck [--http-addr HOST:PORT]`: the container image's health
// check (deploy/Dockerfile). It asks the server's HTTP listener for /readyz and then /healthz,
// which need no API key, so it works with authentication on and the distroless image needs no
// HTTP client of its own. Exit status: 0 when both answer 200, 1 otherwise (for any failure,
// arguments included: Docker reserves 2).
func healthcheck(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("fila-server healthcheck", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http-addr", "127.0.0.1:9555", "the server's HTTP listener (its http_listen; a wildcard host means this machine)")
	timeout := fs.Duration("timeout", 3*time.Second, "the time the two requests may take together")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fila-server healthcheck [--http-addr HOST:PORT] [--timeout D]")
		fmt.Fprintln(stderr, "  exits 0 when the server is ready (/readyz) and its store accepts writes (/healthz), else 1")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 1
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 1
	}
	base, err := probeBase(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "fila-server healthcheck:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var answers []string
	for _, path := range []string{"/readyz", "/healthz"} {
		body, err := probe(ctx, base+path)
		if err != nil {
			fmt.Fprintf(stdout, "unhealthy: %s: %v\n", path, err)
			return 1
		}
		answers = append(answers, path+": "+body)
	}
	fmt.Fprintln(stdout, strings.Join(answers, ", "))
	return 0
}

// probeBase is the URL of the listener at addr; a wildcard host (0.0.0.0, ::, empty), as an
// http_listen may have, is reached on the loopback interface.
func probeBase(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--http-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// probeClient asks the server directly, whatever proxy the environment names.
var probeClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// probe GETs url and returns its body's first line when it answers 200, else an error with the
// status and that line.
func probe(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	res, err := probeClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	line, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", res.Status, line)
	}
	return line, nil
}
