package tenancy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/test/framework"
	"github.com/portico-dev/portico/test/testenv"
)

// The suite's global rate limiting: a real redis-server (hack/redis.sh) on
// loopback with a password, and Portico's rate-limit service in front of
// it, with a small key bound so a flood reaches it.
const maxKeysPerRule = 50

var (
	rlsAddr        string
	redisConfigDir string
	redisAddr      string
	redisPassword  string
	redisProcess   *framework.Process
)

// startRedis starts redis-server and writes the rate-limit service's
// connection files; called before the controllers start.
func startRedis(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "hack", "redis.sh")).Output()
	if err != nil {
		return fmt.Errorf("hack/redis.sh: %w", err)
	}
	binary := framework.LastLine(string(out))
	if redisAddr, err = testenv.FreeLoopbackAddr(); err != nil {
		return err
	}
	if rlsAddr, err = testenv.FreeLoopbackAddr(); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(redisAddr)
	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	redisPassword = hex.EncodeToString(buf)
	redisProcess, err = framework.StartProcess(binary, []string{"--bind", host, "--port", port, "--requirepass", redisPassword,
		"--save", "", "--appendonly", "no"}, nil, filepath.Join(workDir, "redis.log"))
	if err != nil {
		return err
	}
	redisConfigDir = filepath.Join(workDir, "redis")
	if err := os.MkdirAll(redisConfigDir, 0o700); err != nil {
		return err
	}
	for name, value := range map[string]string{"address": redisAddr, "password": redisPassword} {
		if err := os.WriteFile(filepath.Join(redisConfigDir, name), []byte(value), 0o600); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", redisAddr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server does not listen on %s: %w", redisAddr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stopRedis() {
	if redisProcess != nil {
		redisProcess.Stop()
	}
}

// globalLimit is a gateway-wide RateLimit of one global rule.
func globalLimit(ns, name, gateway string, requests int64, keys ...gatewayv1alpha1.ClientKey) *gatewayv1alpha1.RateLimit {
	l := rateLimit(ns, name, gatewayv1alpha1.TargetGateway, gateway, 1)
	l.Spec.Local = nil
	l.Spec.Global = &gatewayv1alpha1.GlobalRateLimit{Rules: []gatewayv1alpha1.GlobalRule{
		{Name: "all", Requests: requests, Unit: gatewayv1alpha1.UnitDay, ClientKeys: keys},
	}}
	return l
}

// tenantGateway runs a gateway of ns with its pods in ns and a global
// RateLimit on it, waits until it is Enforced and returns the token its
// EnvoyFilter carries (what the tenant can read of its own filter).
func tenantGateway(t *testing.T, as client.Client, ns, name string, limit *gatewayv1alpha1.RateLimit) string {
	labels := map[string]string{"app": name}
	workloadPod(t, ns, name+"-0", labels, "")
	create(t, as, istioGateway(ns, name, labels))
	create(t, as, limit)
	filters := expectLimitReason(t, limit, gatewayv1alpha1.ReasonEnforced).Status.EnvoyFilters
	g := NewWithT(t)
	g.Expect(filters).To(HaveLen(1))
	fns, fname, _ := strings.Cut(filters[0], "/")
	ef := &networkingv1alpha3.EnvoyFilter{}
	g.Expect(admin.Get(context.Background(), client.ObjectKey{Namespace: fns, Name: fname}, ef)).To(Succeed())
	raw, err := json.Marshal(&ef.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	var token string
	for _, part := range strings.Split(string(raw), `"descriptor_key":"`+globallimit.TokenKey+`","descriptor_value":"`)[1:] {
		token, _, _ = strings.Cut(part, `"`)
	}
	g.Expect(token).NotTo(BeEmpty(), "the filter carries its namespace's token")
	g.Expect(string(raw)).To(ContainSubstring(`"domain":"` + globallimit.Domain(ns) + `"`))
	return token
}

// rls is a client of the rate-limit service, as a gateway (or an
// attacker's pod) calls it.
func rls(t *testing.T) rlsv3.RateLimitServiceClient {
	conn, err := grpc.NewClient(rlsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func descriptor(token, limit string, keys ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
		{Key: globallimit.TokenKey, Value: token}, {Key: globallimit.LimitKey, Value: limit},
	}}
	for i := 0; i+1 < len(keys); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: keys[i], Value: keys[i+1]})
	}
	return d
}

// rlsDecide asks the service once; for Eventually while the service learns
// the limits from its feed.
func rlsDecide(ctx context.Context, c rlsv3.RateLimitServiceClient, domain string, d *ratelimitv3.RateLimitDescriptor) (rlsv3.RateLimitResponse_Code, error) {
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
	if err != nil {
		return 0, err
	}
	return resp.GetOverallCode(), nil
}

// admitted counts how many of n calls the service admits.
func admitted(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, d *ratelimitv3.RateLimitDescriptor, n int) int {
	ok := 0
	for range n {
		code, err := rlsDecide(context.Background(), c, domain, d)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		if code == rlsv3.RateLimitResponse_OK {
			ok++
		}
	}
	return ok
}

// Class 17: one tenant's global budgets are its own. team-b reads its own
// filter's token and calls the service directly (its port is open to every
// pod) with team-a's domain: PermissionDenied, with its own token and with
// a guessed one, and nothing is counted: team-a's budget of 3 still admits
// exactly 3. A same-named limit in team-b's own domain counts in team-b's
// budget only.
func TestATenantCannotSpendOrReadAnotherTenantsGlobalBudget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tokenA := tenantGateway(t, alice, teamA, "global-a", globalLimit(teamA, "global", "global-a", 3))
	tokenB := tenantGateway(t, bob, teamB, "global-b", globalLimit(teamB, "global", "global-b", 3))
	g.Expect(tokenA).NotTo(Equal(tokenB))
	c := rls(t)
	limit := globallimit.LimitID("global", "all")

	// The service learns both namespaces' limits from its feed.
	g.Eventually(func() rlsv3.RateLimitResponse_Code {
		code, _ := rlsDecide(ctx, c, globallimit.Domain(teamB), descriptor(tokenB, "global/none"))
		return code
	}, eventually, poll).Should(Equal(rlsv3.RateLimitResponse_OK))

	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	for name, token := range map[string]string{"team-b's own token": tokenB, "a guessed token": hex.EncodeToString(buf)} {
		for range 10 {
			_, err := rlsDecide(ctx, c, globallimit.Domain(teamA), descriptor(token, limit))
			g.Expect(status.Code(err)).To(Equal(codes.PermissionDenied), "%s on team-a's domain", name)
		}
	}
	g.Expect(admitted(t, c, globallimit.Domain(teamB), descriptor(tokenB, limit), 5)).To(Equal(3), "team-b spends its own budget")
	g.Eventually(func() int {
		return admitted(t, c, globallimit.Domain(teamA), descriptor(tokenA, limit), 1)
	}, eventually, poll).Should(Equal(1), "team-a's limit is known to the service")
	g.Expect(admitted(t, c, globallimit.Domain(teamA), descriptor(tokenA, limit), 5)).To(Equal(2), "team-a's budget of 3 is untouched by team-b")
}

// Class 17: team-b floods its per-key rule with 3× the key bound of
// distinct API keys: its keys in Redis stay within the bound (clients
// beyond it share one overflow budget), and team-a's per-key budget still
// admits exactly 2 per key.
func TestAFloodOfClientKeysStaysWithinItsBound(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	key := gatewayv1alpha1.ClientKey{Type: gatewayv1alpha1.ClientKeyHeader, Header: "x-api-key"}
	tokenA := tenantGateway(t, alice, teamA, "keyed-a", globalLimit(teamA, "keyed", "keyed-a", 2, key))
	tokenB := tenantGateway(t, bob, teamB, "keyed-b", globalLimit(teamB, "keyed", "keyed-b", 2, key))
	c := rls(t)
	limit := globallimit.LimitID("keyed", "all")
	g.Eventually(func() int {
		return admitted(t, c, globallimit.Domain(teamB), descriptor(tokenB, limit, "header:x-api-key", "warm-up"), 1)
	}, eventually, poll).Should(Equal(1))

	for i := range 3 * maxKeysPerRule {
		_, err := rlsDecide(ctx, c, globallimit.Domain(teamB), descriptor(tokenB, limit, "header:x-api-key", "flood-"+strconv.Itoa(i)))
		g.Expect(err).NotTo(HaveOccurred())
	}
	r := redis.NewClient(&redis.Options{Addr: redisAddr, Password: redisPassword})
	defer r.Close()
	keys, err := r.Keys(ctx, "portico:{"+teamB+"}:"+limit+":*").Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(keys)).To(BeNumerically("<=", maxKeysPerRule+2), "team-b's keys stay within the bound: %d", len(keys))
	for _, k := range keys {
		ttl, err := r.TTL(ctx, k).Result()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ttl).To(BeNumerically(">", 0), "%s expires", k)
	}
	for _, apiKey := range []string{"a-1", "a-2", "a-3"} {
		g.Expect(admitted(t, c, globallimit.Domain(teamA), descriptor(tokenA, limit, "header:x-api-key", apiKey), 4)).To(Equal(2), "team-a's key %s", apiKey)
	}
}
