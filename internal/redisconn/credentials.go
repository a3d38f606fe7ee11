package redisconn

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Credentials are the Redis AUTH user and password.
type Credentials struct {
	// Username is the ACL user; empty means the default user.
	Username string
	// Password is the user's password.
	Password string
}

// LoadCredentials reads a mounted kubernetes.io/basic-auth Secret directory. A missing
// "username" file means the default user; a missing "password" file is an error.
func LoadCredentials(dir string) (Credentials, error) {
	var c Credentials
	user, err := os.ReadFile(filepath.Join(dir, "username")) //nolint:gosec // the path is the operator's own flag
	switch {
	case err == nil:
		c.Username = strings.TrimRight(string(user), "\r\n")
	case !os.IsNotExist(err):
		return c, fmt.Errorf("read redis username: %w", err)
	}
	pass, err := os.ReadFile(filepath.Join(dir, "password")) //nolint:gosec // the path is the operator's own flag
	if err != nil {
		return c, fmt.Errorf("read redis password: %w", err)
	}
	c.Password = strings.TrimRight(string(pass), "\r\n")
	return c, nil
}

// credentialsFile reads the mounted Secret again for every new connection, so a rotated
// password reaches new connections without a restart: the kubelet replaces a mounted
// Secret's files in place (one atomic switch of the directory's ..data link). Connections
// already authenticated are not touched; Redis keeps them after their password is removed.
// A read that fails (the Secret deleted, a torn mount) keeps the last credentials read.
type credentialsFile struct {
	dir string

	mu   sync.Mutex
	last Credentials
}

// newCredentialsFile reads dir once: the first read must succeed.
func newCredentialsFile(dir string) (*credentialsFile, error) {
	c, err := LoadCredentials(dir)
	if err != nil {
		return nil, err
	}
	return &credentialsFile{dir: dir, last: c}, nil
}

// provide is a go-redis CredentialsProviderContext: called once per new connection.
func (f *credentialsFile) provide(context.Context) (username, password string, err error) {
	c, err := LoadCredentials(f.dir)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.last = c
	}
	return f.last.Username, f.last.Password, nil
}
