//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Every request a user story sends through a gateway is also explained by
// `kubectl portico explain` (issue 47), the binary `make build` writes,
// reading the node cluster with the suite's kubeconfig, and its verdict
// must agree with what the request really got (agreesWith):
//   - through the stand-in of deployTrafficPath (requestTrusting): every
//     story of the pods, the default gateway's HTTPS, redirect and client
//     certificates (a refused handshake is explain's "refused", the
//     certificate read from the client pod's ConfigMap), at each Gateway
//     the stand-in serves;
//   - the login and API-key stories (extauth_test.go): the verdict is the
//     authorizer's, which agrees with its login redirect, 401 or the
//     backend's answer once it lets the request on;
//   - the global rate-limit story: a 429 is never predicted (a bucket's
//     state is not configuration), explain must name the RateLimit that
//     counts the request; its 200s are routes;
//   - HTTPRoute mode through Traefik (`--parent traefik/web`, the
//     entrypoint's port), and on istiod's GatewayClass istio, where no data
//     plane runs: the verdict agrees with the route status istiod wrote (an
//     accepted route is taken, one it did not accept is a 404 that says so).
//
// The gateway's half is compared always: an answer of a backend (2xx, 3xx)
// is a route explain takes, a 404 is explain's 404. The backends' half
// (routed, 401, 403) is compared where sidecar stand-ins programmed by
// istiod enforce the backends' AuthorizationPolicies and
// RequestAuthentications (sidecarsEnforce, the node target's default:
// xdssidecars_test.go; the login stories' CUSTOM policies always); with
// plain backends, which enforce nothing, a request Istio's sidecar would
// refuse reaches them, and Traefik is no Istio proxy. 5xx answers and errors other
// than a refused handshake are not compared. explainedRequests counts the
// comparisons by verdict (e2e/_artifacts/explain-tally.txt, each one in
// explain-report.txt).
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

// explainedAnswer is what `kubectl portico explain -o json` prints.
type explainedAnswer struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
	Steps   []struct {
		Stage   string `json:"stage"`
		Finding string `json:"finding"`
	} `json:"steps"`
}

// says reports whether a step of the stage says finding.
func (e explainedAnswer) says(stage, finding string) bool {
	for _, s := range e.Steps {
		if s.Stage == stage && strings.Contains(s.Finding, finding) {
			return true
		}
	}
	return false
}

// runExplain runs bin/kubectl-portico explain with the suite's kubeconfig
// (the cluster administrator's view). Where sidecars programmed by istiod
// enforce the backends' policies (sidecarsEnforce), explain fetches the key
// sets the RequestAuthentications name, trusting the suite's token issuer's
// CA, so it checks signatures as istiod's jwt_authn does; elsewhere JWKS
// fetching is off.
func runExplain(ctx context.Context, args ...string) (explainedAnswer, string) {
	enforced := sidecarsEnforce()
	args = append([]string{"explain", "--kubeconfig", kubeconfig, "--fetch-jwks=" + strconv.FormatBool(enforced), "-o", "json"}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "kubectl-portico"), args...)
	if enforced && suiteIssuer != nil {
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+suiteIssuer.trust)
	}
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl portico %s: %s", strings.Join(args, " "), out)
	var e explainedAnswer
	Expect(json.Unmarshal(out, &e)).To(Succeed(), string(out))
	return e, string(out)
}

// refusedConnection is the status of a request whose connection or TLS
// handshake failed.
const refusedConnection = -1

// agreesWith says why explain's answer e is not what a request got
// (status, or refusedConnection), "" when it is. With backends false, the
// backends' half is not compared (no Istio sidecar judged the request):
// an answer of a backend needs only a route. A 429 is never predicted (a
// bucket's state is not configuration): explain must name a RateLimit
// that counts the request. An authorizer's verdict agrees with whatever
// the authorizer or, once it let the request on, the backend answered.
func agreesWith(e explainedAnswer, status int, backends bool) string {
	answered := status >= 200 && status < 400
	switch {
	case status == http.StatusTooManyRequests:
		if !e.says("ratelimit", "counts it in") {
			return "the request got 429 and explain names no RateLimit counting it"
		}
		return ""
	case status == refusedConnection && e.Outcome == "refused",
		answered && e.Outcome == "routed",
		e.Outcome == strconv.Itoa(status),
		e.Outcome == "authorizer" && (answered || status == http.StatusUnauthorized || status == http.StatusForbidden),
		!backends && answered && !slices.Contains([]string{"404", "refused", "500"}, e.Outcome):
		return ""
	}
	return fmt.Sprintf("the request got %d, explain says %s", status, e.Outcome)
}

// compareExplained explains a request (explain's arguments) and expects
// its verdict to agree with what the request got; it counts the
// comparison by verdict and reports it to e2e/_artifacts/explain-report.txt.
func compareExplained(ctx context.Context, g Gomega, story string, status int, backends bool, args ...string) {
	e, out := runExplain(ctx, args...)
	g.Expect(agreesWith(e, status, backends)).To(BeEmpty(), "%s: kubectl portico explain %s:\n%s", story, strings.Join(args, " "), out)
	countExplained(story, e.Outcome, status, args)
}

// countExplained counts one comparison by verdict and prints the tally.
func countExplained(story, verdict string, status int, args []string) {
	explainedRequests.Lock()
	defer explainedRequests.Unlock()
	explainedRequests.byVerdict[verdict]++
	reportTo("explain-report.txt", "%s: %s -> %d; explain: %s", story, strings.Join(args, " "), status, verdict)
	tally := fmt.Sprintf("kubectl portico explain: %d requests explained and compared, by verdict %v (backends compared: %t)",
		sum(explainedRequests.byVerdict), explainedRequests.byVerdict, sidecarsEnforce())
	GinkgoWriter.Println(tally)
	Expect(os.WriteFile(filepath.Join(artifacts, "explain-tally.txt"), []byte(tally+"\n"), 0o644)).To(Succeed())
}

// expectExplained compares explain's verdict with the answer of one
// e2e-agent get request (its arguments), when it went through the stand-in
// (its address, or --connect to it); caConfigMap is the client pod's
// ConfigMap, whose client.crt a request that presents --cert sends. The
// request is explained at each Gateway the stand-in serves, and the
// verdict of the one that takes it compared.
func expectExplained(ctx context.Context, caConfigMap string, args []string) {
	req, ok := parseGet(args)
	if !ok || req.addr != standInIP(ctx) {
		return
	}
	want, ok := explainVerdict(req.status)
	if !ok && req.status != refusedConnection {
		return
	}
	common := []string{"--host", req.host, "--path", req.url.Path, "--method", req.method, "--query", req.url.RawQuery, "--port", strconv.Itoa(req.port)}
	if req.tls {
		common = append(common, "--https")
	}
	if req.cert {
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: caConfigMap}, cm)).To(Succeed())
		file := filepath.Join(artifacts, "explain-client-"+caConfigMap+".crt")
		Expect(os.WriteFile(file, []byte(cm.Data["client.crt"]), 0o600)).To(Succeed())
		common = append(common, "--client-cert", file)
	}
	for name, value := range req.headers {
		common = append(common, "-H", name+": "+value)
		// explain takes the JWT a request presents as --token.
		if token, ok := strings.CutPrefix(value, "Bearer "); ok && strings.EqualFold(name, "Authorization") {
			common = append(common, "--token", token)
		}
	}
	var best explainedAnswer
	var bestArgs, outputs []string
	for _, gw := range standInGateways() {
		args := append([]string{"--gateway", gw}, common...)
		e, out := runExplain(ctx, args...)
		outputs = append(outputs, out)
		if bestArgs == nil || takes(e) > takes(best) {
			best, bestArgs = e, args
		}
	}
	Expect(agreesWith(best, req.status, sidecarsEnforce())).To(BeEmpty(), "kubectl portico explain of %v (want %s):\n%s", args, want, strings.Join(outputs, "\n"))
	countExplained("through the stand-in", best.Outcome, req.status, bestArgs)
}

// compareAuthorized explains a request of the login or API-key story to
// the tenant's host through the shared stand-in (Gateway istio-system/
// public, port 80), whose backend's sidecar stand-in asks the authorizer.
func compareAuthorized(ctx context.Context, story, target string, headers map[string]string, status int) {
	u, err := url.Parse(target)
	Expect(err).NotTo(HaveOccurred())
	if u.Hostname() != loginHost && !strings.HasSuffix(u.Hostname(), ".keys.example.com") {
		return // the OIDC provider, reached directly
	}
	args := []string{"--gateway", gatewayNamespace + "/public", "--host", u.Hostname(), "--path", u.Path, "--query", u.RawQuery}
	for name, value := range headers {
		args = append(args, "-H", name+": "+value)
	}
	compareExplained(ctx, Default, story, status, true, args...)
}

// compareRateLimited explains a request of the global rate-limit story at
// its Gateway (port 80) once per round and expects every status the round
// got to agree: a 429 with a RateLimit that counts the request, a 200 with
// a route. Other statuses (a rate-limit service down) are not compared.
func compareRateLimited(ctx context.Context, gateway, host string, headers map[string]string, round tally) {
	var statuses []int
	for _, codes := range round {
		for code := range codes {
			if !slices.Contains(statuses, code) {
				statuses = append(statuses, code)
			}
		}
	}
	args := []string{"--gateway", gateway, "--host", host, "--path", "/"}
	for name, value := range headers {
		args = append(args, "-H", name+": "+value)
	}
	e, out := runExplain(ctx, args...)
	for _, status := range statuses {
		if _, ok := explainVerdict(status); !ok && status != http.StatusTooManyRequests {
			continue
		}
		Expect(agreesWith(e, status, false)).To(BeEmpty(), "global rate limits: kubectl portico explain %s:\n%s", strings.Join(args, " "), out)
		countExplained("global rate limits", e.Outcome, status, args)
	}
}

// expectExplainedByStatus explains a request in HTTPRoute mode to host on
// the istiod-served Gateway's port, where no data plane runs: the verdict
// must be what istiod's route status says. An accepted route is taken
// (explain says the route status is istiod's acceptance); a route istiod
// did not accept is a 404 whose steps say it is not served.
func expectExplainedByStatus(ctx context.Context, host string, port int, accepted bool) {
	args := []string{"--parent", istiodNamespace + "/" + istioGatewayName, "--port", strconv.Itoa(port), "--host", host, "--path", "/health"}
	e, out := runExplain(ctx, args...)
	status := http.StatusOK
	if accepted {
		Expect(e.says("status", "accepted: Accepted")).To(BeTrue(), "istiod's acceptance: %s", out)
		Expect(e.says("status", istioControllerName)).To(BeTrue(), out)
		Expect(e.Outcome).NotTo(BeElementOf("404", "refused", "500", "unknown"), out)
	} else {
		status = http.StatusNotFound
		Expect(e.Outcome).To(Equal("404"), out)
		Expect(e.says("passed", "not attached to listener "+istioInternalListener)).To(BeTrue(), out)
		Expect(e.says("passed", string(gatewayapiv1.RouteReasonNotAllowedByListeners))).To(BeTrue(), "istiod's reason is said: %s", out)
	}
	countExplained("HTTPRoute mode on istiod (status only)", e.Outcome, status, args)
}

// takes ranks how far a Gateway takes a request: a route, then a
// connection a server refuses (a client certificate it requires), then a
// 404, then no server on the port at all.
func takes(e explainedAnswer) int {
	switch {
	case e.Outcome == "refused" && strings.HasPrefix(e.Reason, "no server"):
		return 0
	case e.Outcome == "404":
		return 1
	case e.Outcome == "refused":
		return 2
	}
	return 3
}

// getRequest is what explain needs of an e2e-agent get request.
type getRequest struct {
	url *url.URL
	// addr and port are where the connection goes (the URL's, or
	// --connect's); tls whether it is HTTPS; cert whether it presents a
	// client certificate.
	addr      string
	port      int
	tls, cert bool
	host      string
	method    string
	headers   map[string]string
	status    int
}

// parseGet reads the arguments of e2e-agent get; false for requests whose
// answer is not a status (errors other than a refused handshake). A loop's
// request is explained once (requestFromPod's --loop, startTrafficFromPod,
// startTraffic): every answer it counts as expected must be the verdict's.
func parseGet(args []string) (getRequest, bool) {
	if len(args) == 0 {
		return getRequest{}, false
	}
	u, err := url.Parse(args[0])
	if err != nil {
		return getRequest{}, false
	}
	r := getRequest{url: u, addr: u.Hostname(), host: u.Hostname(), method: "GET", headers: map[string]string{}, status: 200, tls: u.Scheme == "https"}
	r.port = 80
	if r.tls {
		r.port = 443
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		r.port = p
	}
	for i := 1; i < len(args); i++ {
		flag, value := args[i], ""
		if i+1 < len(args) {
			value = args[i+1]
		}
		switch flag {
		case "--loop":
			// The same request again and again: explained once.
		case "--expect-error":
			if value != "tls" {
				return getRequest{}, false
			}
			r.status, i = refusedConnection, i+1
		case "--cert":
			r.cert, i = true, i+1
		case "--connect":
			host, port, err := net.SplitHostPort(value)
			if err != nil {
				return getRequest{}, false
			}
			r.addr, i = host, i+1
			if r.port, err = strconv.Atoi(port); err != nil {
				return getRequest{}, false
			}
		case "--no-follow":
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
