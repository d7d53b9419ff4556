package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadConnection(t *testing.T) {
	cases := map[string]struct {
		files   map[string]string
		want    Connection
		wantErr string
	}{
		"address only": {
			files: map[string]string{FileAddress: " redis:6379\n"},
			want:  Connection{Address: "redis:6379"},
		},
		"everything": {
			files: map[string]string{FileAddress: "redis:6379", FileUsername: "portico\n", FilePassword: "s3cret\n", FileCA: "PEM"},
			want:  Connection{Address: "redis:6379", Username: "portico", Password: "s3cret", CA: []byte("PEM")},
		},
		"no address": {
			files:   map[string]string{FilePassword: "s3cret"},
			wantErr: "read redis address",
		},
		"empty address": {
			files:   map[string]string{FileAddress: "\n"},
			wantErr: "is empty",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			got, err := ReadConnection(dir)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestOptions(t *testing.T) {
	g := NewWithT(t)
	o, err := Connection{Address: "redis.example:6380", Password: "p"}.Options(false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.TLSConfig).To(BeNil())
	g.Expect(o.MaxRetries).To(Equal(-1), "a retried script could count twice")

	o, err = Connection{Address: "redis.example:6380"}.Options(true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.TLSConfig.ServerName).To(Equal("redis.example"))
	g.Expect(o.TLSConfig.RootCAs).To(BeNil(), "the system roots")

	_, err = Connection{Address: "redis.example:6380", CA: []byte("not PEM")}.Options(true)
	g.Expect(err).To(MatchError(ContainSubstring("no PEM certificate")))
}

func TestWatchConnectionFollowsTheDirectory(t *testing.T) {
	g := NewWithT(t)
	first, second := miniredis.RunT(t), miniredis.RunT(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{FileAddress: first.Addr()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := New(10, nil)
	g.Expect(WatchConnection(ctx, logr.Discard(), r, dir, false, 10*time.Millisecond)).To(Succeed())
	g.Expect(r.Ping(ctx)).To(Succeed())
	g.Expect(r.client.Load().Options().Addr).To(Equal(first.Addr()))

	writeFiles(t, dir, map[string]string{FileAddress: second.Addr()})
	g.Eventually(func() string { return r.client.Load().Options().Addr }).Should(Equal(second.Addr()))

	// An unusable directory keeps the current connection.
	g.Expect(os.Remove(filepath.Join(dir, FileAddress))).To(Succeed())
	g.Expect(WatchConnection(ctx, logr.Discard(), r, dir, false, time.Hour)).NotTo(Succeed())
	g.Expect(r.client.Load().Options().Addr).To(Equal(second.Addr()))
}
