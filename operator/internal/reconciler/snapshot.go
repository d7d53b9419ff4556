package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/operator/internal/gating"
	"github.com/portico-dev/portico/operator/internal/render"
)

// snapshot is one consistent-enough read of the caches: everything a
// reconcile decides from.
type snapshot struct {
	crds        map[string]gating.CRDState
	deployments map[string]*appsv1.Deployment // by name
	// budgets are the managed PodDisruptionBudgets an APIGateway controls,
	// by name.
	budgets map[string]*policyv1.PodDisruptionBudget
	// policies are the managed NetworkPolicies an APIGateway controls, by
	// name.
	policies map[string]*networkingv1.NetworkPolicy
	// services are the managed Services an APIGateway controls, by name
	// (the rate-limit service's).
	services map[string]*corev1.Service
	// secrets are the Secrets of the operator's namespace the spec names
	// (the Redis Secret), as gating reads them.
	secrets map[string]gating.SecretState
	// globalRateLimits is whether the rate-limit service runs this round.
	globalRateLimits globalRateLimitsRound
	// foreign are the names of managed-labelled budgets and policies no
	// APIGateway controls, by kind ("poddisruptionbudget/<name>"): someone
	// else's, which the operator neither writes nor deletes.
	foreign map[string]bool
	// apiServer is where the controllers reach the API server.
	apiServer   render.APIServer
	replicaSets map[operatorv1alpha1.ControllerName][]appsv1.ReplicaSet
	pods        map[operatorv1alpha1.ControllerName][]corev1.Pod
}

func (r *Reconciler) readSnapshot(ctx context.Context, spec *operatorv1alpha1.APIGatewaySpec) (*snapshot, error) {
	s := &snapshot{
		crds:        map[string]gating.CRDState{},
		deployments: map[string]*appsv1.Deployment{},
		budgets:     map[string]*policyv1.PodDisruptionBudget{},
		secrets:     map[string]gating.SecretState{},
		foreign:     map[string]bool{},
	}
	if global := spec.GlobalRateLimits(); global != nil {
		secret := &corev1.Secret{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: global.Redis.SecretName}, secret)
		switch {
		case err == nil:
			s.secrets[secret.Name] = secretState(secret)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("read Secret %s/%s from cache: %w", r.Namespace, global.Redis.SecretName, err)
		}
	}
	for _, name := range r.Catalog.CRDNames() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read CRD %s from cache: %w", name, err)
		}
		s.crds[name] = contract.StateOf(crd)
	}

	var deployments appsv1.DeploymentList
	if err := r.listManaged(ctx, &deployments, "deployments"); err != nil {
		return nil, err
	}
	for i := range deployments.Items {
		s.deployments[deployments.Items[i].Name] = &deployments.Items[i]
	}

	var budgets policyv1.PodDisruptionBudgetList
	if err := r.listManaged(ctx, &budgets, "poddisruptionbudgets"); err != nil {
		return nil, err
	}
	s.budgets = controlledByName(budgets.Items, disruptionBudgetKind.Name, s.foreign)

	var policies networkingv1.NetworkPolicyList
	if err := r.listManaged(ctx, &policies, "networkpolicies"); err != nil {
		return nil, err
	}
	s.policies = controlledByName(policies.Items, networkPolicyKind.Name, s.foreign)

	var services corev1.ServiceList
	if err := r.listManaged(ctx, &services, "services"); err != nil {
		return nil, err
	}
	s.services = controlledByName(services.Items, serviceKind.Name, s.foreign)

	var endpoints discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &endpoints, client.InNamespace(APIServerNamespace)); err != nil {
		return nil, fmt.Errorf("list the API server's endpointslices from cache: %w", err)
	}
	// The cache holds only the slice named kubernetes; the filter keeps
	// that true for a client that reads the API server directly.
	endpoints.Items = slices.DeleteFunc(endpoints.Items, func(e discoveryv1.EndpointSlice) bool { return e.Name != APIServerService })
	s.apiServer = render.APIServerOf(endpoints.Items, r.APIServerClusterIP)

	var replicaSets appsv1.ReplicaSetList
	if err := r.listManaged(ctx, &replicaSets, "replicasets"); err != nil {
		return nil, err
	}
	s.replicaSets = byController(replicaSets.Items)

	var pods corev1.PodList
	if err := r.listManaged(ctx, &pods, "pods"); err != nil {
		return nil, err
	}
	s.pods = byController(pods.Items)
	return s, nil
}

// secretState is what gating reads of a Secret: its keys and the Redis
// address.
func secretState(secret *corev1.Secret) gating.SecretState {
	st := gating.SecretState{Address: string(secret.Data[contract.RedisAddressKey])}
	for k := range secret.Data {
		st.Keys = append(st.Keys, k)
	}
	for k := range secret.StringData {
		st.Keys = append(st.Keys, k)
	}
	slices.Sort(st.Keys)
	return st
}

// controlledByName maps the objects an APIGateway controls by name, and
// records the others' names in foreign as kind/name.
func controlledByName[T any, PT interface {
	*T
	metav1.Object
}](items []T, kind string, foreign map[string]bool) map[string]PT {
	out := map[string]PT{}
	for i := range items {
		o := PT(&items[i])
		if controlledByAPIGateway(o) {
			out[o.GetName()] = o
		} else {
			foreign[kind+"/"+o.GetName()] = true
		}
	}
	return out
}

// controlledByAPIGateway reports whether an APIGateway is the object's
// controller: the operator writes and deletes only budgets and policies it
// created, never one that merely carries its labels.
func controlledByAPIGateway(o metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.Kind == "APIGateway" && strings.HasPrefix(ref.APIVersion, operatorv1alpha1.GroupVersion.Group+"/")
}

// listManaged lists the managed objects of one kind (what, for the error)
// in the operator's namespace from the cache.
func (r *Reconciler) listManaged(ctx context.Context, list client.ObjectList, what string) error {
	if err := r.Client.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingLabelsSelector{Selector: ManagedSelector}); err != nil {
		return fmt.Errorf("list managed %s from cache: %w", what, err)
	}
	return nil
}

// byController groups objects by the catalog controller their label names.
func byController[T any, PT interface {
	*T
	GetLabels() map[string]string
}](items []T) map[operatorv1alpha1.ControllerName][]T {
	out := map[operatorv1alpha1.ControllerName][]T{}
	for i := range items {
		name := operatorv1alpha1.ControllerName(PT(&items[i]).GetLabels()[operatorv1alpha1.LabelController])
		out[name] = append(out[name], items[i])
	}
	return out
}
