package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

const (
	// ClockSkew is how long before now every issued certificate starts,
	// so clients whose clock is behind accept it.
	ClockSkew = time.Hour
	// MinValidity is the shortest validity IssueCA and IssueServing accept:
	// anything shorter would be due for renewal as soon as it is issued,
	// since the lifetime includes ClockSkew.
	MinValidity = time.Hour
	// CAValidityFactor is how many times longer than the serving
	// certificate the CA is valid (see Apply).
	CAValidityFactor = 10

	caCommonNamePrefix = "portico-gateway-ca "
	// checkLabel makes the sample name Check verifies: a certificate valid
	// for it is valid for every one-label name under the domain.
	checkLabel = "portico-check"
)

var (
	// ErrNoCertificate is returned when a Pair's CertPEM holds no PEM
	// CERTIFICATE block.
	ErrNoCertificate = errors.New("no PEM certificate found")
	// ErrNoPrivateKey is returned when a Pair's KeyPEM holds no PEM
	// private key block.
	ErrNoPrivateKey = errors.New("no PEM private key found")
	// ErrKeyMismatch is returned when a Pair's private key is not the one
	// of its (leaf) certificate.
	ErrKeyMismatch = errors.New("private key does not match the certificate")
)

// Pair is a PEM certificate (chain, leaf first) and its PEM private key,
// as in the tls.crt and tls.key of a kubernetes.io/tls Secret.
type Pair struct{ CertPEM, KeyPEM []byte }

// IsEmpty tells whether the pair has neither certificate nor key.
func (p Pair) IsEmpty() bool { return len(p.CertPEM) == 0 && len(p.KeyPEM) == 0 }

// Info is what Inspect learns from a pair, about its leaf certificate.
type Info struct {
	NotBefore, NotAfter time.Time
	DNSNames            []string
	IsCA                bool
	// Issuer and Subject are distinguished names, e.g.
	// "CN=portico-gateway-ca example.com".
	Issuer, Subject string
}

// Decision is what the selfSigned source must do at a given time (see
// Plan).
type Decision struct {
	// NewCA means a new CA must be issued; NewServing is then true too.
	NewCA bool
	// NewServing means a new serving certificate must be issued, from the
	// new CA when NewCA is set, else from the current one.
	NewServing bool
	// Reason says why, in a sentence; empty when nothing is to be done.
	Reason string
	// NextCheck is when the next renewal is due once this decision is
	// carried out: the controller requeues for then.
	NextCheck time.Time
}

// IssueCA creates a self-signed CA for domain: ECDSA P-256 key, common name
// "portico-gateway-ca <domain>", allowed to sign end-entity certificates
// only, valid from now-ClockSkew to now+validity.
func IssueCA(domain string, now time.Time, validity time.Duration) (Pair, error) {
	domain, err := normalize(domain)
	if err != nil {
		return Pair{}, err
	}
	if validity < MinValidity {
		return Pair{}, fmt.Errorf("CA validity %s is shorter than %s", validity, MinValidity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate CA key: %w", err)
	}
	notBefore, notAfter := window(now, validity)
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: caCommonName(domain)},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	return issue(template, nil, key, nil)
}

// IssueServing creates the serving certificate for *.<domain> and <domain>
// signed by ca: ECDSA P-256 key, server authentication only, valid from
// now-ClockSkew to now+validity or the CA's NotAfter, whichever is first.
// Its CertPEM is the leaf followed by the CA certificate.
func IssueServing(ca Pair, domain string, now time.Time, validity time.Duration) (Pair, error) {
	domain, err := normalize(domain)
	if err != nil {
		return Pair{}, err
	}
	if validity < MinValidity {
		return Pair{}, fmt.Errorf("serving certificate validity %s is shorter than %s", validity, MinValidity)
	}
	parent, err := parse(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("CA: %w", err)
	}
	caCert := parent.leaf()
	if !isCA(caCert) {
		return Pair{}, errors.New("CA: the certificate is not a CA")
	}
	if err := checkTimes(caCert, now); err != nil {
		return Pair{}, fmt.Errorf("CA: %w", err)
	}
	notBefore, notAfter := servingWindow(now, validity, caCert.NotAfter)
	if !notAfter.After(notBefore) {
		return Pair{}, fmt.Errorf("CA: it expires at %s, too soon to sign", rfc3339(caCert.NotAfter))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate serving key: %w", err)
	}
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "*." + domain},
		DNSNames:              []string{"*." + domain, domain},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return issue(template, caCert, key, parent.key)
}

// Inspect parses a pair and returns facts about its leaf certificate. It
// fails when CertPEM holds no certificate (ErrNoCertificate) or one that
// does not parse, when KeyPEM holds no private key (ErrNoPrivateKey) or one
// that does not parse, and when the key is not the leaf's (ErrKeyMismatch).
func Inspect(p Pair) (Info, error) {
	parsed, err := parse(p)
	if err != nil {
		return Info{}, err
	}
	return infoOf(parsed.leaf()), nil
}

func infoOf(leaf *x509.Certificate) Info {
	return Info{
		NotBefore: leaf.NotBefore,
		NotAfter:  leaf.NotAfter,
		DNSNames:  append([]string(nil), leaf.DNSNames...),
		IsCA:      leaf.IsCA,
		Issuer:    leaf.Issuer.String(),
		Subject:   leaf.Subject.String(),
	}
}

// Check tells whether p can serve *.<domain> at now: Inspect succeeds, the
// leaf is valid at now, and it is valid for every one-label name under the
// domain (a sample name, with the matching rules of TLS clients). It does
// not check who signed the certificate. It returns what Inspect returns.
func Check(p Pair, domain string, now time.Time) (Info, error) {
	domain, err := normalize(domain)
	if err != nil {
		return Info{}, err
	}
	parsed, err := parse(p)
	if err != nil {
		return Info{}, err
	}
	leaf := parsed.leaf()
	info := infoOf(leaf)
	if err := checkTimes(leaf, now); err != nil {
		return info, err
	}
	if leaf.VerifyHostname(checkLabel+"."+domain) != nil {
		return info, fmt.Errorf("certificate is valid for %v, not for *.%s", leaf.DNSNames, domain)
	}
	return info, nil
}

// Verify tells whether a client trusting the CA certificates in caPEM
// accepts the serving certificate chain for host at now, as a TLS client
// would: the certificates after the leaf are offered as intermediates, and
// the leaf must allow server authentication. The private key is not looked
// at (see Check).
func Verify(serving Pair, caPEM []byte, host string, now time.Time) error {
	chain, err := parseCerts(serving.CertPEM)
	if err != nil {
		return err
	}
	roots, err := parseCerts(caPEM)
	if err != nil {
		return fmt.Errorf("CA: %w", err)
	}
	opts := x509.VerifyOptions{
		DNSName:       host,
		CurrentTime:   now,
		Roots:         x509.NewCertPool(),
		Intermediates: x509.NewCertPool(),
	}
	for _, root := range roots {
		opts.Roots.AddCert(root)
	}
	for _, intermediate := range chain[1:] {
		opts.Intermediates.AddCert(intermediate)
	}
	if _, err := chain[0].Verify(opts); err != nil {
		return fmt.Errorf("certificate is not trusted for %s: %w", host, err)
	}
	return nil
}

// RenewAt is when a certificate valid from notBefore to notAfter must be
// renewed: when two thirds of its lifetime have passed. It is notBefore
// when notAfter is not after notBefore.
func RenewAt(notBefore, notAfter time.Time) time.Time {
	lifetime := notAfter.Sub(notBefore)
	if lifetime <= 0 {
		return notBefore
	}
	// lifetime*2/3 without overflow.
	return notBefore.Add(lifetime/3*2 + lifetime%3*2/3)
}

// Plan decides what the selfSigned source must do at now, given the
// current CA and serving pairs (either may be empty or invalid), the domain
// and the serving certificate validity (the CA's is CAValidityFactor times
// longer):
//
//   - a new CA and a new serving certificate when the CA is missing,
//     invalid, not a CA, not valid at now, past its RenewAt or for another
//     domain;
//   - else a new serving certificate when it is missing, invalid, not valid
//     at now, not valid for the domain, not verified by the current CA or
//     past its RenewAt;
//   - else nothing.
func Plan(ca, serving Pair, domain string, validity time.Duration, now time.Time) Decision {
	name, err := normalize(domain)
	if err != nil {
		// Issuing fails with the same error, which the controller reports.
		return Decision{NewCA: true, NewServing: true, Reason: err.Error(), NextCheck: now}
	}
	if reason := caProblem(ca, name, now); reason != "" {
		caNotBefore, caNotAfter := window(now, CAValidityFactor*validity)
		return Decision{
			NewCA:      true,
			NewServing: true,
			Reason:     reason,
			NextCheck:  earliest(RenewAt(caNotBefore, caNotAfter), RenewAt(servingWindow(now, validity, caNotAfter))),
		}
	}
	caCert := mustParse(ca).leaf() // caProblem checked it
	caRenew := RenewAt(caCert.NotBefore, caCert.NotAfter)
	if reason := servingProblem(ca, serving, name, now); reason != "" {
		return Decision{
			NewServing: true,
			Reason:     reason,
			NextCheck:  earliest(caRenew, RenewAt(servingWindow(now, validity, caCert.NotAfter))),
		}
	}
	leaf := mustParse(serving).leaf() // servingProblem checked it
	return Decision{NextCheck: earliest(caRenew, RenewAt(leaf.NotBefore, leaf.NotAfter))}
}

// Apply carries out d, a decision of Plan with the same arguments: it
// issues a new CA valid CAValidityFactor times validity when d.NewCA, and a
// new serving certificate from the new or current CA when d.NewServing. It
// returns the CA and serving pairs to store, the given ones when unchanged.
func Apply(d Decision, ca, serving Pair, domain string, validity time.Duration, now time.Time) (Pair, Pair, error) {
	if d.NewCA {
		var err error
		if ca, err = IssueCA(domain, now, CAValidityFactor*validity); err != nil {
			return Pair{}, Pair{}, err
		}
	}
	if d.NewServing || d.NewCA {
		var err error
		if serving, err = IssueServing(ca, domain, now, validity); err != nil {
			return Pair{}, Pair{}, err
		}
	}
	return ca, serving, nil
}

// caProblem is why ca cannot stay the CA for domain at now, or "".
func caProblem(ca Pair, domain string, now time.Time) string {
	if ca.IsEmpty() {
		return "CA issued: there was none"
	}
	parsed, err := parse(ca)
	if err != nil {
		return "CA reissued: " + err.Error()
	}
	cert := parsed.leaf()
	if !isCA(cert) {
		return "CA reissued: the certificate is not a CA"
	}
	if err := checkTimes(cert, now); err != nil {
		return "CA reissued: " + err.Error()
	}
	if want := caCommonName(domain); cert.Subject.CommonName != want {
		return fmt.Sprintf("CA reissued: its common name is %q, not %q", cert.Subject.CommonName, want)
	}
	if renew := RenewAt(cert.NotBefore, cert.NotAfter); !now.Before(renew) {
		return "CA renewed: two thirds of its lifetime passed at " + rfc3339(renew)
	}
	return ""
}

// servingProblem is why serving cannot stay the serving certificate of the
// valid CA ca for domain at now, or "".
func servingProblem(ca, serving Pair, domain string, now time.Time) string {
	if serving.IsEmpty() {
		return "serving certificate issued: there was none"
	}
	info, err := Check(serving, domain, now)
	if err != nil {
		return "serving certificate reissued: " + err.Error()
	}
	if err := Verify(serving, ca.CertPEM, checkLabel+"."+domain, now); err != nil {
		if errors.As(err, new(x509.UnknownAuthorityError)) {
			return "serving certificate reissued: it is not signed by the current CA"
		}
		return "serving certificate reissued: " + err.Error()
	}
	if renew := RenewAt(info.NotBefore, info.NotAfter); !now.Before(renew) {
		return "serving certificate renewed: two thirds of its lifetime passed at " + rfc3339(renew)
	}
	return ""
}

// parsedPair is a pair whose key matches its leaf.
type parsedPair struct {
	chain []*x509.Certificate
	key   crypto.Signer
}

func (p parsedPair) leaf() *x509.Certificate { return p.chain[0] }

func parse(p Pair) (parsedPair, error) {
	chain, err := parseCerts(p.CertPEM)
	if err != nil {
		return parsedPair{}, err
	}
	key, err := parseKey(p.KeyPEM)
	if err != nil {
		return parsedPair{}, err
	}
	// Both parse, so an error here is a key that is not the leaf's.
	if _, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		return parsedPair{}, ErrKeyMismatch
	}
	return parsedPair{chain: chain, key: key}, nil
}

// mustParse parses a pair already known to parse.
func mustParse(p Pair) parsedPair {
	parsed, err := parse(p)
	if err != nil {
		panic(err)
	}
	return parsed
}

// parseCerts parses the CERTIFICATE blocks of data, skipping other blocks
// as tls.X509KeyPair does.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %w", len(chain)+1, err)
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 {
		return nil, ErrNoCertificate
	}
	return chain, nil
}

// parseKey parses the first private key block of data (PKCS #8, SEC 1 or
// PKCS #1), as tls.X509KeyPair picks it.
func parseKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, ErrNoPrivateKey
		}
		if block.Type != "PRIVATE KEY" && !strings.HasSuffix(block.Type, " PRIVATE KEY") {
			continue
		}
		if key, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
			if signer, ok := key.(crypto.Signer); ok {
				return signer, nil
			}
			return nil, fmt.Errorf("private key of type %T is not supported", key)
		}
		if key, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
			return key, nil
		}
		if key, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
			return key, nil
		}
		return nil, errors.New("private key does not parse")
	}
}

// issue signs template with parentKey (self-signed when parent is nil) for
// key, with a random serial number. The chain is the new certificate then
// parent.
func issue(template, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer) (Pair, error) {
	serial, err := serialNumber()
	if err != nil {
		return Pair{}, err
	}
	template.SerialNumber = serial
	signer, signerKey := parent, parentKey
	if parent == nil {
		signer, signerKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, signer, key.Public(), signerKey)
	if err != nil {
		return Pair{}, fmt.Errorf("sign certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encode private key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if parent != nil {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: parent.Raw})...)
	}
	return Pair{
		CertPEM: certPEM,
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// serialNumber is a random positive integer of at most 128 bits.
func serialNumber() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		serial, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("generate serial number: %w", err)
		}
		if serial.Sign() > 0 {
			return serial, nil
		}
	}
}

// window is the validity of a certificate issued at now for validity, in
// whole seconds as X.509 stores it.
func window(now time.Time, validity time.Duration) (notBefore, notAfter time.Time) {
	return now.Add(-ClockSkew).UTC().Truncate(time.Second), now.Add(validity).UTC().Truncate(time.Second)
}

// servingWindow is window capped by the NotAfter of the signing CA.
func servingWindow(now time.Time, validity time.Duration, caNotAfter time.Time) (notBefore, notAfter time.Time) {
	notBefore, notAfter = window(now, validity)
	if caNotAfter.Before(notAfter) {
		notAfter = caNotAfter
	}
	return notBefore, notAfter
}

func checkTimes(cert *x509.Certificate, now time.Time) error {
	if now.Before(cert.NotBefore) {
		return fmt.Errorf("certificate is not valid before %s", rfc3339(cert.NotBefore))
	}
	if now.After(cert.NotAfter) {
		return fmt.Errorf("certificate expired at %s", rfc3339(cert.NotAfter))
	}
	return nil
}

func isCA(cert *x509.Certificate) bool {
	return cert.IsCA && cert.BasicConstraintsValid && cert.KeyUsage&x509.KeyUsageCertSign != 0
}

func caCommonName(domain string) string { return caCommonNamePrefix + domain }

// normalize lower-cases domain, drops a trailing dot and checks it is a DNS
// name without wildcard.
func normalize(domain string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(domain, "."))
	if name == "" || len(name) > 253 {
		return "", fmt.Errorf("domain %q is not a DNS name", domain)
	}
	for label := range strings.SplitSeq(name, ".") {
		if !validLabel(label) {
			return "", fmt.Errorf("domain %q is not a DNS name", domain)
		}
	}
	return name, nil
}

func validLabel(label string) bool {
	if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
		return false
	}
	for _, c := range label {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func earliest(first time.Time, others ...time.Time) time.Time {
	for _, t := range others {
		if t.Before(first) {
			first = t
		}
	}
	return first
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }
