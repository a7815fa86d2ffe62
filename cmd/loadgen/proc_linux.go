package main

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal kills the service if this program dies first, so
// that no server is left listening.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
