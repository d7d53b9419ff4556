package envoy

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
)

// Verifier checks a token a provider found in a request: the token's
// payload when the provider verifies it (signature against the provider's
// keys, issuer, audiences, lifetime), else an error saying why.
type Verifier func(provider string, p *jwtauthnv3.JwtProvider, token string) (map[string]any, error)

// jwtChars are the characters of a JWT after a header's value prefix.
const jwtChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.="

// TokenOf is the token provider p finds in the request, as Envoy's
// extractor does: in its from_headers (name regardless of case; with a
// value_prefix, the JWT characters after it, else the whole value), its
// from_params, its from_cookies, in that order; without any location, the
// Authorization header after "Bearer " and the access_token parameter.
func TokenOf(p *jwtauthnv3.JwtProvider, r Request) (string, bool) {
	headers, params := p.GetFromHeaders(), p.GetFromParams()
	if len(headers) == 0 && len(params) == 0 && len(p.GetFromCookies()) == 0 {
		headers = []*jwtauthnv3.JwtHeader{{Name: "authorization", ValuePrefix: "Bearer "}}
		params = []string{"access_token"}
	}
	for _, h := range headers {
		value, ok := r.Header(h.GetName())
		if !ok {
			continue
		}
		if h.GetValuePrefix() == "" {
			return value, value != ""
		}
		i := strings.Index(value, h.GetValuePrefix())
		if i < 0 {
			continue
		}
		rest := value[i+len(h.GetValuePrefix()):]
		if end := strings.IndexFunc(rest, func(c rune) bool { return !strings.ContainsRune(jwtChars, c) }); end >= 0 {
			rest = rest[:end]
		}
		if rest != "" {
			return rest, true
		}
	}
	if len(params) > 0 {
		values, _ := url.ParseQuery(r.Query)
		for _, name := range params {
			if v := values.Get(name); v != "" {
				return v, true
			}
		}
	}
	if cookies, ok := r.Header("cookie"); ok {
		parsed, _ := http.ParseCookie(cookies)
		for _, name := range p.GetFromCookies() {
			for _, c := range parsed {
				if c.Name == name && c.Value != "" {
					return c.Value, true
				}
			}
		}
	}
	return "", false
}

// JWTResult is what the jwt_authn filter decided.
type JWTResult struct {
	// Passed: the requirement holds (else Envoy answers 401).
	Passed bool
	// Reason says why not, or which provider verified the token.
	Reason string
	// Metadata are the verified payloads, by each provider's
	// payload_in_metadata (Envoy's dynamic metadata of the filter).
	Metadata map[string]any
}

// JWTAuthenticate is the jwt_authn filter over a request: the first rule
// whose match holds gives the requirement (none: nothing is required); a
// provider requirement holds when that provider finds and verifies a
// token; allow_missing when no provider finds one or one verifies it;
// requires_any and requires_all as their names say.
func JWTAuthenticate(cfg *jwtauthnv3.JwtAuthentication, r Request, verify Verifier) (JWTResult, error) {
	var req *jwtauthnv3.JwtRequirement
	for _, rule := range cfg.GetRules() {
		ok, err := RouteMatches(rule.GetMatch(), r)
		if err != nil {
			return JWTResult{}, fmt.Errorf("jwt_authn rule: %w", err)
		}
		if ok {
			if req = rule.GetRequires(); req == nil && rule.GetRequirementName() != "" {
				return JWTResult{}, fmt.Errorf("jwt_authn requirement_name is not modelled")
			}
			break
		}
	}
	if req == nil {
		return JWTResult{Passed: true, Reason: "no requirement"}, nil
	}
	// Every provider that finds a token verifies it once.
	found, verified := map[string]bool{}, map[string]map[string]any{}
	failure := ""
	for _, name := range slices.Sorted(maps.Keys(cfg.GetProviders())) {
		p := cfg.GetProviders()[name]
		tok, ok := TokenOf(p, r)
		if !ok {
			continue
		}
		found[name] = true
		if verify == nil {
			failure = "no verifier"
			continue
		}
		payload, err := verify(name, p, tok)
		if err != nil {
			failure = fmt.Sprintf("provider %s: %v", name, err)
			continue
		}
		if payload == nil {
			payload = map[string]any{}
		}
		verified[name] = payload
	}
	var eval func(req *jwtauthnv3.JwtRequirement) (bool, error)
	eval = func(req *jwtauthnv3.JwtRequirement) (bool, error) {
		switch rt := req.GetRequiresType().(type) {
		case *jwtauthnv3.JwtRequirement_ProviderName:
			return verified[rt.ProviderName] != nil, nil
		case *jwtauthnv3.JwtRequirement_AllowMissing:
			return len(found) == 0 || len(verified) > 0, nil
		case *jwtauthnv3.JwtRequirement_AllowMissingOrFailed:
			return true, nil
		case *jwtauthnv3.JwtRequirement_RequiresAny:
			return anyTrue(rt.RequiresAny.GetRequirements(), eval)
		case *jwtauthnv3.JwtRequirement_RequiresAll:
			return allTrue(rt.RequiresAll.GetRequirements(), eval)
		}
		return false, fmt.Errorf("jwt requirement %v is not modelled", req)
	}
	ok, err := eval(req)
	if err != nil {
		return JWTResult{}, err
	}
	if !ok {
		if failure == "" {
			failure = "no token where the providers look"
		}
		return JWTResult{Reason: failure}, nil
	}
	out := JWTResult{Passed: true, Reason: "no token", Metadata: map[string]any{}}
	for _, name := range slices.Sorted(maps.Keys(verified)) {
		out.Reason = "verified by " + name
		if key := cfg.GetProviders()[name].GetPayloadInMetadata(); key != "" {
			out.Metadata[key] = verified[name]
		}
	}
	return out, nil
}
