//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Every request a user story sends through the gateway stand-in of
// deployTrafficPath is also explained by `kubectl portico explain` (issue
// 47), the binary `make build` writes, reading the node cluster with the
// suite's kubeconfig, and its verdict must be what the request really got.
// The stand-in routes as Istio's gateway does, so the gateway's half is
// compared always: an answer of a backend (2xx, 3xx) is a route explain
// takes, a 404 is explain's 404. The backends' half (routed, 401, 403) is
// compared where sidecar stand-ins programmed by istiod enforce the
// backends' AuthorizationPolicies and RequestAuthentications
// (sidecarsEnforce, the node target's default: xdssidecars_test.go); then
// explain fetches the key sets the RequestAuthentications name, trusting
// the suite's token issuer's CA, so it checks signatures as istiod's
// jwt_authn does. Elsewhere the plain backends enforce nothing, so a
// request Istio's sidecar would refuse reaches them and only the gateway's
// half is compared. Answers explain does not predict (429 of a rate
// limit, 5xx of a backend) and requests that fail before an answer are not
// compared. explainedRequests counts the comparisons by verdict, also in
// e2e/_artifacts/explain-tally.txt.
var explainedRequests = struct {
	sync.Mutex
	byVerdict map[string]int
}{byVerdict: map[string]int{}}

// explainVerdict maps an answer's status to the verdict explain gives it.
func explainVerdict(status int) (string, bool) {
	switch {
	case status >= 200 && status < 400:
		return "routed", true
	case status == 404, status == 401, status == 403:
		return strconv.Itoa(status), true
	}
	return "", false
}

// standInGateways are the Gateways the stand-in serves: a request is
// routed by the one whose VirtualServices take its host.
func standInGateways() []string {
	return []string{gatewayNamespace + "/public", defaultGatewayRef}
}

// expectExplained compares explain's verdict with the answer of one
// e2e-agent get request (its arguments), when it went through the stand-in.
func expectExplained(ctx context.Context, args []string) {
	req, ok := parseGet(args)
	if !ok || req.url.Hostname() != standInIP(ctx) {
		return
	}
	want, ok := explainVerdict(req.status)
	if !ok {
		return
	}
	got := ""
	var outputs []string
	enforced := sidecarsEnforce()
	for _, gw := range standInGateways() {
		cmdArgs := []string{"explain", "--kubeconfig", kubeconfig, "--gateway", gw, "--host", req.host, "--path", req.url.Path,
			"--method", req.method, "--query", req.url.RawQuery, "--fetch-jwks=" + strconv.FormatBool(enforced), "-o", "json"}
		for name, value := range req.headers {
			cmdArgs = append(cmdArgs, "-H", name+": "+value)
			// explain takes the JWT a request presents as --token.
			if token, ok := strings.CutPrefix(value, "Bearer "); ok && strings.EqualFold(name, "Authorization") {
				cmdArgs = append(cmdArgs, "--token", token)
			}
		}
		cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "kubectl-portico"), cmdArgs...)
		if enforced && suiteIssuer != nil {
			cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+suiteIssuer.trust)
		}
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "kubectl portico %s: %s", strings.Join(cmdArgs, " "), out)
		var e struct {
			Outcome string `json:"outcome"`
		}
		Expect(json.Unmarshal(out, &e)).To(Succeed(), string(out))
		outputs = append(outputs, string(out))
		if e.Outcome != "404" || got == "" {
			got = e.Outcome
		}
	}
	if !enforced && want == "routed" {
		// The gateway's half: a route takes the request; the backend's
		// verdict is explain's alone (recorded by verdict).
		Expect(got).NotTo(Equal("404"), "kubectl portico explain of %v finds no route; the request got %d:\n%s", args, req.status, strings.Join(outputs, "\n"))
	} else {
		Expect(got).To(Equal(want), "kubectl portico explain of %v says %s; the request got %d:\n%s", args, got, req.status, strings.Join(outputs, "\n"))
	}
	explainedRequests.Lock()
	explainedRequests.byVerdict[got]++
	tally := fmt.Sprintf("kubectl portico explain: %d requests explained so far, by its verdict %v (backends compared: %t)\n",
		sum(explainedRequests.byVerdict), explainedRequests.byVerdict, enforced)
	GinkgoWriter.Print(tally)
	Expect(os.WriteFile(filepath.Join(artifacts, "explain-tally.txt"), []byte(tally), 0o644)).To(Succeed())
	explainedRequests.Unlock()
}

// getRequest is what explain needs of an e2e-agent get request.
type getRequest struct {
	url     *url.URL
	host    string
	method  string
	headers map[string]string
	status  int
}

// parseGet reads the arguments of e2e-agent get; false for requests whose
// answer is not a status (loops, expected errors, client certificates,
// redirected connections).
func parseGet(args []string) (getRequest, bool) {
	if len(args) == 0 {
		return getRequest{}, false
	}
	u, err := url.Parse(args[0])
	if err != nil {
		return getRequest{}, false
	}
	r := getRequest{url: u, host: u.Hostname(), method: "GET", headers: map[string]string{}, status: 200}
	for i := 1; i < len(args); i++ {
		flag, value := args[i], ""
		if i+1 < len(args) {
			value = args[i+1]
		}
		switch flag {
		case "--loop", "--expect-error", "--cert", "--connect", "--no-follow":
			return getRequest{}, false
		case "--host":
			r.host, i = value, i+1
		case "--method":
			r.method, i = value, i+1
		case "--header":
			name, v, _ := strings.Cut(value, "=")
			r.headers[name], i = v, i+1
		case "--expect-status":
			if r.status, err = strconv.Atoi(value); err != nil {
				return getRequest{}, false
			}
			i++
		default:
			if strings.HasPrefix(flag, "--") && !strings.Contains(flag, "=") {
				i++ // every other flag of get takes a value
			}
		}
	}
	return r, true
}

// standInIP is the ClusterIP of the gateway stand-in's Service, "" while
// it does not exist.
func standInIP(ctx context.Context) string {
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: gatewayNamespace, Name: gatewayStandIn}, svc); err != nil {
		return ""
	}
	return svc.Spec.ClusterIP
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
