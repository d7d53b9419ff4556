package framework

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/testenv"
)

// Hostlet plays the kubelet for controller Deployments on the local target:
// for every Deployment the operator manages it runs the controller binary
// as a host process, with the Deployment's container args and env and a
// kubeconfig that impersonates the pod's ServiceAccount. It restarts the
// process when the pod template changes and stops it when the Deployment is
// deleted or scaled to zero. (kwok plays the pods' status.)
type Hostlet struct {
	// AdminKubeconfig is the cluster-admin kubeconfig the impersonating ones
	// are derived from.
	AdminKubeconfig string
	// BinDir holds <name>-controller binaries.
	BinDir string
	// Namespace holds the managed Deployments.
	Namespace string
	// WorkDir receives kubeconfigs and process logs.
	WorkDir string

	mu    sync.Mutex
	procs map[string]*hostProcess
}

type hostProcess struct {
	*Process
	template  string // hash of the pod template it was started from
	probeAddr string
}

// Start runs the hostlet until ctx ends, then stops every process.
func (h *Hostlet) Start(ctx context.Context, cfg *rest.Config) error {
	h.procs = map[string]*hostProcess{}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&appsv1.Deployment{}: {
			Namespaces: map[string]cache.Config{h.Namespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": operatorv1alpha1.ManagedBy}),
		}}},
	})
	if err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("hostlet").For(&appsv1.Deployment{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			d := &appsv1.Deployment{}
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, d); err != nil {
				if apierrors.IsNotFound(err) {
					h.stop(req.Name)
					return reconcile.Result{}, nil
				}
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, h.sync(d)
		}))
	if err != nil {
		return err
	}
	defer h.stopAll()
	return mgr.Start(ctx)
}

// Running reports the deployments that have a live process.
func (h *Hostlet) Running() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name, p := range h.procs {
		if !p.Exited() {
			out = append(out, name)
		}
	}
	return out
}

// ProbeAddr returns the health address of a deployment's process.
func (h *Hostlet) ProbeAddr(deployment string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p, ok := h.procs[deployment]; ok {
		return p.probeAddr
	}
	return ""
}

func templateHash(d *appsv1.Deployment) string {
	raw, _ := json.Marshal(d.Spec.Template.Spec)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

func (h *Hostlet) sync(d *appsv1.Deployment) error {
	if !d.DeletionTimestamp.IsZero() || (d.Spec.Replicas != nil && *d.Spec.Replicas == 0) {
		h.stop(d.Name)
		return nil
	}
	hash := templateHash(d)
	h.mu.Lock()
	current := h.procs[d.Name]
	h.mu.Unlock()
	if current != nil && current.template == hash && !current.Exited() {
		return nil // else crashed: start it again below
	}
	h.stop(d.Name)
	return h.start(d, hash)
}

func (h *Hostlet) start(d *appsv1.Deployment, hash string) error {
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return fmt.Errorf("deployment %s has no container", d.Name)
	}
	container := d.Spec.Template.Spec.Containers[0]
	binary := filepath.Join(h.BinDir, d.Name)
	if _, err := os.Stat(binary); err != nil {
		return fmt.Errorf("no binary for deployment %s: %w", d.Name, err)
	}
	kubeconfig, err := ImpersonatingKubeconfig(h.AdminKubeconfig, h.WorkDir, h.Namespace, d.Spec.Template.Spec.ServiceAccountName)
	if err != nil {
		return err
	}
	metrics, probe, err := ServingAddrs()
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig=" + kubeconfig}
	for _, a := range container.Args {
		switch {
		case strings.HasPrefix(a, contract.Flag(contract.FlagMetricsAddress, "")):
			a = contract.Flag(contract.FlagMetricsAddress, metrics)
		case strings.HasPrefix(a, contract.Flag(contract.FlagHealthAddress, "")):
			a = contract.Flag(contract.FlagHealthAddress, probe)
		}
		args = append(args, a)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for _, e := range container.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+d.Namespace)
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	logFile, err := os.OpenFile(filepath.Join(h.WorkDir, d.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	fmt.Fprintf(logFile, "--- hostlet: starting %s (template %s) %s\n", d.Name, hash, strings.Join(args, " "))
	proc, err := startLogged(cmd, logFile)
	if err != nil {
		return fmt.Errorf("start %s: %w", d.Name, err)
	}
	h.mu.Lock()
	h.procs[d.Name] = &hostProcess{Process: proc, template: hash, probeAddr: probe}
	h.mu.Unlock()
	return nil
}

func (h *Hostlet) stop(name string) {
	h.mu.Lock()
	p := h.procs[name]
	delete(h.procs, name)
	h.mu.Unlock()
	if p == nil {
		return
	}
	p.Stop()
}

func (h *Hostlet) stopAll() {
	h.mu.Lock()
	names := make([]string, 0, len(h.procs))
	for name := range h.procs {
		names = append(names, name)
	}
	h.mu.Unlock()
	for _, name := range names {
		h.stop(name)
	}
}
