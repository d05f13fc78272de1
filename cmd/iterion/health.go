package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newHealthCmd is `iterion health`: the container's health check, which
// has no curl to call.
func (a *App) newHealthCmd() *cobra.Command {
	var url string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health [--url URL]",
		Short: "Check that a running iterion serve answers /healthz (a container's health check)",
		Long: `health asks a running iterion serve for /healthz and exits 0 when it answers 200,
1 otherwise, saying why. Without --url it asks the server of this environment: the
port of --addr's default, $ITERION_ADDR (or :8080), on the loopback.`,
		Example: "  iterion health\n  iterion health --url http://127.0.0.1:9090/healthz",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				var err error
				if url, err = healthURL(a.getenv("ITERION_ADDR")); err != nil {
					return usageError{err}
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := checkHealth(ctx, url); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", url)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the URL to ask (default: /healthz of $ITERION_ADDR on the loopback)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

// healthURL is the /healthz URL of a server listening on addr (host:port,
// ":8080" when empty): a wildcard host is asked on the loopback.
func healthURL(addr string) (string, error) {
	if addr == "" {
		addr = defaultAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("ITERION_ADDR=%q is not host:port (like :8080): %v", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// checkHealth asks url and wants a 200.
func checkHealth(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usageError{fmt.Errorf("--url %q: %v", url, err)}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s did not answer in time: is iterion serve running and listening there?", url)
		}
		return fmt.Errorf("%s: %v (is iterion serve running and listening there?)", url, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s: %s", url, res.Status, strings.TrimSpace(termLine(string(body))))
	}
	return nil
}
