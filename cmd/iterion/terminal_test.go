package main

import (
	"context"
	"io"
	"testing"
)

// promptSeen is a writer that tells when the prompt is printed.
type promptSeen chan struct{}

func (p promptSeen) Write(b []byte) (int, error) {
	close(p)
	return len(b), nil
}

// The terminal's single reader hands lines to the async answer loop, and
// to the pause prompt while one is open.
func TestTerminalDispatch(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	term := newTerminal(pr)
	go func() {
		_, _ = io.WriteString(pw, "MIT\n")
	}()
	if line := <-term.lines; line != "MIT" {
		t.Errorf("answer loop got %q, want MIT", line)
	}
	got := make(chan string)
	shown := make(promptSeen)
	go func() {
		line, _ := term.readAnswer(context.Background(), shown, "licence: ")
		got <- line
	}()
	// The prompt is open once it shows: a line typed then goes to it.
	<-shown
	go func() {
		_, _ = io.WriteString(pw, "yes\n")
		pw.Close()
	}()
	if line := <-got; line != "yes" {
		t.Errorf("prompt got %q, want yes", line)
	}
	if _, ok := term.readAnswer(context.Background(), io.Discard, ""); ok {
		t.Error("readAnswer after the end of input reported a line")
	}
}

// Ctrl-C (the command's context ending) ends a prompt that waits for a line.
func TestTerminalPromptEndsWithTheContext(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	defer pw.Close()
	term := newTerminal(pr)
	ctx, cancel := context.WithCancel(context.Background())
	shown := make(promptSeen)
	done := make(chan bool)
	go func() {
		_, ok := term.readAnswer(ctx, shown, "licence: ")
		done <- ok
	}()
	<-shown
	cancel()
	if <-done {
		t.Error("the prompt reported a line after Ctrl-C")
	}
}
