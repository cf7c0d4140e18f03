//go:build !unix

package accesslog

// OnReopenSignal does nothing where there is no SIGUSR1.
func OnReopenSignal(func()) (stop func()) { return func() {} }
