//go:build linux

package proxy_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"unsafe"

	"rlproxy/internal/testutil/waitfor"
)

// waitAcked waits until the peer's TCP stack has acknowledged everything
// written on c, a FIN included (TIOCOUTQ, the unacknowledged bytes, reads
// 0): what c sent is then in the peer's receive queue. A c already closed
// counts as delivered (the peer closed it after reading).
func waitAcked(t testing.TB, c net.Conn) {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var failed error
	waitfor.True(t, "the peer acknowledged all that was sent", func() bool {
		var n int32
		var errno syscall.Errno
		err := rc.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
		})
		switch {
		case errors.Is(err, net.ErrClosed):
			return true
		case err != nil || errno != 0:
			failed = errors.Join(err, errno)
			return true
		}
		return n == 0
	})
	if failed != nil {
		t.Fatalf("TIOCOUTQ: %v", failed)
	}
}
