//go:build unix

package accesslog

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// OnReopenSignal calls reopen on every SIGUSR1 (what logrotate's
// postrotate sends, as to nginx) until stop is called.
func OnReopenSignal(reopen func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				reopen()
			case <-done:
				return
			}
		}
	}()
	return sync.OnceFunc(func() {
		signal.Stop(ch)
		close(done)
	})
}
