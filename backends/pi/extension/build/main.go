// Command build rebuilds iterion's pi extension bundle from its source
// (make pi-extension): run it from the repository's root.
package main

import (
	"fmt"
	"os"

	"github.com/iterion-bot/iterion/backends/pi/extension"
)

func main() {
	js, err := extension.Build(".")
	if err == nil {
		err = os.WriteFile(extension.Bundle, js, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pi-extension:", err)
		os.Exit(1)
	}
}
