package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/iterion-bot/iterion/dsl"
)

// compatFile is the verdict on one file of validate --compat.
type compatFile struct {
	File     string               `json:"file"`
	Verdict  string               `json:"verdict"` // ok, warnings, errors
	Errors   int                  `json:"errors"`
	Warnings int                  `json:"warnings"`
	First    *dsl.JSONDiagnostic  `json:"first,omitempty"`
	All      []dsl.JSONDiagnostic `json:"diagnostics,omitempty"`
}

// validateCompat checks every workflow file under dir, one line each and
// a summary: the check anyone can run over a tree of upstream workflows.
func (a *App) validateCompat(stdout io.Writer, dir string, opts dsl.Options, asJSON bool) error {
	var files []string
	root := a.path(dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && (filepath.Ext(p) == ".bot" || filepath.Ext(p) == ".iter") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walking %s: %w", dir, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("no .bot or .iter file under %s", dir)
	}
	slices.Sort(files)
	var out []compatFile
	var ok, warned, failed int
	for _, p := range files {
		rel, _ := filepath.Rel(root, p)
		cf := compatFile{File: filepath.Join(dir, rel)}
		src, err := a.readWorkflow(p)
		var ds dsl.Diagnostics
		if err != nil {
			cf.Errors = 1
			cf.All = []dsl.JSONDiagnostic{{Source: "file", Severity: "error", File: cf.File, Message: err.Error()}}
		} else {
			_, ds = opts.CompileSource(cf.File, src)
			cf.Errors, cf.Warnings = ds.Count()
			cf.All = ds.JSON()
		}
		for i := range cf.All {
			if cf.All[i].Severity == "error" || cf.Errors == 0 {
				cf.First = &cf.All[i]
				break
			}
		}
		switch {
		case cf.Errors > 0:
			cf.Verdict = "errors"
			failed++
		case cf.Warnings > 0:
			cf.Verdict = "warnings"
			warned++
		default:
			cf.Verdict = "ok"
			ok++
		}
		out = append(out, cf)
		if asJSON {
			continue
		}
		switch cf.Verdict {
		case "ok":
			fmt.Fprintf(stdout, "%s: ok\n", cf.File)
		case "warnings":
			fmt.Fprintf(stdout, "%s: ok with %s: %s\n", cf.File, plural(cf.Warnings, "warning"), oneDiagnostic(cf.First))
		default:
			fmt.Fprintf(stdout, "%s: %s: %s\n", cf.File, plural(cf.Errors, "error"), oneDiagnostic(cf.First))
		}
	}
	summary := fmt.Sprintf("%d files: %d ok, %d with warnings, %d with errors", len(files), ok, warned, failed)
	if asJSON {
		for i := range out {
			out[i].All = nil // the first is enough; validate FILE gives the rest
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"files": out, "summary": map[string]int{"files": len(files), "ok": ok, "warnings": warned, "errors": failed}}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, summary)
	}
	if failed > 0 {
		return exitCodeError(exitError)
	}
	return nil
}

func oneDiagnostic(d *dsl.JSONDiagnostic) string {
	if d == nil {
		return ""
	}
	code := ""
	if d.Code != "" {
		code = " [" + d.Code + "]"
	}
	return fmt.Sprintf("%d:%d: %s%s: %s", d.Line, d.Column, d.Severity, code, d.Message)
}
