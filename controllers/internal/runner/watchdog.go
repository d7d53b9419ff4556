package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/contract"
)

// innerFactory builds the manager that runs a controller's workers.
type innerFactory func(optional []string) (ctrl.Manager, error)

// watchdog starts the workers while every required CRD is usable and stops
// them when one is not. It runs as a leader-election runnable of the outer
// manager, so only the leader has workers.
type watchdog struct {
	log      logr.Logger
	reader   client.Reader // the outer manager's CRD cache
	informer func(ctx context.Context) (cache.Informer, error)
	required []contract.CRD
	optional []contract.CRD
	newInner innerFactory
	// retryAfter is the pause before restarting workers that failed on
	// their own (not because of a CRD); CRD changes act at once.
	retryAfter time.Duration

	wake    chan struct{}
	elected atomic.Bool
	running atomic.Bool // workers started and their caches synced

	mu      sync.Mutex
	current availability
}

func newWatchdog(log logr.Logger, reader client.Reader, informer func(context.Context) (cache.Informer, error),
	required, optional []contract.CRD, factory innerFactory) *watchdog {
	return &watchdog{
		log: log, reader: reader, informer: informer, required: required, optional: optional,
		newInner: factory, retryAfter: 5 * time.Second, wake: make(chan struct{}, 1),
	}
}

// NeedLeaderElection makes the workers run on the leader only.
func (w *watchdog) NeedLeaderElection() bool { return true }

func (w *watchdog) notify() {
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is already pending; it will read the latest state
	}
}

func (w *watchdog) availability(ctx context.Context) availability {
	return evaluate(w.required, w.optional, func(name string) *apiextensionsv1.CustomResourceDefinition {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := w.reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return nil
		}
		return crd
	})
}

// Start runs until ctx ends, starting and stopping the workers as the
// required CRDs come and go.
func (w *watchdog) Start(ctx context.Context) error {
	w.elected.Store(true)
	informer, err := w.informer(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the CRD cache synced
		}
		return fmt.Errorf("watch CRDs: %w", err)
	}
	handle := func(any) { w.notify() }
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(any, any) { w.notify() },
		DeleteFunc: handle,
	})
	if err != nil {
		return fmt.Errorf("watch CRDs: %w", err)
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()

	s := &supervisor{w: w}
	defer s.stop("shutting down")
	w.notify()
	for {
		var innerDone <-chan error // nil, so never ready, while stopped
		if s.workers != nil {
			innerDone = s.workers.done
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-innerDone:
			if ctx.Err() != nil {
				return nil
			}
			s.failed(err)
			continue
		case <-s.retry:
			s.retry = nil
		case <-w.wake:
		}
		s.sync(ctx)
	}
}

// workers is one start of the inner manager.
type workers struct {
	cancel context.CancelFunc
	done   chan error   // receives the inner manager's result
	avail  availability // what the workers were started for
}

// supervisor is the state of one Start: the workers it runs, if any, and
// when a failed start is retried.
type supervisor struct {
	w         *watchdog
	workers   *workers         // nil while the workers are stopped
	retry     <-chan time.Time // fires when a failed start may be retried
	announced *availability    // the last missing CRDs logged
}

// stop stops the workers, if they run, and waits for them to end.
func (s *supervisor) stop(why string) {
	if s.workers == nil {
		return
	}
	s.w.log.Info("Stopping workers", "reason", why)
	s.w.running.Store(false)
	s.workers.cancel()
	if err := <-s.workers.done; err != nil {
		// A stop we asked for, possibly mid-start: not a failure.
		s.w.log.V(1).Info("Workers stopped with an error", "error", err.Error())
	}
	s.workers = nil
}

// failed handles workers that ended on their own: report once, retry later.
func (s *supervisor) failed(err error) {
	s.w.running.Store(false)
	s.workers.cancel()
	s.workers = nil
	s.w.log.Error(err, "Workers stopped unexpectedly; restarting", "after", s.w.retryAfter)
	s.retry = time.After(s.w.retryAfter)
}

// sync brings the workers in line with the CRDs' availability now: stops
// them when it changed, starts them when every required CRD is usable.
func (s *supervisor) sync(ctx context.Context) {
	w := s.w
	now := w.availability(ctx)
	w.mu.Lock()
	w.current = now
	w.mu.Unlock()
	if s.workers != nil {
		if s.workers.avail.equal(now) {
			return
		}
		if !now.ready() {
			s.stop("required CRD not available: " + fmt.Sprint(now.missing))
		} else {
			s.stop("optional CRDs changed")
		}
	}
	if !now.ready() {
		if s.announced == nil || !s.announced.equal(now) {
			w.log.Info("Waiting for required CRDs; workers are stopped and the controller reports not ready", "missing", now.missing)
			s.announced = &now
		}
		return
	}
	if s.retry != nil {
		return // a failed start is retried by the timer
	}
	s.start(ctx, now)
}

// start sets up and starts the workers for the CRDs of now.
func (s *supervisor) start(ctx context.Context, now availability) {
	w := s.w
	inner, err := w.newInner(now.optional)
	if err != nil {
		w.log.Error(err, "Cannot set up workers; retrying", "after", w.retryAfter)
		s.retry = time.After(w.retryAfter)
		return
	}
	innerCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		err := inner.Start(innerCtx)
		if err == nil && innerCtx.Err() == nil {
			err = errors.New("manager returned without error")
		}
		done <- err
	}()
	s.workers, s.announced = &workers{cancel: cancel, done: done, avail: now}, nil
	go func() {
		if inner.GetCache().WaitForCacheSync(innerCtx) {
			w.running.Store(true)
			w.log.Info("All required CRDs are available; workers started", "optional", now.optional)
		}
	}()
}

// readyz fails while a required CRD is missing and, on the leader, until
// the workers' caches have synced.
func (w *watchdog) readyz(req *http.Request) error {
	now := w.availability(req.Context())
	if !now.ready() {
		return fmt.Errorf("required CRDs not available: %v", now.missing)
	}
	if w.elected.Load() && !w.running.Load() {
		return errors.New("workers not running yet")
	}
	return nil
}
