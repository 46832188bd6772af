package docgen

import "testing"

// The message names the first line that differs, in each text.
func TestFirstDifference(t *testing.T) {
	for _, c := range []struct {
		a, b      string
		line      int
		was, made string
	}{
		{"a\nb\n", "a\nc\n", 2, `"b"`, `"c"`},
		{"a\n", "a\nb\n", 2, `""`, `"b"`},
		{"a", "a\n", 2, "nothing", `""`},
		{"", "a", 1, `""`, `"a"`},
	} {
		line, was, made := firstDifference(c.a, c.b)
		if line != c.line || was != c.was || made != c.made {
			t.Errorf("firstDifference(%q, %q) = %d, %s, %s; want %d, %s, %s", c.a, c.b, line, was, made, c.line, c.was, c.made)
		}
	}
}
