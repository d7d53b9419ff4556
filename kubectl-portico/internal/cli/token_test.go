package cli

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/portico-dev/portico/internal/explain"
)

// signed is an RS256 token of claims signed with key, and the key set
// holding key's public half.
func signed(t *testing.T, key *rsa.PrivateKey, claims map[string]any) (string, []byte) {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(map[string]string{"alg": "RS256", "kid": "k1"}) + "." + enc(claims)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), jwks
}

func TestExplainChecksTheTokensSignature(t *testing.T) {
	idp, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"iss": "https://idp.a", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	good, jwks := signed(t, idp, claims)
	forged, _ := signed(t, mallory, claims)
	expired, _ := signed(t, idp, map[string]any{"iss": "https://idp.a", "sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()})
	serves := func(_ context.Context, uri string) ([]byte, error) {
		if uri != "https://idp.a/jwks" {
			return nil, errors.New("unexpected key set " + uri)
		}
		return jwks, nil
	}
	unreachable := func(context.Context, string) ([]byte, error) { return nil, errors.New("dial tcp: no route to host") }
	cases := []struct {
		name  string
		token string
		fetch fetchFunc
		want  explain.Outcome
		says  string
	}{
		{"a token the trusted key set verifies", good, serves, explain.OutcomeRouted, "signature checked: key set https://idp.a/jwks"},
		{"a token signed with another key", forged, serves, explain.Outcome401, "no key set trusted for issuer https://idp.a verifies it"},
		{"an expired token", expired, serves, explain.Outcome401, "not valid now"},
		// istiod programs a public-only key set when it cannot fetch one:
		// Envoy refuses every token (the node e2e's orders rule shows it).
		{"a key set that cannot be fetched is refused as istiod refuses it, and said", good, unreachable, explain.Outcome401, "could not be fetched from here"},
		{"a key set not fetched (--fetch-jwks=false) is assumed, and said", forged, nil, explain.OutcomeRouted, "signature NOT checked: the token is taken as signed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			o := options{host: "ledger.a.example", path: "/admin", method: "GET", token: c.token, gateway: gateway, namespace: "team-a",
				output: "json", fetch: c.fetch}
			var out bytes.Buffer
			g.Expect(run(context.Background(), cluster("team-a"), o, &out)).To(Succeed())
			var e explain.Explanation
			g.Expect(json.Unmarshal(out.Bytes(), &e)).To(Succeed())
			g.Expect(e.Outcome).To(Equal(c.want), out.String())
			g.Expect(out.String()).To(ContainSubstring(c.says))
		})
	}
}

// TestKeysOfFetchesAsIstiod: a rule's inline key set, else its jwksUri,
// else the jwks_uri its issuer's OpenID discovery document names, each
// under the name explain's model knows the rule's key set by.
func TestKeysOfFetchesAsIstiod(t *testing.T) {
	served := map[string]string{
		"https://idp.a/.well-known/openid-configuration": `{"issuer":"https://idp.a","jwks_uri":"https://idp.a/keys"}`,
		"https://idp.a/keys":                             `{"keys":[]}`,
		"https://idp.b/.well-known/openid-configuration": `{"issuer":"https://idp.b"}`,
	}
	fetch := func(_ context.Context, uri string) ([]byte, error) {
		if body, ok := served[uri]; ok {
			return []byte(body), nil
		}
		return nil, errors.New("GET " + uri + ": 404 Not Found")
	}
	cases := []struct {
		name, issuer, uri, inline string
		fetch                     fetchFunc
		set, keys                 string
		err                       string
	}{
		{name: "inline", issuer: "https://idp.a", inline: `{"keys":[1]}`, fetch: fetch, set: `{"keys":[1]}`, keys: `{"keys":[1]}`},
		{name: "jwksUri", issuer: "https://idp.a", uri: "https://idp.a/keys", fetch: fetch, set: "https://idp.a/keys", keys: `{"keys":[]}`},
		{name: "discovery", issuer: "https://idp.a/", fetch: fetch, set: "discovery:https://idp.a/", keys: `{"keys":[]}`},
		{name: "discovery naming no key set", issuer: "https://idp.b", fetch: fetch, set: "discovery:https://idp.b", err: "names no jwks_uri"},
		{name: "no discovery document", issuer: "https://idp.c", fetch: fetch, set: "discovery:https://idp.c", err: "404"},
		{name: "fetching off", issuer: "https://idp.a", uri: "https://idp.a/keys", set: "https://idp.a/keys", err: "--fetch-jwks=false"},
		{name: "fetching off, discovery", issuer: "https://idp.a", set: "discovery:https://idp.a", err: "--fetch-jwks=false"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, keys, err := keysOf(context.Background(), c.issuer, c.uri, c.inline, c.fetch)
			if set != c.set || string(keys) != c.keys {
				t.Errorf("got %q %q, want %q %q", set, keys, c.set, c.keys)
			}
			if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Errorf("error %v, want %q", err, c.err)
			}
		})
	}
}
