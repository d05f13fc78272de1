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
	app := &App{Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	code := app.Run(ctx)
	app.Close()
	stop()
	os.Exit(code)
}
