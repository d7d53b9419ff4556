package backoff

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// failing answers its first len(errs) calls with errs, then succeeds.
type failing struct {
	errs  []error
	calls int
}

func (f *failing) next() error {
	f.calls++
	if f.calls <= len(f.errs) {
		return f.errs[f.calls-1]
	}
	return nil
}

func (f *failing) lw() toolscache.ListerWatcher {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			if err := f.next(); err != nil {
				return nil, err
			}
			return &metav1.List{}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			if err := f.next(); err != nil {
				return nil, err
			}
			return watch.NewFake(), nil
		},
	}
}

func TestReconnecting(t *testing.T) {
	refused := refusedErr()
	unavailable := apierrors.NewServiceUnavailable("starting")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "apirules"}, "", errors.New("no"))
	for _, tc := range []struct {
		name      string
		errs      []error
		wantCalls int
		wantErr   bool
	}{
		{"reachable", nil, 1, false},
		{"refused, then reachable", []error{refused, refused, refused}, 4, false},
		{"starting (503), then reachable", []error{unavailable, refused}, 3, false},
		{"forbidden reaches the reflector", []error{forbidden}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []string{"list", "watch"} {
				f := &failing{errs: tc.errs}
				lw := toolscache.ToListerWatcherWithContext(Reconnecting(f.lw()))
				var err error
				if op == "list" {
					_, err = lw.ListWithContext(context.Background(), metav1.ListOptions{})
				} else {
					_, err = lw.WatchWithContext(context.Background(), metav1.ListOptions{})
				}
				if (err != nil) != tc.wantErr || f.calls != tc.wantCalls {
					t.Errorf("%s: error %v after %d calls, want error %t after %d", op, err, f.calls, tc.wantErr, tc.wantCalls)
				}
			}
		})
	}
}

func TestReconnectingEndsWithItsContext(t *testing.T) {
	f := &failing{errs: make([]error, 1000)}
	for i := range f.errs {
		f.errs[i] = refusedErr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := toolscache.ToListerWatcherWithContext(Reconnecting(f.lw())).WatchWithContext(ctx, metav1.ListOptions{})
	if err == nil || !Unreachable(err) {
		t.Errorf("error %v, want the last connection refused", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned %s after its context ended", took)
	}
}

// refusedErr is a connection refused as the dialer returns it.
func refusedErr() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}
