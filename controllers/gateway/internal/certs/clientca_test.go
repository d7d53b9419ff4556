package certs

import (
	"bytes"
	"encoding/pem"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestClientCABundle(t *testing.T) {
	ca := mustCA(t, domain, t0, validity)        // valid until t0+900d
	other := mustCA(t, "other.example", t0, day) // valid until t0+10d
	later := mustCA(t, "later.example", t0.Add(30*day), validity)
	leaf := userPair(t, newECKey(t), []string{"client.example.com"}, t0.Add(-day), t0.Add(day))
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})
	cases := []struct {
		name    string
		data    []byte
		now     string // "" is t0
		want    [][]byte
		wantErr string
	}{
		{name: "one CA", data: ca.CertPEM, want: [][]byte{ca.CertPEM}},
		{name: "two CAs keep their order", data: join(other.CertPEM, ca.CertPEM), want: [][]byte{other.CertPEM, ca.CertPEM}},
		{name: "text around the blocks is dropped", data: join([]byte("# our client CAs\n"), ca.CertPEM), want: [][]byte{ca.CertPEM}},
		{name: "an expired CA is left out", data: join(other.CertPEM, ca.CertPEM), now: "+20d", want: [][]byte{ca.CertPEM}},
		{name: "a CA not yet valid is left out", data: join(later.CertPEM, ca.CertPEM), want: [][]byte{ca.CertPEM}},
		{name: "empty", data: nil, wantErr: "holds no PEM certificate"},
		{name: "not PEM", data: []byte("hello"), wantErr: "text that is not PEM"},
		{name: "garbage after a CA", data: join(ca.CertPEM, []byte("-----BEGIN CERT")), wantErr: "text that is not PEM after certificate 1"},
		{name: "a private key", data: join(ca.CertPEM, key), wantErr: `block 2 of the CA bundle is a "PRIVATE KEY"`},
		{name: "a leaf certificate", data: join(ca.CertPEM, leaf.CertPEM), wantErr: `certificate 2 of the CA bundle (subject "CN=user") is not a CA certificate`},
		{name: "a certificate that does not parse", data: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30, 0x01}}), wantErr: "certificate 1 of the CA bundle does not parse"},
		{name: "only expired CAs", data: other.CertPEM, now: "+20d", wantErr: "none of the 1 CA certificate(s) of the bundle is valid at 2026-01-22T03:04:05Z"},
		{name: "too large", data: bytes.Repeat([]byte(" "), MaxClientCABundle+1), wantErr: "more than the 262144 accepted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			now := t0
			if tc.now == "+20d" {
				now = t0.Add(20 * day)
			}
			got, err := ClientCABundle(tc.data, now)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(got)).To(Equal(string(join(tc.want...))))
			g.Expect(strings.Count(string(got), "BEGIN CERTIFICATE")).To(Equal(len(tc.want)))
		})
	}
}

func join(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
