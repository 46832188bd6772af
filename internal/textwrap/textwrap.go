// Package textwrap breaks prose into lines for a terminal: the CLI's help
// and the demo's account of its sweeps wrap the same way.
package textwrap

import "strings"

// Wrap breaks text into lines of at most width where it can, each line
// starting with indent.
func Wrap(text string, width int, indent string) string {
	return Hanging(text, width, indent, indent)
}

// Hanging is Wrap with a first line that starts with first and the others
// with indent.
func Hanging(text string, width int, first, indent string) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(text) {
		switch {
		case i == 0:
			b.WriteString(first)
			n = len(first)
		case n+1+len(w) > width:
			b.WriteString("\n" + indent)
			n = len(indent)
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
