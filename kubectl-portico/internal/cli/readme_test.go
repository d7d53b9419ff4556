package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// readmeRuns is the README's example: team-a, which may read its own
// namespace only, explains a request with a token of its issuer to its
// ledger, then a request to a host team-b owns; then the administrator
// explains a request in HTTPRoute mode.
func readmeRuns(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	token, jwks := signed(t, key, map[string]any{"iss": "https://idp.a", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	fetch := func(context.Context, string) ([]byte, error) { return jwks, nil }
	var out bytes.Buffer
	for _, o := range []options{
		{host: "ledger.a.example", path: "/admin", method: "GET", token: token, fetch: fetch, namespace: "team-a"},
		{host: "shop.b.example", path: "/", method: "GET", namespace: "team-a"},
		{host: "web.a.example", path: "/health", method: "GET", parent: "istio-system/web"},
	} {
		o.gateway, o.output = gateway, "text"
		args := "--host " + o.host
		as := o.namespace
		if as != "" {
			args = "-n " + as + " " + args
		} else {
			o.namespace = "default"
		}
		if o.parent != "" {
			args += " --parent " + o.parent
		}
		if o.path != "/" {
			args += " --path " + o.path
		}
		if o.token != "" {
			args += ` --token "$JWT"`
		}
		out.WriteString("$ kubectl portico explain " + args + "\n")
		if err := run(context.Background(), cluster(as), o, &out); err != nil {
			t.Fatal(err)
		}
	}
	return out.String()
}

// The README shows what the tool prints for its example, exactly.
func TestTheREADMEShowsWhatTheToolPrints(t *testing.T) {
	g := NewWithT(t)
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	g.Expect(err).NotTo(HaveOccurred())
	got := readmeRuns(t)
	if os.Getenv("UPDATE_README") != "" {
		t.Log("\n" + got)
	}
	g.Expect(string(readme)).To(ContainSubstring("```console\n"+got+"```"),
		"README.md's example of kubectl portico explain is not what it prints; UPDATE_README=1 go test -run README -v ./kubectl-portico/... prints it")
	g.Expect(strings.Count(got, "verdict:")).To(Equal(3))
}
