// Command e2e-agent is the e2e suite's in-cluster helper on the node target,
// one small static binary (image e2e-agent, built by hack/images) with three
// roles:
//
//	e2e-agent backend --name NAME     an HTTP server answering every request
//	                                  with "NAME METHOD PATH" (a Service's pods)
//	e2e-agent gateway --gateway NS/N  a minimal stand-in for an Istio ingress
//	                                  gateway: it reads the VirtualServices
//	                                  bound to Gateway NS/N through the API
//	                                  (with its pod's ServiceAccount token) and
//	                                  proxies each request to the destination
//	                                  of the first route whose host, path and
//	                                  method match, or answers 404
//	e2e-agent get URL                 a client that retries a request until
//	                                  it gets the expected status and body
//
// The gateway implements only the routing part of a VirtualService (hosts,
// exact/prefix/regex URI, method regex, destination host and port); it is
// not Envoy and enforces no AuthorizationPolicy or RequestAuthentication.
// That is enough to prove that the VirtualService Portico's apirule
// controller writes routes real traffic to the APIRule's Service.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: e2e-agent backend|gateway|get ...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "backend":
		err = backend(ctx, os.Args[2:])
	case "gateway":
		err = gateway(ctx, os.Args[2:])
	case "get":
		err = get(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown role %q", os.Args[1])
	}
	if err != nil {
		log.Printf("e2e-agent %s: %v", os.Args[1], err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, addr string, h http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("listening on %s", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func backend(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	name := fs.String("name", "backend", "name in every answer")
	addr := fs.String("listen", ":8080", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return serve(ctx, *addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", *name)
		fmt.Fprintf(w, "%s %s %s\n", *name, r.Method, r.URL.Path)
	}))
}

// router resolves requests with the VirtualServices of one Gateway, read
// from the API on every request: a test gateway needs no cache.
type router struct {
	client  client.Client
	gateway string
}

func gateway(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	gw := fs.String("gateway", "istio-system/public", "namespace/name of the Istio Gateway whose VirtualServices route traffic")
	addr := fs.String("listen", ":8080", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := networkingv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	return serve(ctx, *addr, &router{client: c, gateway: *gw})
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target, route, err := rt.resolve(r)
	if err != nil {
		log.Printf("%s %s%s: %v", r.Method, r.Host, r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if target == nil {
		log.Printf("%s %s%s: no route", r.Method, r.Host, r.URL.Path)
		http.Error(w, "no route", http.StatusNotFound)
		return
	}
	log.Printf("%s %s%s: route %s -> %s", r.Method, r.Host, r.URL.Path, route, target)
	w.Header().Set("X-Route", route)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ServeHTTP(w, r)
}

// resolve returns the destination of the first matching route; nil when
// none matches.
func (rt *router) resolve(r *http.Request) (*url.URL, string, error) {
	var list networkingv1.VirtualServiceList
	if err := rt.client.List(r.Context(), &list); err != nil {
		return nil, "", fmt.Errorf("list VirtualServices: %w", err)
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	for _, vs := range list.Items {
		if !slices.ContainsFunc(vs.Spec.Gateways, func(g string) bool { return qualify(g, vs.Namespace) == rt.gateway }) ||
			!slices.Contains(vs.Spec.Hosts, host) {
			continue
		}
		for _, route := range vs.Spec.Http {
			if !slices.ContainsFunc(route.Match, func(m *networkingapi.HTTPMatchRequest) bool { return matches(m, r) }) || len(route.Route) == 0 {
				continue
			}
			dest := route.Route[0].Destination
			addr, err := rt.serviceAddress(r.Context(), dest.Host, vs.Namespace)
			if err != nil {
				return nil, "", err
			}
			port := uint32(80)
			if dest.Port != nil {
				port = dest.Port.Number
			}
			return &url.URL{Scheme: "http", Host: net.JoinHostPort(addr, strconv.Itoa(int(port)))}, route.Name, nil
		}
	}
	return nil, "", nil
}

func qualify(gateway, namespace string) string {
	if strings.Contains(gateway, "/") {
		return gateway
	}
	return namespace + "/" + gateway
}

func matches(m *networkingapi.HTTPMatchRequest, r *http.Request) bool {
	return stringMatches(m.Uri, r.URL.Path) && stringMatches(m.Method, r.Method)
}

func stringMatches(m *networkingapi.StringMatch, s string) bool {
	if m == nil {
		return true
	}
	switch t := m.MatchType.(type) {
	case *networkingapi.StringMatch_Exact:
		return s == t.Exact
	case *networkingapi.StringMatch_Prefix:
		return strings.HasPrefix(s, t.Prefix)
	case *networkingapi.StringMatch_Regex:
		re, err := regexp.Compile("^(?:" + t.Regex + ")$")
		return err == nil && re.MatchString(s)
	}
	return false
}

// serviceAddress resolves <svc>.<ns>.svc.<domain> (or a short name) to the
// Service's cluster IP through the API: the node has no cluster DNS.
func (rt *router) serviceAddress(ctx context.Context, host, namespace string) (string, error) {
	parts := strings.Split(host, ".")
	name := parts[0]
	if len(parts) > 1 {
		namespace = parts[1]
	}
	svc := &corev1.Service{}
	if err := rt.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, svc); err != nil {
		return "", fmt.Errorf("destination %s: %w", host, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("destination %s has no cluster IP", host)
	}
	return svc.Spec.ClusterIP, nil
}

func get(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	host := fs.String("host", "", "Host header")
	method := fs.String("method", http.MethodGet, "request method")
	status := fs.Int("expect-status", http.StatusOK, "status to wait for")
	body := fs.String("expect-body", "", "substring of the body to wait for")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to retry")
	// The URL may come before or after the flags.
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return errors.New("get needs one URL")
	}
	target := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errors.New("get needs one URL")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var last string
	for {
		got, text, err := request(ctx, *method, target, *host)
		if err == nil {
			last = fmt.Sprintf("%d %s", got, text)
			if got == *status && strings.Contains(text, *body) {
				fmt.Println(last)
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s (Host %s): want %d %q, last answer: %s", *method, target, *host, *status, *body, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func request(ctx context.Context, method, target, host string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return 0, "", err
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(text)), err
}
