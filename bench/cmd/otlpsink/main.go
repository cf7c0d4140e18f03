// Command otlpsink is an OTLP/gRPC trace collector that keeps nothing: it
// counts the spans it receives and prints the count when stopped
// (SIGTERM or SIGINT). bench/instr.sh runs it behind the tracing configs,
// so that rlproxy's export is measured whole, serialisation included.
//
//	otlpsink -listen 127.0.0.1:4317
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"rlproxy/internal/testutil/otlpreceiver"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4317", "OTLP/gRPC address, HOST:PORT")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	var n atomic.Int64
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		_ = ln.Close()
	}()
	_ = otlpreceiver.Sink(ln, &n)
	fmt.Printf("%d spans\n", n.Load())
}
