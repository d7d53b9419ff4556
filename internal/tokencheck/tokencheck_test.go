package tokencheck

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func jwt(t *testing.T, header, claims map[string]any) string {
	t.Helper()
	enc := func(v map[string]any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(header) + "." + enc(claims) + ".c2ln"
}

func TestDecode(t *testing.T) {
	tests := map[string]struct {
		raw     func(t *testing.T) string
		want    Claims
		wantErr string
	}{
		"string audience and space-separated scope": {
			raw: func(t *testing.T) string {
				return jwt(t, map[string]any{"alg": "RS256", "kid": "k1"},
					map[string]any{"iss": "https://idp", "sub": "alice", "aud": "orders", "scope": "read write", "exp": 2000000000})
			},
			want: Claims{Algorithm: "RS256", KeyID: "k1", Issuer: "https://idp", Subject: "alice",
				Audiences: []string{"orders"}, Scopes: []string{"read", "write"}, Expiry: time.Unix(2000000000, 0).UTC()},
		},
		"list audience and list scope, no expiry": {
			raw: func(t *testing.T) string {
				return jwt(t, map[string]any{"alg": "ES256"},
					map[string]any{"iss": "i", "aud": []string{"a", "b"}, "scope": []string{"x y"}, "nbf": 100})
			},
			want: Claims{Algorithm: "ES256", Issuer: "i", Audiences: []string{"a", "b"}, Scopes: []string{"x y"},
				NotBefore: time.Unix(100, 0).UTC()},
		},
		"two parts": {
			raw:     func(*testing.T) string { return "a.b" },
			wantErr: "3 dot-separated parts",
		},
		"header not base64url": {
			raw:     func(*testing.T) string { return "!!.e30.x" },
			wantErr: "token header: not base64url",
		},
		"claims not JSON": {
			raw:     func(*testing.T) string { return "e30." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".x" },
			wantErr: "token claims: not a JSON object",
		},
		"audience a number": {
			raw: func(t *testing.T) string {
				return jwt(t, map[string]any{}, map[string]any{"aud": 7})
			},
			wantErr: "claim aud: neither a string nor a list of strings",
		},
		"exp a string": {
			raw: func(t *testing.T) string {
				return jwt(t, map[string]any{}, map[string]any{"exp": "tomorrow"})
			},
			wantErr: "token claims: not a JSON object",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Decode(tc.raw(t))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestCheck(t *testing.T) {
	now := time.Unix(1000, 0).UTC()
	req := Requirement{
		Issuers: []string{"https://a", "https://b"},
		Alternatives: []Alternative{
			{Scopes: []string{"read", "write"}},
			{Audiences: []string{"orders", "billing"}},
		},
	}
	tests := map[string]struct {
		claims        Claims
		req           Requirement
		valid, ok     bool
		alternative   int
		reasonHasText string
	}{
		"expired": {
			claims: Claims{Issuer: "https://a", Expiry: now.Add(-ClockSkew)}, req: req,
			alternative: -1, reasonHasText: "expired at 1970-01-01T00:15:40Z",
		},
		"expired within Envoy's clock skew is still valid": {
			claims: Claims{Issuer: "https://a", Expiry: now.Add(-ClockSkew + time.Second)}, req: Requirement{Issuers: []string{"https://a"}},
			valid: true, ok: true, alternative: -1, reasonHasText: "any valid token",
		},
		"not yet valid": {
			claims: Claims{Issuer: "https://a", NotBefore: now.Add(ClockSkew + time.Second)}, req: req,
			alternative: -1, reasonHasText: "not valid before",
		},
		"not before within Envoy's clock skew is valid": {
			claims: Claims{Issuer: "https://a", NotBefore: now.Add(ClockSkew)}, req: Requirement{Issuers: []string{"https://a"}},
			valid: true, ok: true, alternative: -1, reasonHasText: "any valid token",
		},
		"untrusted issuer": {
			claims: Claims{Issuer: "https://evil", Scopes: []string{"read", "write"}}, req: req,
			alternative: -1, reasonHasText: `issuer "https://evil" is not one of ["https://a" "https://b"]`,
		},
		"first alternative: all scopes": {
			claims: Claims{Issuer: "https://b", Scopes: []string{"write", "read", "extra"}, Expiry: now.Add(time.Hour)}, req: req,
			valid: true, ok: true, alternative: 0, reasonHasText: "alternative 1 holds",
		},
		"second alternative: one audience": {
			claims: Claims{Issuer: "https://a", Scopes: []string{"read"}, Audiences: []string{"x", "billing"}}, req: req,
			valid: true, ok: true, alternative: 1, reasonHasText: "alternative 1: scopes [\"write\"] missing",
		},
		"valid but no alternative holds: 403": {
			claims: Claims{Issuer: "https://a", Scopes: []string{"read"}, Audiences: []string{"x"}}, req: req,
			valid: true, alternative: -1, reasonHasText: `alternative 2: no audience among ["orders" "billing"]`,
		},
		"no alternatives: any valid token": {
			claims: Claims{Issuer: "https://a"}, req: Requirement{Issuers: []string{"https://a"}},
			valid: true, ok: true, alternative: -1, reasonHasText: "any valid token",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := Check(tc.claims, tc.req, now)
			g.Expect(got.Valid).To(Equal(tc.valid))
			g.Expect(got.Satisfied).To(Equal(tc.ok))
			g.Expect(got.Alternative).To(Equal(tc.alternative))
			g.Expect(strings.Join(got.Reasons, "\n")).To(ContainSubstring(tc.reasonHasText))
		})
	}
}
