package textwrap

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHanging(t *testing.T) {
	for _, tc := range []struct {
		name, text, first, indent string
		width                     int
		want                      string
	}{
		{"fits on one line", "a b c", "", "", 10, "a b c"},
		{"breaks before the word that passes the width", "aaa bbb ccc", "", "", 7, "aaa bbb\nccc"},
		{"a word longer than the width stands alone", "a bbbbbbbbbb c", "", "", 5, "a\nbbbbbbbbbb\nc"},
		{"the first line and the others have their own indent", "aaa bbb ccc", "- ", "  ", 9, "- aaa bbb\n  ccc"},
		{"white space folds", "  a \n\t b  ", "", "", 10, "a b"},
		{"nothing stays nothing", " ", "> ", "", 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Hanging(tc.text, tc.width, tc.first, tc.indent))
		})
	}
	assert.Equal(t, "  a\n  b", Wrap("a b", 3, "  "), "Wrap indents every line alike")
}
