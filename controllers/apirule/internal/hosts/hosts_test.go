package hosts

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func claim(ns, name string, age int, hosts ...string) Claim {
	return Claim{APIRule: types.NamespacedName{Namespace: ns, Name: name}, Created: t0.Add(time.Duration(age) * time.Second), Hosts: hosts}
}

func TestOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"a.example.com", "a.example.com", true},
		{"a.example.com", "b.example.com", false},
		{"*.example.com", "a.example.com", true},
		{"a.example.com", "*.example.com", true},
		{"*.example.com", "x.y.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "*.a.example.com", true},
		{"*.a.example.com", "b.example.com", false},
		{"*.example.com", "a.example.org", false},
		{"*.example.com", "badexample.com", false},
	} {
		if got := Overlap(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestDecide(t *testing.T) {
	grantB := func(host, ns string) bool { return host == "*.example.com" && ns == "team-b" }
	for _, tc := range []struct {
		name    string
		self    Claim
		others  []Claim
		granted Grants
		reason  string
		// leak must not appear in the message.
		leak string
	}{
		{name: "sole claim owns", self: claim("team-a", "a", 0, "a.example.com"), reason: ""},
		{name: "older exact claim of another namespace wins", self: claim("team-b", "b", 5, "a.example.com"),
			others: []Claim{claim("team-a", "a", 0, "a.example.com")}, reason: Occupied, leak: "team-a"},
		{name: "newer claim does not displace the owner", self: claim("team-a", "a", 0, "a.example.com"),
			others: []Claim{claim("team-b", "b", 5, "a.example.com")}},
		{name: "same creation second: namespace order decides", self: claim("team-b", "b", 0, "a.example.com"),
			others: []Claim{claim("team-a", "a", 0, "a.example.com")}, reason: Occupied},
		{name: "ungranted wildcard is not permitted", self: claim("team-b", "b", 0, "*.example.com"), reason: NotPermitted},
		{name: "wildcard granted to another namespace only", self: claim("team-c", "c", 0, "*.example.com"), granted: grantB, reason: NotPermitted},
		{name: "granted wildcard over an older exact host is occupied", self: claim("team-b", "b", 5, "*.example.com"),
			others: []Claim{claim("team-a", "a", 0, "a.example.com")}, granted: grantB, reason: Occupied},
		{name: "older granted wildcard blocks a newer exact host", self: claim("team-a", "a", 5, "c.example.com"),
			others: []Claim{claim("team-b", "b", 0, "*.example.com")}, granted: grantB, reason: Occupied, leak: "team-b"},
		{name: "older ungranted wildcard blocks nothing", self: claim("team-a", "a", 5, "c.example.com"),
			others: []Claim{claim("team-c", "c", 0, "*.example.com")}, granted: grantB},
		{name: "same namespace owner is named", self: claim("team-a", "second", 5, "a.example.com"),
			others: []Claim{claim("team-a", "first", 0, "a.example.com")}, reason: Occupied},
		{name: "other zones are ignored", self: claim("team-a", "a", 5, "a.example.com"),
			others: []Claim{claim("team-b", "b", 0, "a.example.org")}},
		{name: "self in others is ignored", self: claim("team-a", "a", 0, "a.example.com"),
			others: []Claim{claim("team-a", "a", 0, "a.example.com")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.self, tc.others, tc.granted)
			if v.Reason != tc.reason {
				t.Fatalf("reason %q (%s), want %q", v.Reason, v.Message, tc.reason)
			}
			if tc.reason != "" && v.Message == "" {
				t.Fatal("refusal without a message")
			}
			for _, o := range tc.others {
				if o.APIRule.Namespace != tc.self.APIRule.Namespace && o.APIRule != tc.self.APIRule &&
					(strings.Contains(v.Message, o.APIRule.Namespace) || strings.Contains(v.Message, o.APIRule.String())) {
					t.Fatalf("message names another namespace's APIRule: %s", v.Message)
				}
			}
			if tc.leak != "" && strings.Contains(v.Message, tc.leak) {
				t.Fatalf("message names another namespace: %s", v.Message)
			}
		})
	}
}

// TestDecideIsOrderIndependent: the verdict depends on the set of claims,
// not on the order the cache lists them in, so it never flaps.
func TestDecideIsOrderIndependent(t *testing.T) {
	self := claim("team-c", "c", 9, "x.example.com")
	others := []Claim{claim("team-a", "a", 1, "x.example.com"), claim("team-b", "b", 2, "x.example.com"), self}
	want := Decide(self, others, nil)
	for i := range others {
		rotated := append(append([]Claim{}, others[i:]...), others[:i]...)
		if got := Decide(self, rotated, nil); got != want {
			t.Fatalf("rotation %d: %+v, want %+v", i, got, want)
		}
	}
}
