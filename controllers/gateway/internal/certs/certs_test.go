package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const (
	day      = 24 * time.Hour
	validity = 90 * day
	domain   = "example.com"
)

// t0 is the time of the first issuance in every test.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func mustCA(t *testing.T, domain string, now time.Time, validity time.Duration) Pair {
	t.Helper()
	ca, err := IssueCA(domain, now, validity)
	if err != nil {
		t.Fatalf("IssueCA: %v", err)
	}
	return ca
}

func mustServing(t *testing.T, ca Pair, domain string, now time.Time, validity time.Duration) Pair {
	t.Helper()
	serving, err := IssueServing(ca, domain, now, validity)
	if err != nil {
		t.Fatalf("IssueServing: %v", err)
	}
	return serving
}

// certs parses every certificate of p.
func certs(t *testing.T, p Pair) []*x509.Certificate {
	t.Helper()
	chain, err := parseCerts(p.CertPEM)
	if err != nil {
		t.Fatalf("parse certificates: %v", err)
	}
	return chain
}

// ecKey parses the key of p, which must be ECDSA.
func ecKey(t *testing.T, p Pair) *ecdsa.PrivateKey {
	t.Helper()
	block, _ := pem.Decode(p.KeyPEM)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("key PEM is not a PKCS #8 block: %q", p.KeyPEM)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("parse key: %v", err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("key is a %T, not ECDSA", key)
	}
	return ec
}

// userPair is a self-signed certificate for names as a user may bring one,
// with its key in the PEM form its type usually has (PKCS #1 for RSA, SEC 1
// for ECDSA).
func userPair(t *testing.T, key crypto.Signer, names []string, notBefore, notAfter time.Time) Pair {
	t.Helper()
	template := &x509.Certificate{
		SerialNumber: big.NewInt(42),
		Subject:      pkix.Name{CommonName: "user"},
		DNSNames:     names,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		t.Fatalf("create certificate: %v", err)
	}
	var keyBlock *pem.Block
	switch k := key.(type) {
	case *rsa.PrivateKey:
		keyBlock = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	case *ecdsa.PrivateKey:
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatalf("marshal key: %v", err)
		}
		keyBlock = &pem.Block{Type: "EC PRIVATE KEY", Bytes: b}
	default:
		t.Fatalf("unexpected key %T", key)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(keyBlock),
	}
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestIssueCA(t *testing.T) {
	g := NewWithT(t)
	// Sub-second now, upper case and trailing dot: dates are whole seconds
	// and the domain is normalized.
	ca, err := IssueCA("Example.COM.", t0.Add(987654321*time.Nanosecond), 900*day)
	g.Expect(err).NotTo(HaveOccurred())

	chain := certs(t, ca)
	g.Expect(chain).To(HaveLen(1))
	cert := chain[0]
	g.Expect(cert.Subject.CommonName).To(Equal("portico-gateway-ca example.com"))
	g.Expect(cert.Issuer.String()).To(Equal("CN=portico-gateway-ca example.com"))
	g.Expect(cert.CheckSignatureFrom(cert)).To(Succeed())
	g.Expect(cert.NotBefore).To(Equal(t0.Add(-time.Hour)))
	g.Expect(cert.NotAfter).To(Equal(t0.Add(900 * day)))
	g.Expect(cert.IsCA).To(BeTrue())
	g.Expect(cert.BasicConstraintsValid).To(BeTrue())
	g.Expect(cert.MaxPathLen).To(Equal(0))
	g.Expect(cert.MaxPathLenZero).To(BeTrue())
	g.Expect(cert.KeyUsage).To(Equal(x509.KeyUsageCertSign | x509.KeyUsageCRLSign))
	g.Expect(cert.ExtKeyUsage).To(BeEmpty())
	g.Expect(cert.DNSNames).To(BeEmpty())
	g.Expect(cert.PublicKeyAlgorithm).To(Equal(x509.ECDSA))
	g.Expect(cert.SignatureAlgorithm).To(Equal(x509.ECDSAWithSHA256))
	g.Expect(cert.SerialNumber.Sign()).To(Equal(1))
	g.Expect(cert.SerialNumber.BitLen()).To(BeNumerically("<=", 128))

	key := ecKey(t, ca)
	g.Expect(key.Curve).To(Equal(elliptic.P256()))
	g.Expect(key.PublicKey.Equal(cert.PublicKey)).To(BeTrue())

	info, err := Inspect(ca)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.IsCA).To(BeTrue())

	// Every CA has its own key and serial number.
	other := mustCA(t, domain, t0, 900*day)
	g.Expect(certs(t, other)[0].SerialNumber).NotTo(Equal(cert.SerialNumber))
	g.Expect(ecKey(t, other).Equal(key)).To(BeFalse())
}

func TestIssueServing(t *testing.T) {
	g := NewWithT(t)
	ca := mustCA(t, domain, t0, 900*day)
	caCert := certs(t, ca)[0]
	serving, err := IssueServing(ca, "EXAMPLE.com", t0.Add(time.Second/2), validity)
	g.Expect(err).NotTo(HaveOccurred())

	chain := certs(t, serving)
	g.Expect(chain).To(HaveLen(2))
	g.Expect(chain[1].Raw).To(Equal(caCert.Raw))
	leaf := chain[0]
	g.Expect(leaf.CheckSignatureFrom(caCert)).To(Succeed())
	g.Expect(leaf.DNSNames).To(Equal([]string{"*.example.com", "example.com"}))
	g.Expect(leaf.Subject.String()).To(Equal("CN=*.example.com"))
	g.Expect(leaf.Issuer.String()).To(Equal("CN=portico-gateway-ca example.com"))
	g.Expect(leaf.NotBefore).To(Equal(t0.Add(-time.Hour)))
	g.Expect(leaf.NotAfter).To(Equal(t0.Add(validity)))
	g.Expect(leaf.IsCA).To(BeFalse())
	g.Expect(leaf.BasicConstraintsValid).To(BeTrue())
	g.Expect(leaf.KeyUsage).To(Equal(x509.KeyUsageDigitalSignature))
	g.Expect(leaf.ExtKeyUsage).To(Equal([]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}))
	g.Expect(leaf.PublicKeyAlgorithm).To(Equal(x509.ECDSA))
	g.Expect(leaf.SignatureAlgorithm).To(Equal(x509.ECDSAWithSHA256))
	g.Expect(leaf.SerialNumber.Sign()).To(Equal(1))
	g.Expect(leaf.SerialNumber.BitLen()).To(BeNumerically("<=", 128))
	g.Expect(leaf.AuthorityKeyId).To(Equal(caCert.SubjectKeyId))
	key := ecKey(t, serving)
	g.Expect(key.Curve).To(Equal(elliptic.P256()))
	g.Expect(key.PublicKey.Equal(leaf.PublicKey)).To(BeTrue())
	g.Expect(key.Equal(ecKey(t, ca))).To(BeFalse())

	info, err := Check(serving, domain, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info).To(Equal(Info{
		NotBefore: t0.Add(-time.Hour),
		NotAfter:  t0.Add(validity),
		DNSNames:  []string{"*.example.com", "example.com"},
		IsCA:      false,
		Issuer:    "CN=portico-gateway-ca example.com",
		Subject:   "CN=*.example.com",
	}))
}

// The serving certificate never outlives its CA.
func TestIssueServingNotAfter(t *testing.T) {
	ca := mustCA(t, domain, t0, 10*day)
	for name, tc := range map[string]struct {
		now       time.Time
		validity  time.Duration
		notBefore time.Time
		notAfter  time.Time
	}{
		"within the CA":           {now: t0, validity: 5 * day, notBefore: t0.Add(-time.Hour), notAfter: t0.Add(5 * day)},
		"ends with the CA":        {now: t0.Add(5 * day), validity: 5 * day, notBefore: t0.Add(5*day - time.Hour), notAfter: t0.Add(10 * day)},
		"capped by the CA":        {now: t0.Add(5 * day), validity: validity, notBefore: t0.Add(5*day - time.Hour), notAfter: t0.Add(10 * day)},
		"CA's last second":        {now: t0.Add(10 * day), validity: validity, notBefore: t0.Add(10*day - time.Hour), notAfter: t0.Add(10 * day)},
		"CA longer than required": {now: t0.Add(day), validity: time.Hour, notBefore: t0.Add(day - time.Hour), notAfter: t0.Add(day + time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			leaf := certs(t, mustServing(t, ca, domain, tc.now, tc.validity))[0]
			g.Expect(leaf.NotBefore).To(Equal(tc.notBefore))
			g.Expect(leaf.NotAfter).To(Equal(tc.notAfter))
		})
	}
}

func TestIssueErrors(t *testing.T) {
	ca := mustCA(t, domain, t0, 10*day)
	serving := mustServing(t, ca, domain, t0, day)
	for name, tc := range map[string]struct {
		issue func() (Pair, error)
		err   string
	}{
		"CA: empty domain": {
			issue: func() (Pair, error) { return IssueCA("", t0, validity) },
			err:   `domain "" is not a DNS name`,
		},
		"CA: wildcard domain": {
			issue: func() (Pair, error) { return IssueCA("*.example.com", t0, validity) },
			err:   `domain "*.example.com" is not a DNS name`,
		},
		"CA: space in domain": {
			issue: func() (Pair, error) { return IssueCA("exa mple.com", t0, validity) },
			err:   `domain "exa mple.com" is not a DNS name`,
		},
		"CA: empty label": {
			issue: func() (Pair, error) { return IssueCA("example..com", t0, validity) },
			err:   `domain "example..com" is not a DNS name`,
		},
		"CA: label starting with a hyphen": {
			issue: func() (Pair, error) { return IssueCA("-example.com", t0, validity) },
			err:   `domain "-example.com" is not a DNS name`,
		},
		"CA: zero validity": {
			issue: func() (Pair, error) { return IssueCA(domain, t0, 0) },
			err:   "CA validity 0s is shorter than 1h0m0s",
		},
		"CA: validity below the minimum": {
			issue: func() (Pair, error) { return IssueCA(domain, t0, 30*time.Minute) },
			err:   "CA validity 30m0s is shorter than 1h0m0s",
		},
		"serving: bad domain": {
			issue: func() (Pair, error) { return IssueServing(ca, "example.com/x", t0, validity) },
			err:   `domain "example.com/x" is not a DNS name`,
		},
		"serving: negative validity": {
			issue: func() (Pair, error) { return IssueServing(ca, domain, t0, -day) },
			err:   "serving certificate validity -24h0m0s is shorter than 1h0m0s",
		},
		"serving: no CA": {
			issue: func() (Pair, error) { return IssueServing(Pair{}, domain, t0, validity) },
			err:   "CA: no PEM certificate found",
		},
		"serving: CA key mismatch": {
			issue: func() (Pair, error) {
				return IssueServing(Pair{CertPEM: ca.CertPEM, KeyPEM: serving.KeyPEM}, domain, t0, validity)
			},
			err: "CA: private key does not match the certificate",
		},
		"serving: CA is a serving certificate": {
			issue: func() (Pair, error) { return IssueServing(serving, domain, t0, validity) },
			err:   "CA: the certificate is not a CA",
		},
		"serving: CA expired": {
			issue: func() (Pair, error) { return IssueServing(ca, domain, t0.Add(10*day+time.Second), validity) },
			err:   "CA: certificate expired at 2026-01-12T03:04:05Z",
		},
		"serving: CA not yet valid": {
			issue: func() (Pair, error) { return IssueServing(ca, domain, t0.Add(-2*time.Hour), validity) },
			err:   "CA: certificate is not valid before 2026-01-02T02:04:05Z",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := tc.issue()
			g.Expect(err).To(MatchError(tc.err))
			g.Expect(p).To(Equal(Pair{}))
		})
	}
}

// A client trusting the CA accepts the serving certificate for the domain
// and one-label names under it, and nothing else.
func TestVerify(t *testing.T) {
	ca := mustCA(t, domain, t0, 900*day)
	serving := mustServing(t, ca, domain, t0, validity)
	otherCA := mustCA(t, domain, t0, 900*day)
	for name, tc := range map[string]struct {
		serving Pair
		caPEM   []byte
		host    string
		now     time.Time
		err     string // "" for success
		// unknownAuthority: the error is x509's, whose hint depends on the Go version.
		unknownAuthority bool
	}{
		"one-label name":            {host: "api.example.com", now: t0},
		"the domain":                {host: "example.com", now: t0},
		"upper case":                {host: "API.Example.COM", now: t0},
		"within the clock skew":     {host: "api.example.com", now: t0.Add(-59 * time.Minute)},
		"last second":               {host: "api.example.com", now: t0.Add(validity)},
		"CA in a bundle":            {host: "api.example.com", now: t0, caPEM: append(append([]byte{}, otherCA.CertPEM...), ca.CertPEM...)},
		"chain without the CA":      {host: "api.example.com", now: t0, serving: Pair{CertPEM: serving.CertPEM[:len(serving.CertPEM)-len(ca.CertPEM)]}},
		"another domain":            {host: "example.org", now: t0, err: "certificate is not trusted for example.org: x509: certificate is valid for *.example.com, example.com, not example.org"},
		"two labels deep":           {host: "a.b.example.com", now: t0, err: "certificate is not trusted for a.b.example.com: x509: certificate is valid for *.example.com, example.com, not a.b.example.com"},
		"domain as a prefix":        {host: "example.com.evil.org", now: t0, err: "certificate is not trusted for example.com.evil.org: x509: certificate is valid for *.example.com, example.com, not example.com.evil.org"},
		"another CA":                {host: "api.example.com", now: t0, caPEM: otherCA.CertPEM, unknownAuthority: true},
		"expired":                   {host: "api.example.com", now: t0.Add(validity + time.Second), err: "certificate is not trusted for api.example.com: x509: certificate has expired or is not yet valid: current time 2026-04-02T03:04:06Z is after 2026-04-02T03:04:05Z"},
		"not yet valid":             {host: "api.example.com", now: t0.Add(-61 * time.Minute), err: "certificate is not trusted for api.example.com: x509: certificate has expired or is not yet valid: current time 2026-01-02T02:03:05Z is before 2026-01-02T02:04:05Z"},
		"no CA":                     {host: "api.example.com", now: t0, caPEM: []byte("garbage"), err: "CA: no PEM certificate found"},
		"no serving certificate":    {host: "api.example.com", now: t0, serving: Pair{KeyPEM: serving.KeyPEM}, err: "no PEM certificate found"},
		"CA as serving certificate": {host: "api.example.com", now: t0, serving: ca, err: "certificate is not trusted for api.example.com: x509: certificate is not valid for any names, but wanted to match api.example.com"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			if tc.serving.CertPEM == nil && tc.serving.KeyPEM == nil {
				tc.serving = serving
			}
			if tc.caPEM == nil {
				tc.caPEM = ca.CertPEM
			}
			err := Verify(tc.serving, tc.caPEM, tc.host, tc.now)
			if tc.unknownAuthority {
				g.Expect(err).To(MatchError(HavePrefix("certificate is not trusted for api.example.com: x509: certificate signed by unknown authority")))
				g.Expect(errors.As(err, new(x509.UnknownAuthorityError))).To(BeTrue())
				return
			}
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(tc.err))
			}
		})
	}
}

func TestInspect(t *testing.T) {
	ca := mustCA(t, domain, t0, 900*day)
	serving := mustServing(t, ca, domain, t0, validity)
	other := mustServing(t, ca, domain, t0, validity)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPair := userPair(t, rsaKey, []string{"*.example.org"}, t0, t0.Add(day))
	ecPair := userPair(t, newECKey(t), []string{"a.example.org", "b.example.org"}, t0, t0.Add(day))
	badCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	badKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not DER")})

	for name, tc := range map[string]struct {
		pair    Pair
		info    Info
		err     string
		errorIs error
	}{
		"serving": {pair: serving, info: Info{
			NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(validity),
			DNSNames: []string{"*.example.com", "example.com"},
			Issuer:   "CN=portico-gateway-ca example.com", Subject: "CN=*.example.com",
		}},
		"CA": {pair: ca, info: Info{
			NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(900 * day), IsCA: true,
			Issuer: "CN=portico-gateway-ca example.com", Subject: "CN=portico-gateway-ca example.com",
		}},
		"user RSA PKCS #1": {pair: rsaPair, info: Info{
			NotBefore: t0, NotAfter: t0.Add(day), DNSNames: []string{"*.example.org"},
			Issuer: "CN=user", Subject: "CN=user",
		}},
		"user ECDSA SEC 1": {pair: ecPair, info: Info{
			NotBefore: t0, NotAfter: t0.Add(day), DNSNames: []string{"a.example.org", "b.example.org"},
			Issuer: "CN=user", Subject: "CN=user",
		}},
		"other PEM blocks around": {
			pair: Pair{
				CertPEM: append([]byte("-----BEGIN COMMENT-----\n-----END COMMENT-----\n"), serving.CertPEM...),
				KeyPEM:  append([]byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"), serving.KeyPEM...),
			},
			info: Info{
				NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(validity),
				DNSNames: []string{"*.example.com", "example.com"},
				Issuer:   "CN=portico-gateway-ca example.com", Subject: "CN=*.example.com",
			},
		},
		"empty":              {pair: Pair{}, err: "no PEM certificate found", errorIs: ErrNoCertificate},
		"garbage":            {pair: Pair{CertPEM: []byte("garbage"), KeyPEM: []byte("garbage")}, err: "no PEM certificate found", errorIs: ErrNoCertificate},
		"key as certificate": {pair: Pair{CertPEM: serving.KeyPEM, KeyPEM: serving.KeyPEM}, err: "no PEM certificate found", errorIs: ErrNoCertificate},
		"unparsable certificate": {
			pair: Pair{CertPEM: badCert, KeyPEM: serving.KeyPEM},
			err:  "certificate 1 does not parse: x509: malformed certificate",
		},
		"no key":          {pair: Pair{CertPEM: serving.CertPEM}, err: "no PEM private key found", errorIs: ErrNoPrivateKey},
		"unparsable key":  {pair: Pair{CertPEM: serving.CertPEM, KeyPEM: badKey}, err: "private key does not parse"},
		"mismatched key":  {pair: Pair{CertPEM: serving.CertPEM, KeyPEM: other.KeyPEM}, err: "private key does not match the certificate", errorIs: ErrKeyMismatch},
		"CA key":          {pair: Pair{CertPEM: serving.CertPEM, KeyPEM: ca.KeyPEM}, err: "private key does not match the certificate", errorIs: ErrKeyMismatch},
		"RSA/ECDSA mixup": {pair: Pair{CertPEM: rsaPair.CertPEM, KeyPEM: ecPair.KeyPEM}, err: "private key does not match the certificate", errorIs: ErrKeyMismatch},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			info, err := Inspect(tc.pair)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(tc.err))
			}
			if tc.errorIs != nil {
				g.Expect(err).To(MatchError(tc.errorIs))
			}
			g.Expect(info).To(Equal(tc.info))
		})
	}
}

func TestCheck(t *testing.T) {
	ca := mustCA(t, domain, t0, 900*day)
	serving := mustServing(t, ca, domain, t0, validity)
	other := mustServing(t, ca, domain, t0, validity)
	user := func(names ...string) Pair { return userPair(t, newECKey(t), names, t0, t0.Add(day)) }

	for name, tc := range map[string]struct {
		pair   Pair
		domain string
		now    time.Time
		err    string // "" for success
	}{
		"issued":                      {pair: serving, domain: domain, now: t0},
		"domain case and dot":         {pair: serving, domain: "Example.COM.", now: t0},
		"within the clock skew":       {pair: serving, domain: domain, now: t0.Add(-time.Hour)},
		"last second":                 {pair: serving, domain: domain, now: t0.Add(validity)},
		"user wildcard only":          {pair: user("*.example.org"), domain: "example.org", now: t0},
		"user wildcard among others":  {pair: user("example.org", "www.example.net", "*.example.org"), domain: "example.org", now: t0},
		"expired":                     {pair: serving, domain: domain, now: t0.Add(validity + time.Second), err: "certificate expired at 2026-04-02T03:04:05Z"},
		"not yet valid":               {pair: serving, domain: domain, now: t0.Add(-time.Hour - time.Second), err: "certificate is not valid before 2026-01-02T02:04:05Z"},
		"another domain":              {pair: serving, domain: "example.org", now: t0, err: "certificate is valid for [*.example.com example.com], not for *.example.org"},
		"parent domain":               {pair: serving, domain: "com", now: t0, err: "certificate is valid for [*.example.com example.com], not for *.com"},
		"subdomain":                   {pair: serving, domain: "api.example.com", now: t0, err: "certificate is valid for [*.example.com example.com], not for *.api.example.com"},
		"user single host":            {pair: user("a.example.org"), domain: "example.org", now: t0, err: "certificate is valid for [a.example.org], not for *.example.org"},
		"user apex only":              {pair: user("example.org"), domain: "example.org", now: t0, err: "certificate is valid for [example.org], not for *.example.org"},
		"user wildcard one level off": {pair: user("*.a.example.org"), domain: "example.org", now: t0, err: "certificate is valid for [*.a.example.org], not for *.example.org"},
		"user without names":          {pair: user(), domain: "example.org", now: t0, err: "certificate is valid for [], not for *.example.org"},
		"mismatched key":              {pair: Pair{CertPEM: serving.CertPEM, KeyPEM: other.KeyPEM}, domain: domain, now: t0, err: "private key does not match the certificate"},
		"garbage":                     {pair: Pair{CertPEM: []byte("garbage"), KeyPEM: []byte("garbage")}, domain: domain, now: t0, err: "no PEM certificate found"},
		"invalid domain":              {pair: serving, domain: "*.example.com", now: t0, err: `domain "*.example.com" is not a DNS name`},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			info, err := Check(tc.pair, tc.domain, tc.now)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(info.DNSNames).NotTo(BeEmpty())
			} else {
				g.Expect(err).To(MatchError(tc.err))
			}
		})
	}
}

func TestRenewAt(t *testing.T) {
	for name, tc := range map[string]struct {
		notBefore, notAfter, want time.Time
	}{
		"three hours":        {notBefore: t0, notAfter: t0.Add(3 * time.Hour), want: t0.Add(2 * time.Hour)},
		"ninety days":        {notBefore: t0, notAfter: t0.Add(90 * day), want: t0.Add(60 * day)},
		"with the skew hour": {notBefore: t0.Add(-time.Hour), notAfter: t0.Add(90 * day), want: t0.Add(60*day - 20*time.Minute)},
		"CA of ten times":    {notBefore: t0.Add(-time.Hour), notAfter: t0.Add(900 * day), want: t0.Add(600*day - 20*time.Minute)},
		"rounds down":        {notBefore: t0, notAfter: t0.Add(10), want: t0.Add(6)},
		"190 years":          {notBefore: t0, notAfter: t0.Add(6e18), want: t0.Add(4e18)},
		"empty lifetime":     {notBefore: t0, notAfter: t0, want: t0},
		"reversed":           {notBefore: t0, notAfter: t0.Add(-day), want: t0},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(RenewAt(tc.notBefore, tc.notAfter)).To(Equal(tc.want))
		})
	}
}

func TestPlan(t *testing.T) {
	ca := mustCA(t, domain, t0, CAValidityFactor*validity)                    // renew at t0+600d-20m
	serving := mustServing(t, ca, domain, t0, validity)                       // renew at t0+60d-20m
	lateServing := mustServing(t, ca, domain, t0.Add(595*day), validity)      // renew at t0+655d-20m
	otherCA := mustCA(t, domain, t0, CAValidityFactor*validity)               // same name, other key
	otherServing := mustServing(t, otherCA, domain, t0, validity)             // signed by otherCA
	orgServing := mustServing(t, ca, "example.org", t0, validity)             // signed by ca, other domain
	shortCA := mustCA(t, domain, t0, 100*day)                                 // renew at t0+66d15h40m
	shortServing := mustServing(t, shortCA, domain, t0.Add(50*day), validity) // capped at t0+100d, renew at t0+83d7h40m
	garbage := Pair{CertPEM: []byte("garbage"), KeyPEM: []byte("garbage")}
	// A new serving certificate issued at now is due for renewal then.
	servingRenew := func(now time.Time) time.Time { return now.Add(60*day - 20*time.Minute) }

	for name, tc := range map[string]struct {
		ca, serving Pair
		domain      string
		now         time.Time
		want        Decision
	}{
		"just issued": {
			ca: ca, serving: serving, now: t0,
			want: Decision{NextCheck: t0.Add(60*day - 20*time.Minute)},
		},
		"domain written differently": {
			ca: ca, serving: serving, domain: "EXAMPLE.com.", now: t0.Add(day),
			want: Decision{NextCheck: t0.Add(60*day - 20*time.Minute)},
		},
		"a second before serving renewal": {
			ca: ca, serving: serving, now: t0.Add(60*day - 20*time.Minute - time.Second),
			want: Decision{NextCheck: t0.Add(60*day - 20*time.Minute)},
		},
		"serving two thirds passed": {
			ca: ca, serving: serving, now: t0.Add(60*day - 20*time.Minute),
			want: Decision{
				NewServing: true,
				Reason:     "serving certificate renewed: two thirds of its lifetime passed at 2026-03-03T02:44:05Z",
				NextCheck:  servingRenew(t0.Add(60*day - 20*time.Minute)),
			},
		},
		"serving expired": {
			ca: ca, serving: serving, now: t0.Add(100 * day),
			want: Decision{
				NewServing: true,
				Reason:     "serving certificate reissued: certificate expired at 2026-04-02T03:04:05Z",
				NextCheck:  servingRenew(t0.Add(100 * day)),
			},
		},
		"CA renewal comes first": {
			ca: shortCA, serving: shortServing, now: t0.Add(51 * day),
			want: Decision{NextCheck: t0.Add(66*day + 15*time.Hour + 40*time.Minute)},
		},
		"new serving capped by the CA, CA renewal comes first": {
			ca: shortCA, serving: Pair{}, now: t0.Add(51 * day),
			want: Decision{
				NewServing: true,
				Reason:     "serving certificate issued: there was none",
				NextCheck:  t0.Add(66*day + 15*time.Hour + 40*time.Minute),
			},
		},
		"CA two thirds passed": {
			ca: ca, serving: lateServing, now: t0.Add(600*day - 20*time.Minute),
			want: Decision{
				NewCA: true, NewServing: true,
				Reason:    "CA renewed: two thirds of its lifetime passed at 2027-08-25T02:44:05Z",
				NextCheck: servingRenew(t0.Add(600*day - 20*time.Minute)),
			},
		},
		"a second before CA renewal": {
			ca: ca, serving: lateServing, now: t0.Add(600*day - 20*time.Minute - time.Second),
			want: Decision{NextCheck: t0.Add(600*day - 20*time.Minute)},
		},
		"CA expired": {
			ca: ca, serving: serving, now: t0.Add(900*day + time.Second),
			want: Decision{
				NewCA: true, NewServing: true,
				Reason:    "CA reissued: certificate expired at 2028-06-20T03:04:05Z",
				NextCheck: servingRenew(t0.Add(900*day + time.Second)),
			},
		},
		"CA not yet valid": {
			ca: ca, serving: serving, now: t0.Add(-2 * time.Hour),
			want: Decision{
				NewCA: true, NewServing: true,
				Reason:    "CA reissued: certificate is not valid before 2026-01-02T02:04:05Z",
				NextCheck: servingRenew(t0.Add(-2 * time.Hour)),
			},
		},
		"domain changed": {
			ca: ca, serving: serving, domain: "example.org", now: t0.Add(day),
			want: Decision{
				NewCA: true, NewServing: true,
				Reason:    `CA reissued: its common name is "portico-gateway-ca example.com", not "portico-gateway-ca example.org"`,
				NextCheck: servingRenew(t0.Add(day)),
			},
		},
		"invalid domain": {
			ca: ca, serving: serving, domain: "*.example.com", now: t0.Add(day),
			want: Decision{
				NewCA: true, NewServing: true,
				Reason:    `domain "*.example.com" is not a DNS name`,
				NextCheck: t0.Add(day),
			},
		},
		"no CA": {
			ca: Pair{}, serving: serving, now: t0.Add(day),
			want: Decision{
				NewCA: true, NewServing: true,
				Reason:    "CA issued: there was none",
				NextCheck: servingRenew(t0.Add(day)),
			},
		},
		"garbage CA": {
			ca: garbage, serving: serving, now: t0.Add(day),
			want: Decision{
				NewCA: true, NewServing: true,
				Reason:    "CA reissued: no PEM certificate found",
				NextCheck: servingRenew(t0.Add(day)),
			},
		},
		"CA key mismatch": {
			ca: Pair{CertPEM: ca.CertPEM, KeyPEM: otherCA.KeyPEM}, serving: serving, now: t0.Add(day),
			want: Decision{
				NewCA: true, NewServing: true,
				Reason:    "CA reissued: private key does not match the certificate",
				NextCheck: servingRenew(t0.Add(day)),
			},
		},
		"serving certificate as CA": {
			ca: serving, serving: serving, now: t0.Add(day),
			want: Decision{
				NewCA: true, NewServing: true,
				Reason:    "CA reissued: the certificate is not a CA",
				NextCheck: servingRenew(t0.Add(day)),
			},
		},
		"no serving certificate": {
			ca: ca, serving: Pair{}, now: t0.Add(day),
			want: Decision{
				NewServing: true,
				Reason:     "serving certificate issued: there was none",
				NextCheck:  servingRenew(t0.Add(day)),
			},
		},
		"garbage serving certificate": {
			ca: ca, serving: garbage, now: t0.Add(day),
			want: Decision{
				NewServing: true,
				Reason:     "serving certificate reissued: no PEM certificate found",
				NextCheck:  servingRenew(t0.Add(day)),
			},
		},
		"serving key mismatch": {
			ca: ca, serving: Pair{CertPEM: serving.CertPEM, KeyPEM: otherServing.KeyPEM}, now: t0.Add(day),
			want: Decision{
				NewServing: true,
				Reason:     "serving certificate reissued: private key does not match the certificate",
				NextCheck:  servingRenew(t0.Add(day)),
			},
		},
		"serving signed by another CA": {
			ca: ca, serving: otherServing, now: t0.Add(day),
			want: Decision{
				NewServing: true,
				Reason:     "serving certificate reissued: it is not signed by the current CA",
				NextCheck:  servingRenew(t0.Add(day)),
			},
		},
		"serving for another domain": {
			ca: ca, serving: orgServing, now: t0.Add(day),
			want: Decision{
				NewServing: true,
				Reason:     "serving certificate reissued: certificate is valid for [*.example.org example.org], not for *.example.com",
				NextCheck:  servingRenew(t0.Add(day)),
			},
		},
		"CA as serving certificate": {
			ca: ca, serving: ca, now: t0.Add(day),
			want: Decision{
				NewServing: true,
				Reason:     "serving certificate reissued: certificate is valid for [], not for *.example.com",
				NextCheck:  servingRenew(t0.Add(day)),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			if tc.domain == "" {
				tc.domain = domain
			}
			d := Plan(tc.ca, tc.serving, tc.domain, validity, tc.now)
			g.Expect(d).To(Equal(tc.want))
			if !d.NewServing {
				return
			}
			// Carrying the decision out gives what it predicts.
			newCA, newServing, err := Apply(d, tc.ca, tc.serving, tc.domain, validity, tc.now)
			if tc.domain == "*.example.com" {
				g.Expect(err).To(MatchError(`domain "*.example.com" is not a DNS name`))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			if d.NewCA {
				g.Expect(newCA).NotTo(Equal(tc.ca))
			} else {
				g.Expect(newCA).To(Equal(tc.ca))
			}
			g.Expect(newServing).NotTo(Equal(tc.serving))
			g.Expect(Verify(newServing, newCA.CertPEM, "api."+tc.domain, tc.now)).To(Succeed())
			g.Expect(Plan(newCA, newServing, tc.domain, validity, tc.now)).To(Equal(Decision{NextCheck: d.NextCheck}))
		})
	}
}

// Apply issues the CA for ten times the serving validity.
func TestApplyValidity(t *testing.T) {
	g := NewWithT(t)
	now := t0.Add(1500 * time.Millisecond)
	d := Plan(Pair{}, Pair{}, domain, validity, now)
	g.Expect(d).To(Equal(Decision{
		NewCA: true, NewServing: true,
		Reason:    "CA issued: there was none",
		NextCheck: t0.Add(60*day - 20*time.Minute + time.Second),
	}))
	ca, serving, err := Apply(d, Pair{}, Pair{}, domain, validity, now)
	g.Expect(err).NotTo(HaveOccurred())
	caCert, leaf := certs(t, ca)[0], certs(t, serving)[0]
	g.Expect(caCert.NotBefore).To(Equal(t0.Add(time.Second - time.Hour)))
	g.Expect(caCert.NotAfter).To(Equal(t0.Add(time.Second + 900*day)))
	g.Expect(leaf.NotBefore).To(Equal(t0.Add(time.Second - time.Hour)))
	g.Expect(leaf.NotAfter).To(Equal(t0.Add(time.Second + 90*day)))
	g.Expect(certs(t, serving)[1].Raw).To(Equal(caCert.Raw))

	// Nothing to do: Apply keeps the pairs.
	sameCA, sameServing, err := Apply(Decision{}, ca, serving, domain, validity, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sameCA).To(Equal(ca))
	g.Expect(sameServing).To(Equal(serving))
}

// A controller reconciling daily for five and a half years always serves a
// certificate that clients trusting the current CA accept, renews the
// serving certificate every 60 days and the CA every 600 days.
func TestTimeline(t *testing.T) {
	g := NewWithT(t)
	var ca, serving Pair
	var caIssued, servingIssued []int
	for n := range 2000 {
		now := t0.Add(time.Duration(n) * day)
		d := Plan(ca, serving, domain, validity, now)
		g.Expect(d.NewCA && !d.NewServing).To(BeFalse(), "day %d", n)
		newCA, newServing, err := Apply(d, ca, serving, domain, validity, now)
		g.Expect(err).NotTo(HaveOccurred(), "day %d", n)
		if d.NewCA {
			caIssued = append(caIssued, n)
		}
		if d.NewServing {
			servingIssued = append(servingIssued, n)
		}
		ca, serving = newCA, newServing

		g.Expect(d.NextCheck.After(now)).To(BeTrue(), "day %d", n)
		_, err = Check(serving, domain, now)
		g.Expect(err).NotTo(HaveOccurred(), "day %d", n)
		g.Expect(Verify(serving, ca.CertPEM, "api.example.com", now)).To(Succeed(), "day %d", n)
		g.Expect(Plan(ca, serving, domain, validity, now)).To(Equal(Decision{NextCheck: d.NextCheck}), "day %d", n)
	}
	g.Expect(caIssued).To(Equal([]int{0, 600, 1200, 1800}))
	var every60 []int
	for n := 0; n < 2000; n += 60 {
		every60 = append(every60, n)
	}
	g.Expect(servingIssued).To(Equal(every60))
}
