package cli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/portico-dev/portico/internal/explain"
)

// decodeToken reads a JWT's claims; it does not check the signature.
func decodeToken(raw string) (*explain.Token, error) {
	parts := strings.Split(strings.TrimSpace(raw), ".")
	if len(parts) != 3 {
		return nil, errors.New("a JWT has three dot-separated parts")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("JWT payload: %w", err)
	}
	var claims struct {
		Iss   string          `json:"iss"`
		Sub   string          `json:"sub"`
		Aud   json.RawMessage `json:"aud"`
		Scope string          `json:"scope"`
		Scp   []string        `json:"scp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, fmt.Errorf("JWT claims: %w", err)
	}
	t := &explain.Token{Issuer: claims.Iss, Subject: claims.Sub, Scopes: append(strings.Fields(claims.Scope), claims.Scp...)}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil && one != "" {
		t.Audiences = []string{one}
	} else {
		_ = json.Unmarshal(claims.Aud, &t.Audiences)
	}
	return t, nil
}

// assumeSigned takes the token as signed by the key set that the visible
// RequestAuthentications trust for its issuer, since its signature is
// not checked; it says which it assumed, or that none trusts the issuer.
func assumeSigned(t *explain.Token, p explain.Policies) string {
	for _, ra := range p.RequestAuthentications {
		for _, rule := range ra.Spec.JwtRules {
			if rule.Issuer == t.Issuer && rule.JwksUri != "" {
				t.KeySet = rule.JwksUri
				return fmt.Sprintf("signature NOT checked: the token is taken as signed by %s, the key set RequestAuthentication %s/%s trusts for issuer %s",
					rule.JwksUri, ra.Namespace, ra.Name, t.Issuer)
			}
		}
	}
	return "signature NOT checked; no RequestAuthentication you may read trusts issuer " + t.Issuer
}
