package serverproc

import (
	"os/exec"
	"syscall"
)

// dieWithTests makes the kernel stop a server subprocess when the test process dies without
// stopping it (a panic, a -timeout, a kill), so that no broker outlives its test run.
func dieWithTests(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
