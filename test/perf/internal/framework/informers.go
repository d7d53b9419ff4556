package framework

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventType is the kind of an informer notification.
type EventType string

// The informer notifications.
const (
	Added   EventType = "Added"
	Updated EventType = "Updated"
	Deleted EventType = "Deleted"
)

// Event is one informer notification and the time its handler got it.
type Event struct {
	At     time.Time
	Type   EventType
	Kind   string
	Object client.Object
}

// Watch names a kind to watch: Kind is what events carry, Object the
// (empty) object of that kind, typed or metadata only.
type Watch struct {
	Kind   string
	Object client.Object
}

// Informers are the informers of a benchmark: every event goes to its
// handler with the time it arrived, so nothing measured is polled.
type Informers struct {
	cache.Cache
	stop    context.CancelFunc
	stopped chan struct{}
}

// informersFor makes a cache with an informer per watch, each handing its
// events to handle.
func informersFor(ctx context.Context, cfg *rest.Config, opts cache.Options, watches []Watch, handle func(Event)) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	for _, w := range watches {
		inf, err := c.GetInformer(ctx, w.Object, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("informer for %s: %w", w.Kind, err)
		}
		kind := w.Kind
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { publish(handle, kind, Added, obj) },
			UpdateFunc: func(_, obj any) { publish(handle, kind, Updated, obj) },
			DeleteFunc: func(obj any) { publish(handle, kind, Deleted, obj) },
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// StartInformers starts an informer per watch (with managed fields
// stripped unless opts says otherwise) and waits until they have synced.
func StartInformers(ctx context.Context, cfg *rest.Config, opts cache.Options, watches []Watch, handle func(Event), timeout time.Duration) (*Informers, error) {
	if opts.DefaultTransform == nil {
		opts.DefaultTransform = cache.TransformStripManagedFields()
	}
	// A CRD applied moments ago may be Established before the API server's
	// discovery lists its resource: a cache whose REST mapper read the
	// group too early does not know the kind; a new one looks again.
	var c cache.Cache
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		c, err = informersFor(ctx, cfg, opts, watches, handle)
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	cacheCtx, stop := context.WithCancel(context.Background())
	i := &Informers{Cache: c, stop: stop, stopped: make(chan struct{})}
	go func() {
		defer close(i.stopped)
		_ = c.Start(cacheCtx)
	}()
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		i.Stop()
		return nil, errors.New("the informers did not sync within " + timeout.String())
	}
	return i, nil
}

func publish(handle func(Event), kind string, typ EventType, obj any) {
	at := time.Now()
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(client.Object); ok {
		handle(Event{At: at, Type: typ, Kind: kind, Object: o})
	}
}

// Stop stops the informers and waits for them.
func (i *Informers) Stop() {
	i.stop()
	<-i.stopped
}
