package tokencheck

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Claims are the parts of a decoded token that Portico's access control
// reads, plus what identifies its signing key.
type Claims struct {
	// Algorithm and KeyID come from the token's header.
	Algorithm, KeyID string
	Issuer, Subject  string
	Audiences        []string
	// Scopes is the scope claim as Istio reads it: a list, or a
	// space-separated string split into one.
	Scopes []string
	// Expiry and NotBefore are zero when the token has none.
	Expiry, NotBefore time.Time
}

// Decode reads a compact JWS (header.payload.signature) without checking
// its signature.
func Decode(raw string) (Claims, error) {
	parts := strings.Split(strings.TrimSpace(raw), ".")
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("a JWT has 3 dot-separated parts, this has %d", len(parts))
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodePart(parts[0], &header); err != nil {
		return Claims{}, fmt.Errorf("token header: %w", err)
	}
	var payload struct {
		Iss   string          `json:"iss"`
		Sub   string          `json:"sub"`
		Aud   json.RawMessage `json:"aud"`
		Scope json.RawMessage `json:"scope"`
		Exp   *json.Number    `json:"exp"`
		Nbf   *json.Number    `json:"nbf"`
	}
	if err := decodePart(parts[1], &payload); err != nil {
		return Claims{}, fmt.Errorf("token claims: %w", err)
	}
	c := Claims{Algorithm: header.Alg, KeyID: header.Kid, Issuer: payload.Iss, Subject: payload.Sub}
	var err error
	if c.Audiences, err = stringOrList(payload.Aud, false); err != nil {
		return Claims{}, fmt.Errorf("claim aud: %w", err)
	}
	if c.Scopes, err = stringOrList(payload.Scope, true); err != nil {
		return Claims{}, fmt.Errorf("claim scope: %w", err)
	}
	if c.Expiry, err = numericDate(payload.Exp); err != nil {
		return Claims{}, fmt.Errorf("claim exp: %w", err)
	}
	if c.NotBefore, err = numericDate(payload.Nbf); err != nil {
		return Claims{}, fmt.Errorf("claim nbf: %w", err)
	}
	return c, nil
}

func decodePart(part string, into any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
	if err != nil {
		return fmt.Errorf("not base64url: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	return nil
}

// stringOrList reads a claim that is a string or a list of strings; split
// splits a string at spaces (the scope claim).
func stringOrList(raw json.RawMessage, split bool) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if split {
			return strings.Fields(s), nil
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("neither a string nor a list of strings")
	}
	return list, nil
}

func numericDate(n *json.Number) (time.Time, error) {
	if n == nil {
		return time.Time{}, nil
	}
	f, err := n.Float64()
	if err != nil {
		return time.Time{}, fmt.Errorf("not a number: %w", err)
	}
	return time.Unix(int64(f), 0).UTC(), nil
}

// Alternative is one way to satisfy a jwt access: every one of Scopes and
// one of Audiences (an empty list is no condition).
type Alternative struct {
	Scopes, Audiences []string
}

// Requirement is what an APIRule's jwt access demands: a token of one of
// Issuers that satisfies one of Alternatives (none: any such token).
type Requirement struct {
	Issuers      []string
	Alternatives []Alternative
}

// Result says whether a token's claims satisfy a Requirement, and why.
type Result struct {
	// Valid is false when the token is expired, not yet valid or of an
	// untrusted issuer: Istio answers 401.
	Valid bool
	// Satisfied is true when Valid and some alternative holds; a valid
	// token that satisfies none is answered 403.
	Satisfied bool
	// Alternative is the index of the first alternative that holds, or -1.
	Alternative int
	// Reasons explain the outcome, one line per finding, in order.
	Reasons []string
}

// ClockSkew is how far Envoy's JWT filter (clock_skew_seconds, default 60,
// which Istio leaves alone) lets exp and nbf be off the gateway's clock.
const ClockSkew = 60 * time.Second

// Check compares a token's claims with a requirement at time now, with
// Envoy's ClockSkew. It does not check the signature.
func Check(c Claims, req Requirement, now time.Time) Result {
	r := Result{Alternative: -1}
	if !c.Expiry.IsZero() && !now.Before(c.Expiry.Add(ClockSkew)) {
		r.Reasons = append(r.Reasons, fmt.Sprintf("the token expired at %s", c.Expiry.Format(time.RFC3339)))
		return r
	}
	if !c.NotBefore.IsZero() && now.Before(c.NotBefore.Add(-ClockSkew)) {
		r.Reasons = append(r.Reasons, fmt.Sprintf("the token is not valid before %s", c.NotBefore.Format(time.RFC3339)))
		return r
	}
	if !slices.Contains(req.Issuers, c.Issuer) {
		r.Reasons = append(r.Reasons, fmt.Sprintf("issuer %q is not one of %s", c.Issuer, quoted(req.Issuers)))
		return r
	}
	r.Valid = true
	r.Reasons = append(r.Reasons, fmt.Sprintf("issuer %q is trusted", c.Issuer))
	if len(req.Alternatives) == 0 {
		r.Satisfied = true
		r.Reasons = append(r.Reasons, "any valid token of a trusted issuer is enough")
		return r
	}
	for i, alt := range req.Alternatives {
		missing := missingScopes(c.Scopes, alt.Scopes)
		audOK := len(alt.Audiences) == 0 || slices.ContainsFunc(c.Audiences, func(a string) bool { return slices.Contains(alt.Audiences, a) })
		switch {
		case len(missing) == 0 && audOK:
			r.Satisfied, r.Alternative = true, i
			r.Reasons = append(r.Reasons, fmt.Sprintf("alternative %d holds", i+1))
			return r
		case len(missing) > 0:
			r.Reasons = append(r.Reasons, fmt.Sprintf("alternative %d: scopes %s missing", i+1, quoted(missing)))
		}
		if !audOK {
			r.Reasons = append(r.Reasons, fmt.Sprintf("alternative %d: no audience among %s", i+1, quoted(alt.Audiences)))
		}
	}
	return r
}

func missingScopes(have, want []string) []string {
	var out []string
	for _, s := range want {
		if !slices.Contains(have, s) {
			out = append(out, s)
		}
	}
	return out
}

func quoted(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, " ") + "]"
}
