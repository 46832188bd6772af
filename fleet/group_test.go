package fleet

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

func TestGroup(t *testing.T) {
	tests := []struct {
		name                  string
		g                     Group
		want                  string
		kind, namespace, item string
	}{
		{"a scale set", GroupOf(GroupScaleSet, "arc", "acme"), "AutoscalingRunnerSet arc/acme", GroupScaleSet, "arc", "acme"},
		{"an owner", GroupOf("ReplicaSet", "ci", "pool-7d9"), "ReplicaSet ci/pool-7d9", "ReplicaSet", "ci", "pool-7d9"},
		{"no kind is no group", GroupOf("", "ci", "x"), "", "", "", ""},
		{"no namespace is no group", GroupOf("ReplicaSet", "", "x"), "", "", "", ""},
		{"no name is no group", GroupOf(GroupGenerateName, "ci", ""), "", "", "", ""},
		{"parsed back", ParseGroup("StatefulSet ci/runners"), "StatefulSet ci/runners", "StatefulSet", "ci", "runners"},
		{"not a group", ParseGroup("just-a-name"), "", "", "", ""},
		{"no namespace separator", ParseGroup("Kind name"), "", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.g.String())
			assert.Equal(t, tc.want == "", tc.g.IsZero())
			k, ns, n := tc.g.Parts()
			assert.Equal(t, []string{tc.kind, tc.namespace, tc.item}, []string{k, ns, n})
		})
	}
	assert.Equal(t, GroupOf("Job", "ci", "a"), ParseGroup("Job ci/a"), "one group, however made")
	assert.Equal(t, uintptr(8), unsafe.Sizeof(Group{}), "a pod view pays a pointer for its group")
}
