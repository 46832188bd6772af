// Command promql-names lists the metric names each PromQL expression
// selects, parsed by Prometheus's own parser, so that test/monitoring can
// check the shipped alerts and dashboard name only the reaper's contract
// metrics without Prometheus entering the product's go.mod.
//
// It reads a JSON array of expressions on stdin and writes a JSON array of
// answers on stdout, one per expression in the same order: the names its
// vector selectors carry, sorted and unique, or the parser's error. A
// selector without a literal name (a {__name__=~"..."} matcher) is listed
// as its matchers' text, which no metric name equals, so a checker that
// wants names rejects it rather than missing what it selects.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/prometheus/prometheus/promql/parser"
)

// answer is what one expression selects.
type answer struct {
	Expr  string   `json:"expr"`
	Names []string `json:"names,omitempty"`
	Error string   `json:"error,omitempty"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "promql-names:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	var exprs []string
	if err := json.NewDecoder(in).Decode(&exprs); err != nil {
		return fmt.Errorf("read the expressions (a JSON array of strings): %w", err)
	}
	p := parser.NewParser(parser.Options{})
	answers := make([]answer, 0, len(exprs))
	for _, e := range exprs {
		answers = append(answers, names(p, e))
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(answers); err != nil {
		return fmt.Errorf("write the answers: %w", err)
	}
	return nil
}

func names(p parser.Parser, expr string) answer {
	a := answer{Expr: expr}
	node, err := p.ParseExpr(expr)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			a.Names = append(a.Names, vs.Name)
			return nil
		}
		a.Names = append(a.Names, vs.String())
		return nil
	})
	slices.Sort(a.Names)
	a.Names = slices.Compact(a.Names)
	return a
}
