package quarantine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

const managedFields = `"managedFields":[{"manager":"bench","operation":"Update","apiVersion":"gateway.portico.dev/v1alpha1",` +
	`"time":"2026-11-29T20:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:hosts":{}}}}]`

// ruleWithMetadata is an APIRule whose metadata members are the given ones.
func ruleWithMetadata(members string) string {
	return `{"apiVersion":"gateway.portico.dev/v1alpha1","kind":"APIRule","metadata":{` + members + `},` +
		`"spec":{"hosts":["a.example.com"],"gateway":"istio-system/public"}}`
}

// withoutMember removes exactly the member it names, wherever it stands
// among its object's members, and nothing that only looks like it; it
// leaves alone any document it is not sure of.
func TestWithoutMember(t *testing.T) {
	name := `"name":"a","namespace":"team-a"`
	cases := []struct {
		name, doc string
		want      string // "" means nil: left as it is
	}{
		{"between members", frame("ADDED", ruleWithMetadata(name+","+managedFields+`,"uid":"u"`)),
			frame("ADDED", ruleWithMetadata(name+`,"uid":"u"`))},
		{"first member", frame("ADDED", ruleWithMetadata(managedFields+","+name)), frame("ADDED", ruleWithMetadata(name))},
		{"last member", frame("MODIFIED", ruleWithMetadata(name+","+managedFields)), frame("MODIFIED", ruleWithMetadata(name))},
		{"the only member", frame("DELETED", ruleWithMetadata(managedFields)), frame("DELETED", ruleWithMetadata(""))},
		{"spaces around", `{"type":"ADDED", "object": {"kind":"APIRule", "metadata": {"name":"a" , ` + managedFields + ` } } }`,
			`{"type":"ADDED", "object": {"kind":"APIRule", "metadata": {"name":"a"} } }`},
		{"none", frame("ADDED", ruleWithMetadata(name)), ""},
		{"the key in a label", frame("ADDED", ruleWithMetadata(name+`,"labels":{"managedFields":"x"}`)), ""},
		{"the key in the spec", frame("ADDED", `{"kind":"APIRule","metadata":{"name":"a"},"spec":{"managedFields":[]}}`), ""},
		{"the key at the object's top", frame("ADDED", `{"kind":"APIRule","managedFields":[],"metadata":{"name":"a"}}`), ""},
		{"another case", frame("ADDED", ruleWithMetadata(name+`,"ManagedFields":[]`)), ""},
		{"an escaped key that may spell it", frame("ADDED", ruleWithMetadata(name+`,"managedField\u0073":[]`)), ""},
		{"twice", frame("ADDED", ruleWithMetadata(managedFields+","+managedFields)), ""},
		{"metadata twice", frame("ADDED", `{"kind":"APIRule","metadata":{"name":"a"},"metadata":{`+managedFields+`}}`), ""},
		{"two values on a line", frame("ADDED", ruleWithMetadata(managedFields)) + frame("ADDED", ruleWithMetadata(name)), ""},
		{"part of a value", strings.TrimSuffix(frame("ADDED", ruleWithMetadata(managedFields)), "}"), ""},
		{"not an object", `["object"]`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := withoutMember([]byte(tc.doc), "object", "metadata", "managedFields")
			if tc.want == "" {
				if got != nil {
					t.Errorf("changed to %s", got)
				}
				return
			}
			if string(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Errorf("not JSON: %s", got)
			}
		})
	}
}

// With WithoutManagedFields, a watch event's object is checked and passed
// on as the API server sent it but for its managed fields, which no
// decoder then reads: an object whose managed fields would not decode is
// no longer set aside for them, one whose status does not decode still
// is, and every other frame is as without the option.
func TestEventWithoutManagedFields(t *testing.T) {
	badManagedFields := `"managedFields":[{"manager":"x","time":"not a time"}]`
	withFields := func(obj string, fields string) string {
		return strings.Replace(obj, `"metadata":{`, `"metadata":{`+fields+`,`, 1)
	}
	f := newFilter(testScheme)
	f.withoutManagedFields = true
	plain := newFilter(testScheme)
	for _, tc := range []struct {
		name, frame, want string
		reports           []string
	}{
		{"good", frame("ADDED", withFields(goodRule, managedFields)), frame("ADDED", goodRule), nil},
		{"managed fields that do not decode", frame("MODIFIED", withFields(goodRule, badManagedFields)), frame("MODIFIED", goodRule), nil},
		{"bad status, managed fields removed first", frame("ADDED", withFields(badStatusRule, managedFields)), "", []string{"APIRule/bad-status:StatusRemoved"}},
		{"bad spec", frame("ADDED", withFields(badSpecRule, managedFields)), "", []string{"APIRule/bad-spec:Dropped"}},
		{"BOOKMARK", frame("BOOKMARK", `{"kind":"APIRule","apiVersion":"gateway.portico.dev/v1alpha1","metadata":{"resourceVersion":"12"}}`),
			frame("BOOKMARK", `{"kind":"APIRule","apiVersion":"gateway.portico.dev/v1alpha1","metadata":{"resourceVersion":"12"}}`), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"event", "line"} {
				var out []byte
				var reports []Report
				if path == "event" {
					out, reports = f.event([]byte(tc.frame))
				} else {
					var whole bool
					out, reports, whole = f.line([]byte(tc.frame))
					if !whole {
						t.Fatalf("line: not whole")
					}
				}
				if got := reasons(reports); fmt.Sprint(got) != fmt.Sprint(orEmpty(tc.reports)) {
					t.Errorf("%s: reports %v, want %v", path, got, tc.reports)
				}
				if tc.want != "" && string(out) != tc.want {
					t.Errorf("%s: got\n%s\nwant\n%s", path, out, tc.want)
				}
				if strings.Contains(string(out), "managedFields") {
					t.Errorf("%s: managed fields passed on: %s", path, out)
				}
			}
			if tc.reports != nil {
				// What is set aside is set aside as without the option.
				_, reports := plain.event([]byte(strings.Replace(tc.frame, managedFields+",", "", 1)))
				if fmt.Sprint(reasons(reports)) != fmt.Sprint(tc.reports) {
					t.Errorf("without the option and the fields: %v", reasons(reports))
				}
			}
		})
	}
	// The decoded object is the one without the option, but for its
	// managed fields.
	out, _ := f.event([]byte(frame("ADDED", withFields(goodRule, managedFields))))
	var ev watchFrame
	if err := json.Unmarshal(out, &ev); err != nil {
		t.Fatal(err)
	}
	got := typedDecode(t, ev.Object).(*porticov1alpha1.APIRule)
	want := typedDecode(t, []byte(goodRule)).(*porticov1alpha1.APIRule)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
}

// decodeAs accepts exactly the objects client-go's JSON decoder accepts as
// the kind sniffed, and decodes them to the same object, whether it takes
// its own path (the kind proved by a walk) or the decoder's (the kind in
// doubt).
func TestDecodeAsIsTheDecoders(t *testing.T) {
	f := newFilter(testScheme)
	ruleGVK := porticov1alpha1.GroupVersion.WithKind("APIRule")
	withMember := func(obj, member string) string { return strings.TrimSuffix(obj, "}") + "," + member + "}" }
	for name, raw := range map[string]string{
		"good":                                 goodRule,
		"bad status":                           badStatusRule,
		"bad spec":                             badSpecRule,
		"a kind in another case, not a string": withMember(goodRule, `"KIND":5`),
		"a kind in another case, a string":     withMember(goodRule, `"Kind":"APIRule"`),
		"the kind twice, the second another":   withMember(goodRule, `"kind":"Gateway"`),
		"the apiVersion twice":                 withMember(goodRule, `"apiVersion":"gateway.portico.dev/v1"`),
		"an escaped key that spells kind":      withMember(goodRule, `"kin\u0064":"Gateway"`),
		"another kind":                         goodGateway,
		"no object":                            `[1]`,
	} {
		t.Run(name, func(t *testing.T) {
			got, gotErr := f.decodeAs([]byte(raw), ruleGVK)
			want, actual, wantErr := f.decoder.Decode([]byte(raw), nil, nil)
			if wantErr == nil && (actual == nil || *actual != ruleGVK) {
				wantErr = fmt.Errorf("decoded as %v", actual)
			}
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("decodeAs: %v; the decoder: %v", gotErr, wantErr)
			}
			if gotErr == nil {
				got.GetObjectKind().SetGroupVersionKind(ruleGVK)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("decodeAs\n%+v\nthe decoder\n%+v", got, want)
				}
			}
		})
	}
}
