package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/portico-dev/portico/internal/explain"
	"github.com/portico-dev/portico/internal/tokencheck"
)

// maxKeySet bounds a fetched JSON Web Key Set.
const maxKeySet = 1 << 20

// fetchFunc fetches a key set by its URI.
type fetchFunc func(ctx context.Context, uri string) ([]byte, error)

// fetchHTTP fetches a key set over HTTP(S), as Istio does for a jwksUri,
// within 5 s.
func fetchHTTP(ctx context.Context, uri string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", uri, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxKeySet))
}

// decodeToken reads a JWT's claims (tokencheck.Decode); the signature is
// checked by signedBy.
func decodeToken(raw string) (*explain.Token, tokencheck.Claims, error) {
	c, err := tokencheck.Decode(raw)
	if err != nil {
		return nil, c, err
	}
	return &explain.Token{Issuer: c.Issuer, Subject: c.Subject, Audiences: c.Audiences, Scopes: c.Scopes}, c, nil
}

// unverified is the key set of a token no trusted key set verifies: no
// RequestAuthentication rule has it, so the model rejects the token (401)
// wherever a rule for its issuer applies, as Envoy's jwt_authn does.
const unverified = "(no key set you may read verifies its signature)"

// signedBy sets the token's key set to the one of the visible
// RequestAuthentications' rules for its issuer that verifies its
// signature (fetched with fetch; nil fetches nothing) and says what it
// checked. A key set explain was told not to fetch (fetch nil) is assumed
// to sign the token, and said so. A key set it tried to fetch and could
// not is taken as istiod takes a key set it cannot fetch: it programs a
// public-only key set instead (fail closed), so the token is refused —
// said with the error, since istiod may reach what kubectl cannot. An
// expired token is taken as unverified, since Envoy rejects it whatever
// its signature.
func signedBy(ctx context.Context, raw string, c tokencheck.Claims, t *explain.Token, p explain.Policies, fetch fetchFunc, now time.Time) string {
	if r := tokencheck.Check(c, tokencheck.Requirement{Issuers: []string{c.Issuer}}, now); !r.Valid {
		t.KeySet = unverified
		return fmt.Sprintf("the token is not valid now (%v): Envoy rejects it", r.Reasons)
	}
	var assumed, unfetched, refused []string
	var assumedSet string
	for _, ra := range p.RequestAuthentications {
		for _, rule := range ra.Spec.JwtRules {
			if rule.Issuer != c.Issuer {
				continue
			}
			where := fmt.Sprintf("RequestAuthentication %s/%s", ra.Namespace, ra.Name)
			set, keys, err := keysOf(ctx, c.Issuer, rule.JwksUri, rule.Jwks, fetch)
			switch {
			case err != nil && fetch == nil:
				assumed = append(assumed, fmt.Sprintf("%s (%s: %v)", set, where, err))
				if assumedSet == "" {
					assumedSet = set
				}
			case err != nil:
				unfetched = append(unfetched, fmt.Sprintf("%s (%s: %v)", set, where, err))
			case tokencheck.Verify(raw, keys) == nil:
				t.KeySet = set
				return fmt.Sprintf("signature checked: key set %s (trusted by %s for issuer %s) verifies it", set, where, c.Issuer)
			default:
				refused = append(refused, fmt.Sprintf("%s (%s)", set, where))
			}
		}
	}
	switch {
	case len(assumed) > 0:
		t.KeySet = assumedSet
		return fmt.Sprintf("signature NOT checked: the token is taken as signed by key set %v, not fetched; "+
			"key sets that do not verify it: %v", assumed, refused)
	case len(unfetched) > 0:
		t.KeySet = unverified
		return fmt.Sprintf("signature NOT checked: key set %v could not be fetched from here; when istiod cannot fetch a key set "+
			"either it programs one that verifies no token (fail closed), so Envoy rejects the token; if istiod can reach it, "+
			"explain where it is reachable, or pass --fetch-jwks=false to take the signature as good. Key sets that do not verify it: %v",
			unfetched, refused)
	case len(refused) > 0:
		t.KeySet = unverified
		return fmt.Sprintf("signature checked: no key set trusted for issuer %s verifies it (%v): Envoy rejects it", c.Issuer, refused)
	}
	return "no RequestAuthentication you may read trusts issuer " + c.Issuer
}

// keysOf is a rule's key set: its inline jwks, else the body of its
// jwksUri, else of the jwks_uri of its issuer's OpenID discovery document
// (fetched, as istiod fetches them), and the name the model knows the set
// by (explain's keySet).
func keysOf(ctx context.Context, issuer, uri, inline string, fetch fetchFunc) (string, []byte, error) {
	switch {
	case uri == "" && inline != "":
		return inline, []byte(inline), nil
	case fetch == nil:
		if uri == "" {
			return "discovery:" + issuer, nil, errors.New("fetching key sets is off (--fetch-jwks=false)")
		}
		return uri, nil, errors.New("fetching key sets is off (--fetch-jwks=false)")
	case uri == "":
		// As istiod: the issuer's OpenID discovery document names them.
		doc, err := fetch(ctx, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration")
		if err != nil {
			return "discovery:" + issuer, nil, fmt.Errorf("OpenID discovery: %w", err)
		}
		var d struct {
			JwksURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(doc, &d); err != nil || d.JwksURI == "" {
			return "discovery:" + issuer, nil, fmt.Errorf("OpenID discovery: the document names no jwks_uri (%v)", err)
		}
		keys, err := fetch(ctx, d.JwksURI)
		return "discovery:" + issuer, keys, err
	}
	keys, err := fetch(ctx, uri)
	return uri, keys, err
}
