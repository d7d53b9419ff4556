package config

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// RBAC of the rate-limit service: read the feed's ConfigMaps and the key
// Secret, in Portico's namespace only.
//
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=secrets,resourceNames=portico-ratelimit-key,verbs=get;list;watch

// Watch starts the informers of namespace's feed ConfigMaps and key Secret
// that keep f current until ctx ends, and returns a function reporting
// whether both have synced once.
func Watch(ctx context.Context, cs kubernetes.Interface, namespace string, f *Feed) (synced func() bool, err error) {
	configMaps := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labelSelector() }))
	secrets := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", keySecretName()).String()
		}))

	cmInformer := configMaps.Core().V1().ConfigMaps().Informer()
	if err := cmInformer.SetTransform(stripManagedFields); err != nil {
		return nil, fmt.Errorf("watch ConfigMaps: %w", err)
	}
	cmReg, err := cmInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { withConfigMap(o, f.SetConfigMap) },
		UpdateFunc: func(_, o any) { withConfigMap(o, f.SetConfigMap) },
		DeleteFunc: func(o any) { withConfigMap(o, f.DeleteConfigMap) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch ConfigMaps: %w", err)
	}
	secretInformer := secrets.Core().V1().Secrets().Informer()
	secretReg, err := secretInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { withSecret(o, f.SetSecret) },
		UpdateFunc: func(_, o any) { withSecret(o, f.SetSecret) },
		DeleteFunc: func(any) { f.DeleteSecret() },
	})
	if err != nil {
		return nil, fmt.Errorf("watch Secret %s: %w", keySecretName(), err)
	}
	configMaps.Start(ctx.Done())
	secrets.Start(ctx.Done())
	return func() bool { return cmReg.HasSynced() && secretReg.HasSynced() }, nil
}

// WaitSynced waits up to timeout for synced.
func WaitSynced(ctx context.Context, synced func() bool, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return toolscache.WaitForCacheSync(ctx.Done(), synced)
}

func withConfigMap(o any, fn func(*corev1.ConfigMap)) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if cm, ok := o.(*corev1.ConfigMap); ok {
		fn(cm)
	}
}

func withSecret(o any, fn func(*corev1.Secret)) {
	if s, ok := o.(*corev1.Secret); ok {
		fn(s)
	}
}

// stripManagedFields drops what the service never reads from the cache.
func stripManagedFields(o any) (any, error) {
	if m, ok := o.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return o, nil
}
