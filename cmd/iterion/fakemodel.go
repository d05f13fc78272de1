package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/backends/fakellm"
)

func (a *App) newFakeModelCmd() *cobra.Command {
	var scriptPath, addr string
	cmd := &cobra.Command{
		Use:   "fake-model --script FILE [--addr HOST:PORT]",
		Short: "Serve a scripted model on the Anthropic and OpenAI APIs, for tests and offline demos",
		Long: `fake-model serves the scripted turns of FILE as a model server speaking the
Anthropic Messages API (POST /v1/messages) and the OpenAI chat-completions API
(POST /v1/chat/completions), streaming and not. Point a client's base URL at the
printed address (with /v1 for OpenAI clients). Each request is answered by the
first unused turn whose match holds, else by the fallback, else by an HTTP 500
naming the request. Requests are logged on stderr. The server runs until
interrupted.

A script is JSON, for example:

  {"turns": [{"match": {"has_tool_result": false},
              "tool_calls": [{"name": "bash", "input": {"command": "ls"}}]},
             {"match": {"tool_result_for": "bash"}, "text": "DONE"}],
   "fallback": {"text": "ok"}}

See the package documentation of backends/fakellm for every field.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scriptPath == "" {
				return usageError{errors.New("fake-model needs --script FILE")}
			}
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return usageError{fmt.Errorf("--addr %q: write HOST:PORT, such as 127.0.0.1:0", addr)}
			}
			script, err := fakellm.LoadScript(a.path(scriptPath))
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelDebug}))
			srv := fakellm.New(script, fakellm.Options{Logger: logger})
			return serveFakeModel(cmd.Context(), srv, addr, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&scriptPath, "script", "", "the script: a JSON file of turns")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "address to listen on; port 0 picks a free one")
	return cmd
}

// serveFakeModel serves srv on addr, announces its URL on stdout and
// returns nil when ctx ends (an interrupt).
func serveFakeModel(ctx context.Context, srv *fakellm.Server, addr string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for the fake model: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: readHeaderTimeout}
	fmt.Fprintf(stdout, "fake model server listening on http://%s\n", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving the fake model: %w", err)
	case <-ctx.Done():
	}
	// Streams in flight get a moment to finish; the fake answers at once.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("stopping the fake model: %w", err)
	}
	return nil
}
