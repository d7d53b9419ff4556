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
		{"a key set that cannot be fetched is assumed, and said", forged, unreachable, explain.OutcomeRouted, "signature NOT checked"},
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
