package globallimit

import (
	"strings"
	"testing"
)

func TestDomainRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		domain string
		ns     string
		ok     bool
	}{
		{Domain("team-a"), "team-a", true},
		{"portico/", "", false},
		{"portico/a/b", "", false},
		{"other/team-a", "", false},
	} {
		ns, ok := NamespaceOf(tc.domain)
		if ok != tc.ok || (ok && ns != tc.ns) {
			t.Errorf("NamespaceOf(%q) = %q, %v; want %q, %v", tc.domain, ns, ok, tc.ns, tc.ok)
		}
	}
}

func TestTokenIsPerNamespaceAndKey(t *testing.T) {
	key, other := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	a := Token(key, "team-a")
	if len(a) != 32 {
		t.Fatalf("token %q: want 32 hex characters", a)
	}
	if !ValidToken(key, "team-a", a) {
		t.Error("a namespace's own token is refused")
	}
	if ValidToken(key, "team-b", a) {
		t.Error("team-a's token is accepted for team-b")
	}
	if ValidToken(other, "team-a", a) {
		t.Error("a token of another key is accepted")
	}
	if ValidToken(nil, "team-a", Token(nil, "team-a")) {
		t.Error("an empty key accepts tokens")
	}
}

func TestParseRefusesBadConfigs(t *testing.T) {
	good := Config{Namespace: "team-a", Limits: []Limit{{ID: "rl/a", Requests: 10, Unit: Minute, Algorithm: FixedWindow}}}
	if c, err := Parse(good.Marshal()); err != nil || c.Limits[0].ID != "rl/a" {
		t.Fatalf("Parse(good) = %v, %v", c, err)
	}
	for name, data := range map[string]string{
		"not JSON":       "{",
		"unknown field":  `{"namespace":"a","limits":[],"extra":1}`,
		"no namespace":   `{"limits":[]}`,
		"duplicate id":   `{"namespace":"a","limits":[{"id":"x","requests":1,"unit":"SECOND","algorithm":"FixedWindow"},{"id":"x","requests":1,"unit":"SECOND","algorithm":"FixedWindow"}]}`,
		"zero requests":  `{"namespace":"a","limits":[{"id":"x","requests":0,"unit":"SECOND","algorithm":"FixedWindow"}]}`,
		"unknown unit":   `{"namespace":"a","limits":[{"id":"x","requests":1,"unit":"WEEK","algorithm":"FixedWindow"}]}`,
		"unknown algo":   `{"namespace":"a","limits":[{"id":"x","requests":1,"unit":"SECOND","algorithm":"Leaky"}]}`,
		"negative burst": `{"namespace":"a","limits":[{"id":"x","requests":1,"burst":-1,"unit":"SECOND","algorithm":"TokenBucket"}]}`,
	} {
		if _, err := Parse(data); err == nil {
			t.Errorf("%s: Parse accepted %s", name, data)
		}
	}
}

func TestNamesAreStable(t *testing.T) {
	if ClusterName("portico-system") != "outbound|8081||portico-ratelimit-service.portico-system.svc.cluster.local" {
		t.Errorf("ClusterName = %q", ClusterName("portico-system"))
	}
	if n := ConfigMapName("team-a"); !strings.HasPrefix(n, "portico-global-ratelimit-") || n != ConfigMapName("team-a") || n == ConfigMapName("team-b") {
		t.Errorf("ConfigMapName = %q", n)
	}
}
