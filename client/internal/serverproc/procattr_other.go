//go:build !linux

package serverproc

import "os/exec"

// dieWithTests has no portable equivalent outside Linux: a server subprocess may outlive a test
// process that dies without stopping it.
func dieWithTests(*exec.Cmd) {}
