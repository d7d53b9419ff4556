package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

// FuzzClientCABundle feeds ClientCABundle what an administrator's ConfigMap
// could hold. Whatever it accepts is a bundle of CA certificates, each
// valid at now and each one of the input's, that the gateway can load
// (x509.CertPool takes every one), and checking it again gives it back
// unchanged: the copy Portico writes is stable.
func FuzzClientCABundle(f *testing.F) {
	ca, err := IssueCA("clients.example", t0, 90*24*time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	other, err := IssueCA("other.example", t0.Add(-2000*24*time.Hour), 24*time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	serving, err := IssueServing(ca, "example.com", t0, 24*time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{
		ca.CertPEM, bytes.Join([][]byte{other.CertPEM, ca.CertPEM}, nil), serving.CertPEM, ca.KeyPEM,
		[]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), nil, []byte("# comment\n"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := ClientCABundle(data, t0)
		if err != nil {
			if out != nil {
				t.Fatalf("an error with a bundle: %v", err)
			}
			return
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(out) {
			t.Fatalf("the accepted bundle does not load: %q", out)
		}
		n := 0
		for rest := out; ; n++ {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				if len(rest) != 0 {
					t.Fatalf("trailing bytes in the accepted bundle: %q", rest)
				}
				break
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil || block.Type != "CERTIFICATE" || !cert.IsCA || !cert.BasicConstraintsValid {
				t.Fatalf("accepted block %d is not a CA certificate: %v", n, err)
			}
			if t0.Before(cert.NotBefore) || !t0.Before(cert.NotAfter) {
				t.Fatalf("accepted certificate %d is not valid now", n)
			}
			if !bytes.Contains(data, block.Bytes) && !containsDER(data, block.Bytes) {
				t.Fatalf("accepted certificate %d is not one of the input's", n)
			}
		}
		if n == 0 {
			t.Fatal("accepted an empty bundle")
		}
		again, err := ClientCABundle(out, t0)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("checking the accepted bundle again: %v, changed: %t", err, !bytes.Equal(again, out))
		}
	})
}

// containsDER reports whether a PEM block of data holds der.
func containsDER(data, der []byte) bool {
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return false
		}
		if bytes.Equal(block.Bytes, der) {
			return true
		}
	}
}
