package tokencheck

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// ErrNoKey is returned by Verify when no key of the set can have signed
// the token (no key with its kid and a fitting type).
var ErrNoKey = errors.New("no key of the set fits the token's kid and algorithm")

type jsonWebKey struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// Verify checks the signature of a compact JWS with a JSON Web Key Set (the
// body of an issuer's jwks_uri). It knows RS256/384/512 and ES256/384/512;
// any other algorithm (none included) is an error. A nil error means some
// key of the set verifies the signature.
func Verify(raw string, jwks []byte) error {
	parts := strings.Split(strings.TrimSpace(raw), ".")
	if len(parts) != 3 {
		return fmt.Errorf("a JWT has 3 dot-separated parts, this has %d", len(parts))
	}
	claims, err := Decode(raw)
	if err != nil {
		return err
	}
	hash, kty, err := algorithm(claims.Algorithm)
	if err != nil {
		return err
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature: not base64url: %w", err)
	}
	var set struct {
		Keys []jsonWebKey `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &set); err != nil {
		return fmt.Errorf("key set: %w", err)
	}
	h := hash.New()
	h.Write([]byte(parts[0] + "." + parts[1]))
	digest := h.Sum(nil)
	tried := false
	for _, k := range set.Keys {
		if k.Kty != kty || (claims.KeyID != "" && k.Kid != "" && k.Kid != claims.KeyID) {
			continue
		}
		tried = true
		if verifyWith(k, hash, digest, sig) {
			return nil
		}
	}
	if !tried {
		return ErrNoKey
	}
	return errors.New("the signature does not verify with any fitting key of the set")
}

func algorithm(alg string) (crypto.Hash, string, error) {
	switch alg {
	case "RS256":
		return crypto.SHA256, "RSA", nil
	case "RS384":
		return crypto.SHA384, "RSA", nil
	case "RS512":
		return crypto.SHA512, "RSA", nil
	case "ES256":
		return crypto.SHA256, "EC", nil
	case "ES384":
		return crypto.SHA384, "EC", nil
	case "ES512":
		return crypto.SHA512, "EC", nil
	}
	return 0, "", fmt.Errorf("algorithm %q is not one explain verifies", alg)
}

func verifyWith(k jsonWebKey, hash crypto.Hash, digest, sig []byte) bool {
	switch k.Kty {
	case "RSA":
		n, errN := bigInt(k.N)
		e, errE := bigInt(k.E)
		if errN != nil || errE != nil || !e.IsInt64() {
			return false
		}
		pub := &rsa.PublicKey{N: n, E: int(e.Int64())}
		return rsa.VerifyPKCS1v15(pub, hash, digest, sig) == nil
	case "EC":
		curve := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}[k.Crv]
		if curve == nil {
			return false
		}
		size := (curve.Params().BitSize + 7) / 8
		x, errX := b64.DecodeString(k.X)
		y, errY := b64.DecodeString(k.Y)
		if errX != nil || errY != nil || len(x) != size || len(y) != size || len(sig) != 2*size {
			return false
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, x...), y...))
		if err != nil {
			return false
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		return ecdsa.Verify(pub, digest, r, s)
	}
	return false
}

var b64 = base64.RawURLEncoding

func bigInt(s string) (*big.Int, error) {
	b, err := b64.DecodeString(s)
	if err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}
