package tokencheck

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"math/big"
	"testing"

	. "github.com/onsi/gomega"
)

func signed(t *testing.T, header map[string]any, sign func(digest []byte) []byte) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(map[string]any{"iss": "https://idp", "sub": "alice"})
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	d := sha256.Sum256([]byte(input))
	return input + "." + b64.EncodeToString(sign(d[:]))
}

func TestVerify(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaJWK := func(kid string, k *rsa.PublicKey) map[string]any {
		return map[string]any{"kty": "RSA", "kid": kid, "n": b64.EncodeToString(k.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(k.E)).Bytes())}
	}
	ecPoint, err := ecKey.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	ecJWK := map[string]any{"kty": "EC", "kid": "e1", "crv": "P-256",
		"x": b64.EncodeToString(ecPoint[1:33]), "y": b64.EncodeToString(ecPoint[33:])}
	set := func(keys ...map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{"keys": keys})
		return b
	}
	signRSA := func(k *rsa.PrivateKey) func([]byte) []byte {
		return func(d []byte) []byte {
			s, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	signEC := func(d []byte) []byte {
		r, s, err := ecdsa.Sign(rand.Reader, ecKey, d)
		if err != nil {
			t.Fatal(err)
		}
		return append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	}
	tests := map[string]struct {
		token   string
		jwks    []byte
		wantErr string
	}{
		"RS256 with its key among others": {
			token: signed(t, map[string]any{"alg": "RS256", "kid": "r1"}, signRSA(rsaKey)),
			jwks:  set(rsaJWK("r0", &otherRSA.PublicKey), rsaJWK("r1", &rsaKey.PublicKey), ecJWK),
		},
		"RS256 without kid tries every RSA key": {
			token: signed(t, map[string]any{"alg": "RS256"}, signRSA(rsaKey)),
			jwks:  set(rsaJWK("r0", &otherRSA.PublicKey), rsaJWK("r1", &rsaKey.PublicKey)),
		},
		"ES256": {
			token: signed(t, map[string]any{"alg": "ES256", "kid": "e1"}, signEC),
			jwks:  set(ecJWK),
		},
		"signed by another key": {
			token:   signed(t, map[string]any{"alg": "RS256", "kid": "r1"}, signRSA(otherRSA)),
			jwks:    set(rsaJWK("r1", &rsaKey.PublicKey)),
			wantErr: "does not verify",
		},
		"kid not in the set": {
			token:   signed(t, map[string]any{"alg": "RS256", "kid": "gone"}, signRSA(rsaKey)),
			jwks:    set(rsaJWK("r1", &rsaKey.PublicKey)),
			wantErr: ErrNoKey.Error(),
		},
		"alg none": {
			token:   signed(t, map[string]any{"alg": "none"}, func([]byte) []byte { return nil }),
			jwks:    set(rsaJWK("r1", &rsaKey.PublicKey)),
			wantErr: `algorithm "none"`,
		},
		"HS256 is not verified with a public set": {
			token:   signed(t, map[string]any{"alg": "HS256"}, func(d []byte) []byte { return d }),
			jwks:    set(rsaJWK("r1", &rsaKey.PublicKey)),
			wantErr: `algorithm "HS256"`,
		},
		"key set not JSON": {
			token:   signed(t, map[string]any{"alg": "RS256"}, signRSA(rsaKey)),
			jwks:    []byte("<html>"),
			wantErr: "key set:",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := Verify(tc.token, tc.jwks)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
