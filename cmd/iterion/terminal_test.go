package main

import (
	"io"
	"testing"
)

// The terminal's single reader hands lines to the async answer loop, and
// to the pause prompt while one is open.
func TestTerminalDispatch(t *testing.T) {
	pr, pw := io.Pipe()
	term := newTerminal(pr)
	go func() {
		_, _ = io.WriteString(pw, "MIT\n")
	}()
	if line := <-term.lines; line != "MIT" {
		t.Errorf("answer loop got %q, want MIT", line)
	}
	got := make(chan string)
	go func() {
		line, _ := term.readAnswer()
		got <- line
	}()
	// The prompt is open once readAnswer has set the flag; a line written
	// before that would go to the answer loop, so write after it is set.
	for !term.prompting.Load() {
	}
	go func() {
		_, _ = io.WriteString(pw, "yes\n")
		pw.Close()
	}()
	if line := <-got; line != "yes" {
		t.Errorf("prompt got %q, want yes", line)
	}
	if _, ok := term.readAnswer(); ok {
		t.Error("readAnswer after the end of input reported a line")
	}
}
