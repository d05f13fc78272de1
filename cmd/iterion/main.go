// Command iterion is the iterion bot and workflow tool: it validates and
// runs .bot workflows and serves the GitHub App and the REST API.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal asks the command to stop; a second one, if it
		// does not, ends the process as usual.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
