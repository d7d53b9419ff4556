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
	grantB := Grants{Wildcard: func(host, ns string) bool { return host == "*.example.com" && ns == "team-b" }}
	ownedA := Grants{Owned: []Ownership{{Host: "shop.example.com", Namespaces: []string{"team-a"}}, {Host: "*.mall.example.com", Namespaces: []string{"team-a"}}}}
	withUID := func(c Claim, uid string) Claim { c.UID = types.UID(uid); return c }
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
		{name: "same creation second: the UID decides, not the namespace's name", self: withUID(claim("team-a", "a", 0, "a.example.com"), "f"),
			others: []Claim{withUID(claim("team-b", "b", 0, "a.example.com"), "0")}, reason: Occupied, leak: "team-b"},
		{name: "same creation second, lower UID owns", self: withUID(claim("team-b", "b", 0, "a.example.com"), "0"),
			others: []Claim{withUID(claim("team-a", "a", 0, "a.example.com"), "f")}},
		{name: "an owned name is refused to other namespaces, however old their claim", self: claim("team-b", "b", 0, "shop.example.com"),
			granted: ownedA, reason: NotPermitted, leak: "team-a"},
		{name: "an older claim of another namespace on an owned name holds nothing", self: claim("team-a", "a", 9, "shop.example.com"),
			others: []Claim{claim("team-b", "b", 0, "shop.example.com")}, granted: ownedA},
		{name: "a squatter's exact name under an owned wildcard does not block it", self: claim("team-a", "a", 9, "*.mall.example.com"),
			others: []Claim{claim("team-b", "b", 0, "x.mall.example.com")}, granted: ownedA},
		{name: "the owner namespace may claim its owned wildcard without a wildcard grant", self: claim("team-a", "a", 0, "*.mall.example.com"), granted: ownedA},
		{name: "another namespace's wildcard may not reach an owned name", self: claim("team-b", "b", 0, "*.example.com"),
			granted: Grants{Wildcard: grantB.Wildcard, Owned: ownedA.Owned}, reason: NotPermitted},
		{name: "within the owner namespace the oldest claim owns", self: claim("team-a", "second", 9, "shop.example.com"),
			others: []Claim{claim("team-a", "first", 0, "shop.example.com")}, granted: ownedA, reason: Occupied},
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
	want := Decide(self, others, Grants{})
	for i := range others {
		rotated := append(append([]Claim{}, others[i:]...), others[:i]...)
		if got := Decide(self, rotated, Grants{}); got != want {
			t.Fatalf("rotation %d: %+v, want %+v", i, got, want)
		}
	}
}
