package fairqueue

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestInterleave(t *testing.T) {
	for _, tc := range []struct {
		name  string
		items []string
		want  []string
	}{
		{"nothing", nil, []string{}},
		{"one tenant keeps its order", []string{"b/1", "b/2", "b/3"}, []string{"b/1", "b/2", "b/3"}},
		{"a small tenant is not behind a large one", []string{"b/1", "b/2", "b/3", "b/4", "c/1"}, []string{"c/1", "b/1", "b/2", "b/3", "b/4"}},
		{"fewest first, then in order of first appearance", []string{"c/1", "a/1", "c/2", "a/2", "b/1"}, []string{"b/1", "c/1", "a/1", "c/2", "a/2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(Interleave(tc.items, tenantOf)).To(Equal(tc.want))
		})
	}
}
