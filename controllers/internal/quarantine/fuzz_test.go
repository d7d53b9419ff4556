package quarantine

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzWithoutManagedFields: whatever the frame, withoutMember either
// leaves it alone or returns JSON that reads exactly as the frame did
// without object.metadata.managedFields, every other member as it was
// (read by encoding/json, which keeps the last of duplicate keys: the
// walk refuses duplicates, so there are none to keep).
func FuzzWithoutManagedFields(f *testing.F) {
	for _, seed := range []string{
		frame("ADDED", ruleWithMetadata(`"name":"a",`+managedFields)),
		frame("MODIFIED", ruleWithMetadata(managedFields+`,"name":"a"`)),
		frame("DELETED", ruleWithMetadata(managedFields)),
		frame("ADDED", ruleWithMetadata(`"name":"a","labels":{"managedFields":"x"}`)),
		`{"type":"ADDED","object":{"metadata":{"managedFields":[{"a":"]}"}],"b":"\"}"}}}`,
		`{"type":"ADDED","object":{"metadata":{"managedFields":1}}}{"x":1}`,
		`{"object":{"metadata":{"managedField\u0073":[],"managedFields":[]}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		out := withoutMember(doc, "object", "metadata", "managedFields")
		if out == nil {
			return
		}
		var before, after map[string]any
		if json.Unmarshal(doc, &before) != nil {
			// Not JSON: the API server never sends it; what comes out
			// must still be no more than the input cut.
			return
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("valid input, invalid output: %v\n%s\n%s", err, doc, out)
		}
		obj, _ := before["object"].(map[string]any)
		meta, _ := obj["metadata"].(map[string]any)
		if _, ok := meta["managedFields"]; !ok {
			t.Fatalf("cut a frame without managed fields:\n%s\n%s", doc, out)
		}
		delete(meta, "managedFields")
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("more than the managed fields changed:\n%s\n%s", doc, out)
		}
	})
}
