package main

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// setParentDeathSignal kills the service if this program dies first, so
// that no server is left listening.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// evictFromPageCache drops the binary's pages from the page cache, so that
// the service maps them as read from disk. A binary the linker has just
// written can sit in the page cache in large folios, which the kernel maps
// whole: measured up to 9 MiB more file-backed RSS for the same binary.
func evictFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
