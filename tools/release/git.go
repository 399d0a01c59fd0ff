package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// git runs git in dir, with env added to the environment.
type git struct {
	dir string
	env []string
}

// works reports whether dir is in a git work tree git can read (not so in an exported tree, or
// where git refuses a directory another user owns).
func (g git) works() bool {
	out, err := g.output("rev-parse", "--is-inside-work-tree")
	return err == nil && out == "true"
}

// output runs git with args and returns its standard output, trimmed.
func (g git) output(args ...string) (string, error) {
	var out bytes.Buffer
	err := g.exec(&out, nil, args...)
	return strings.TrimSpace(out.String()), err
}

// run runs git with args, stdin as its input.
func (g git) run(stdin []byte, args ...string) error {
	return g.exec(nil, stdin, args...)
}

func (g git) exec(stdout *bytes.Buffer, stdin []byte, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), g.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// with returns g with more environment.
func (g git) with(env ...string) git {
	return git{dir: g.dir, env: append(append([]string(nil), g.env...), env...)}
}

// bytes runs git with args and returns its standard output as it is.
func (g git) bytes(args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := g.exec(&out, nil, args...)
	return out.Bytes(), err
}

// outputIn runs git with args and stdin as its input, and returns its output, trimmed.
func (g git) outputIn(stdin []byte, args ...string) (string, error) {
	var out bytes.Buffer
	err := g.exec(&out, stdin, args...)
	return strings.TrimSpace(out.String()), err
}
