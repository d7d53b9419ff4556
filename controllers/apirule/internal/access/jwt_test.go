package access

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/tokencheck"
)

func TestTokenRequirement(t *testing.T) {
	now := time.Unix(1000, 0)
	tests := map[string]struct {
		jwt       *porticov1alpha1.JWTAuthentication
		want      tokencheck.Requirement
		token     tokencheck.Claims
		satisfied bool
	}{
		"single-issuer form: one alternative of scopes and audiences": {
			jwt: &porticov1alpha1.JWTAuthentication{Issuer: "https://idp", JWKSURI: "https://idp/keys",
				RequiredScopes: []string{"write", "read", "read"}, Audiences: []string{"orders"}},
			want: tokencheck.Requirement{Issuers: []string{"https://idp"},
				Alternatives: []tokencheck.Alternative{{Scopes: []string{"read", "write"}, Audiences: []string{"orders"}}}},
			token:     tokencheck.Claims{Issuer: "https://idp", Scopes: []string{"read"}, Audiences: []string{"orders"}},
			satisfied: false,
		},
		"single-issuer form without conditions: any valid token": {
			jwt:       &porticov1alpha1.JWTAuthentication{Issuer: "https://idp", JWKSURI: "https://idp/keys"},
			want:      tokencheck.Requirement{Issuers: []string{"https://idp"}},
			token:     tokencheck.Claims{Issuer: "https://idp"},
			satisfied: true,
		},
		"multi-issuer form: issuers sorted, alternatives each a way in": {
			jwt: &porticov1alpha1.JWTAuthentication{
				Authentications: []porticov1alpha1.JWTIssuer{
					{Issuer: "https://z", JWKSURI: "https://z/keys"}, {Issuer: "https://a", JWKSURI: "https://a/keys"},
				},
				Authorizations: []porticov1alpha1.JWTAuthorization{
					{RequiredScopes: []string{"admin"}}, {Audiences: []string{"billing", "orders"}},
				},
			},
			want: tokencheck.Requirement{Issuers: []string{"https://a", "https://z"},
				Alternatives: []tokencheck.Alternative{{Scopes: []string{"admin"}}, {Audiences: []string{"billing", "orders"}}}},
			token:     tokencheck.Claims{Issuer: "https://z", Audiences: []string{"orders"}},
			satisfied: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			req := OfJWT(tc.jwt).TokenRequirement()
			g.Expect(req).To(Equal(tc.want))
			g.Expect(tokencheck.Check(tc.token, req, now).Satisfied).To(Equal(tc.satisfied))
		})
	}
}
