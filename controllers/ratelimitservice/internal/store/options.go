package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
)

// The files of the Redis connection directory (a mounted Secret's keys).
const (
	FileAddress  = "address"
	FileUsername = "username"
	FilePassword = "password"
	FileCA       = "ca.crt"
)

// Connection is what the directory says.
type Connection struct {
	// Address is host:port (required).
	Address string
	// Username and Password authenticate (ACL user, or password only).
	Username, Password string
	// CA, when set, is the PEM root the server's certificate must chain to
	// (with TLS).
	CA []byte
}

// ReadConnection reads dir. Surrounding white space is trimmed from every
// file but ca.crt; a missing optional file is empty.
func ReadConnection(dir string) (Connection, error) {
	read := func(name string, required bool) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) && !required {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read redis %s: %w", name, err)
		}
		return b, nil
	}
	var c Connection
	var errs []error
	for _, f := range []struct {
		name     string
		required bool
		to       *string
	}{{FileAddress, true, &c.Address}, {FileUsername, false, &c.Username}, {FilePassword, false, &c.Password}} {
		b, err := read(f.name, f.required)
		errs = append(errs, err)
		*f.to = strings.TrimSpace(string(b))
	}
	ca, err := read(FileCA, false)
	errs = append(errs, err)
	c.CA = ca
	if err := errors.Join(errs...); err != nil {
		return Connection{}, err
	}
	if c.Address == "" {
		return Connection{}, fmt.Errorf("redis %s in %s is empty", FileAddress, dir)
	}
	return c, nil
}

// Options are the go-redis options of a connection. Decisions are never
// retried (a retried script could count twice) and time out fast, so that
// Envoy applies its failure mode instead of waiting.
func (c Connection) Options(useTLS bool) (*redis.Options, error) {
	o := &redis.Options{
		Addr:         c.Address,
		Username:     c.Username,
		Password:     c.Password,
		MaxRetries:   -1,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		PoolTimeout:  time.Second,
	}
	if useTLS {
		host, _, _ := strings.Cut(c.Address, ":")
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
		if len(c.CA) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(c.CA) {
				return nil, fmt.Errorf("redis %s holds no PEM certificate", FileCA)
			}
			o.TLSConfig.RootCAs = pool
		}
	}
	return o, nil
}

// fingerprint identifies a connection's content.
func (c Connection) fingerprint(useTLS bool) [32]byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%t\x00%s\x00%s\x00%s\x00", useTLS, c.Address, c.Username, c.Password)
	b.Write(c.CA)
	return sha256.Sum256(b.Bytes())
}

// WatchConnection reads dir every interval until ctx ends and gives r a new
// client whenever the connection changes (a mounted Secret changes within
// the kubelet's sync period; no restart needed). A directory that cannot
// be read or used keeps the current client and is logged once per change.
// It reads dir once before returning, so the first client is set (or the
// first error returned) when it returns.
func WatchConnection(ctx context.Context, log logr.Logger, r *Redis, dir string, useTLS bool, interval time.Duration) error {
	var applied, failed [32]byte
	load := func() error {
		conn, err := ReadConnection(dir)
		if err != nil {
			return err
		}
		fp := conn.fingerprint(useTLS)
		if fp == applied {
			return nil
		}
		opts, err := conn.Options(useTLS)
		if err != nil {
			return err
		}
		applied = fp
		if old := r.SetClient(redis.NewClient(opts)); old != nil {
			// Requests in flight on the old client finish first.
			time.AfterFunc(10*time.Second, func() { _ = old.Close() })
			log.Info("redis connection changed", "address", conn.Address)
		}
		return nil
	}
	first := load()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				if c := r.client.Load(); c != nil {
					_ = c.Close()
				}
				return
			case <-t.C:
			}
			if err := load(); err != nil {
				if fp := sha256.Sum256([]byte(err.Error())); fp != failed {
					failed = fp
					log.Error(err, "redis connection directory unusable; keeping the current connection", "dir", dir)
				}
			} else {
				failed = [32]byte{}
			}
		}
	}()
	return first
}
