package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"
)

// MaxClientCABundle is the largest CA bundle, in bytes, the gateway takes
// for client certificates: its copy lives in one ConfigMap beside others in
// the gateway's namespace, and each CA is checked on every handshake.
const MaxClientCABundle = 256 << 10

// ClientCABundle checks a PEM bundle of CA certificates that client
// certificates must chain to, and returns the bundle the gateway should
// trust: the CA certificates of data valid at now, each re-encoded, in
// their order. It fails with a sentence when data is too large, holds a
// block that is not a certificate, a certificate that does not parse or is
// not a CA (basic constraints), or no CA certificate valid at now: trusting
// part of what the administrator named, or nothing, would be a silent
// change of who may connect. Expired CAs are left out: no client
// certificate chains to them.
func ClientCABundle(data []byte, now time.Time) ([]byte, error) {
	if len(data) > MaxClientCABundle {
		return nil, fmt.Errorf("the CA bundle has %d bytes, more than the %d accepted", len(data), MaxClientCABundle)
	}
	var out bytes.Buffer
	found := 0
	for rest, n := data, 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				return nil, fmt.Errorf("the CA bundle has text that is not PEM after certificate %d", n-1)
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("block %d of the CA bundle is a %q, not a CERTIFICATE", n, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the CA bundle does not parse: %w", n, err)
		}
		if !cert.BasicConstraintsValid || !cert.IsCA {
			return nil, fmt.Errorf("certificate %d of the CA bundle (subject %q) is not a CA certificate", n, cert.Subject.String())
		}
		found++
		if now.Before(cert.NotBefore) || !now.Before(cert.NotAfter) {
			continue
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	}
	switch {
	case found == 0:
		return nil, fmt.Errorf("the CA bundle holds no PEM certificate")
	case out.Len() == 0:
		return nil, fmt.Errorf("none of the %d CA certificate(s) of the bundle is valid at %s", found, now.UTC().Format(time.RFC3339))
	}
	return out.Bytes(), nil
}
