package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/explain"
	"github.com/portico-dev/portico/internal/tokencheck"
)

// options are explain's flags.
type options struct {
	host, path, method, query, token, gateway, output, namespace, kubeconfig string
	// parent names a Gateway API Gateway (HTTPRoute mode) instead of gateway.
	parent, clientCert string
	headers            headerFlag
	trustedProxies     int
	port               uint
	https, fetchJWKS   bool
	// fetch fetches key sets (fetchHTTP unless a test sets it).
	fetch fetchFunc
}

type headerFlag map[string]string

func (h headerFlag) String() string { return fmt.Sprint(map[string]string(h)) }

func (h headerFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("header %q: want Name: value", v)
	}
	h[strings.ToLower(strings.TrimSpace(name))] = strings.TrimSpace(value)
	return nil
}

// Main runs kubectl-portico with args and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "explain" {
		_, _ = fmt.Fprintln(stderr, "usage: kubectl portico explain --host HOST [--path /p] [--method GET] [-H 'Name: value'] [--query a=b] [--token JWT] [--https] [--port N] [--client-cert FILE] [--gateway NS/NAME | --parent NS/NAME] [-o json]")
		return 2
	}
	o, err := parse(args[1:], stderr)
	if err != nil {
		return 2
	}
	cfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{})
	rest, err := cfg.ClientConfig()
	if err == nil && o.namespace == "" {
		o.namespace, _, err = cfg.Namespace()
	}
	var c client.Client
	if err == nil {
		c, err = client.New(rest, client.Options{Scheme: explain.Scheme()})
	}
	if err == nil {
		err = run(context.Background(), c, o, stdout)
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

func parse(args []string, stderr io.Writer) (options, error) {
	o := options{headers: headerFlag{}}
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.host, "host", "", "the request's host (required)")
	fs.StringVar(&o.path, "path", "/", "the request's path")
	fs.StringVar(&o.method, "method", "GET", "the request's method")
	fs.StringVar(&o.query, "query", "", "the request's query string (a=1&b=2)")
	fs.Var(o.headers, "H", "a header, 'Name: value' (repeatable)")
	fs.StringVar(&o.token, "token", "", "a JWT the request presents")
	fs.BoolVar(&o.fetchJWKS, "fetch-jwks", true, "fetch the key sets the RequestAuthentications name to check the token's signature (from where kubectl runs; one that cannot be fetched refuses the token, as istiod fails closed); false takes every key set as signing it")
	fs.StringVar(&o.gateway, "gateway", "istio-system/portico-gateway", "the Istio gateway (namespace/name) the request arrives at; default: the default gateway")
	fs.StringVar(&o.parent, "parent", "", "the Gateway API Gateway (namespace/name) the request arrives at instead (HTTPRoute mode, an APIRule's spec.parentRef)")
	fs.BoolVar(&o.https, "https", false, "the request comes over TLS (port 443 unless --port)")
	fs.UintVar(&o.port, "port", 0, "the gateway's port the request arrives on (default 80, or 443 with --https)")
	fs.StringVar(&o.clientCert, "client-cert", "", "a PEM file: the client certificate the request presents")
	fs.IntVar(&o.trustedProxies, "trusted-proxies", 0, "the gateway's trusted proxies in front (APIGateway spec.apiRules.trustedProxies)")
	fs.StringVar(&o.output, "o", "text", "output: text or json")
	fs.StringVar(&o.namespace, "n", "", "your namespace (default: the kubeconfig context's)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.fetchJWKS {
		o.fetch = fetchHTTP
	}
	if o.host == "" || (o.output != "text" && o.output != "json") {
		err := fmt.Errorf("--host is required and -o is text or json")
		_, _ = fmt.Fprintln(stderr, err)
		return o, err
	}
	return o, nil
}

// run reads the caller's view of the cluster with c, explains the request
// and writes it.
func run(ctx context.Context, c client.Reader, o options, out io.Writer) error {
	gateway := o.gateway
	if o.parent != "" {
		gateway = o.parent
	}
	w, err := explain.ReadMode(ctx, c, o.namespace, gateway, o.parent != "", explain.EdgeGateway{TrustedProxies: o.trustedProxies})
	if err != nil {
		return err
	}
	q := explain.Query{Host: o.host, Path: o.path, Method: o.method, Headers: o.headers, Port: uint32(o.port), TLS: o.https}
	if o.clientCert != "" {
		if q.ClientCert, err = os.ReadFile(o.clientCert); err != nil {
			return fmt.Errorf("--client-cert: %w", err)
		}
	}
	if q.Query, err = url.ParseQuery(o.query); err != nil {
		return fmt.Errorf("--query: %w", err)
	}
	var note string
	if o.token != "" {
		var claims tokencheck.Claims
		if q.Token, claims, err = decodeToken(o.token); err != nil {
			return err
		}
		note = signedBy(ctx, o.token, claims, q.Token, w.Policies, o.fetch, time.Now())
	}
	e, err := explain.Explain(w, q)
	if err != nil {
		return err
	}
	if note != "" {
		e.Steps = append([]explain.Step{{Stage: "token", Finding: note}}, e.Steps...)
	}
	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	return writeText(out, e)
}

func writeText(out io.Writer, e explain.Explanation) error {
	var b strings.Builder
	for i, s := range e.Steps {
		fmt.Fprintf(&b, "%d. %-10s %s\n", i+1, s.Stage, s.Finding)
		for _, obj := range s.Objects {
			fmt.Fprintf(&b, "   %-10s %s\n", "", obj)
		}
	}
	fmt.Fprintf(&b, "verdict: %s — %s\n", e.Outcome, e.Reason)
	_, err := io.WriteString(out, b.String())
	return err
}
