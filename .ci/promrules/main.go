// Command promrules checks Prometheus rule files the way `promtool check rules` does, with Prometheus's own
// code: rulefmt.ParseFile (YAML structure, unknown fields, PromQL expressions, label and annotation templates,
// durations), then promtool's duplicate-rule lint. Built from the Prometheus Go module pinned in go.mod.
//
// Why not promtool itself: `go install github.com/prometheus/prometheus/cmd/promtool` links every service
// discovery (Kubernetes, AWS, Azure, GCP, ...) and did not finish within 10 minutes on kmirror's 2-core CI
// machine (still downloading its dependencies when stopped); this links only the rule parser and PromQL: a cold
// build (empty module and build caches) took 1 min 43 s there, 24 modules.
//
// Usage: promrules FILE...  (exit 0: valid; 1: a file failed, with promtool's messages on stderr)
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: promrules FILE...")
		os.Exit(1)
	}
	p := parser.NewParser(parser.Options{})
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	failed := false
	for _, f := range os.Args[1:] {
		fmt.Println("Checking", f)
		rgs, errs := rulefmt.ParseFile(f, false, model.UTF8Validation, p, logger)
		if errs == nil {
			errs = duplicates(rgs)
		}
		if errs != nil {
			failed = true
			fmt.Fprintln(os.Stderr, "  FAILED:")
			for _, e := range errs {
				fmt.Fprintln(os.Stderr, e.Error())
			}
			continue
		}
		n := 0
		for _, g := range rgs.Groups {
			n += len(g.Rules)
		}
		fmt.Printf("  SUCCESS: %d rules found\n", n)
	}
	if failed {
		os.Exit(1)
	}
}

// duplicates: two rules of one group with the same name and labels (promtool's lint, fatal here).
func duplicates(rgs *rulefmt.RuleGroups) []error {
	var errs []error
	for _, g := range rgs.Groups {
		seen := map[string]bool{}
		for _, r := range g.Rules {
			name := r.Record
			if name == "" {
				name = r.Alert
			}
			key := fmt.Sprintf("%s %v", name, r.Labels)
			if seen[key] {
				errs = append(errs, fmt.Errorf("group %s: duplicate rule %s with labels %v", g.Name, name, r.Labels))
			}
			seen[key] = true
		}
	}
	return errs
}
