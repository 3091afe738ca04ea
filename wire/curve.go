package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	zmq "github.com/pebbe/zmq4"
)

// ErrPlaintext is wrapped by ListenSecure and DialSecure when a Security
// without keys would carry frames in plaintext over an endpoint that is not
// loopback, and Insecure does not allow it.
var ErrPlaintext = errors.New("plaintext refused on an endpoint that is not loopback (secure the cluster with keys, or give --insecure on a network you trust)")

// ErrNoCurve is returned when keys are asked for but the linked libzmq was
// built without CURVE support.
var ErrNoCurve = errors.New("wire: libzmq was built without CURVE security")

// Keys is a CURVE key pair, each key 40 characters of Z85 text. The zero
// value means "no keys": plaintext.
type Keys struct {
	Public string
	Secret string
}

// IsZero reports whether k holds no key.
func (k Keys) IsZero() bool { return k.Public == "" && k.Secret == "" }

// HasCurve reports whether the linked libzmq supports CURVE.
func HasCurve() bool { return zmq.HasCurve() }

// NewKeys makes a fresh key pair.
func NewKeys() (Keys, error) {
	if !HasCurve() {
		return Keys{}, ErrNoCurve
	}
	pub, sec, err := zmq.NewCurveKeypair()
	if err != nil {
		return Keys{}, fmt.Errorf("wire: new key pair: %w", err)
	}
	return Keys{Public: pub, Secret: sec}, nil
}

// Security says how a socket authenticates its peers. The zero value is
// plaintext, allowed only on loopback endpoints (see Loopback) unless
// Insecure is set.
//
// With Keys, frames are encrypted and both ends authenticated (CURVE): a
// listening socket is a CURVE server that accepts only clients whose public
// key is in Authorized; a dialling socket is a CURVE client that talks only
// to the server holding ServerKey's secret.
type Security struct {
	Keys       Keys     // this end's key pair; zero: plaintext
	ServerKey  string   // DialSecure: the public key of the server dialled
	Authorized []string // ListenSecure: the client public keys accepted
	Insecure   bool     // allow plaintext on endpoints that are not loopback
}

// check validates s for a socket on endpoint; listen says which role.
func (s Security) check(endpoint string, listen bool) error {
	if s.Keys.IsZero() {
		if s.ServerKey != "" || len(s.Authorized) > 0 {
			return errors.New("peer keys given without this end's key pair")
		}
		if !s.Insecure && !Loopback(endpoint) {
			return ErrPlaintext
		}
		return nil
	}
	if !HasCurve() {
		return ErrNoCurve
	}
	if err := CheckKey(s.Keys.Public); err != nil {
		return fmt.Errorf("own public key: %w", err)
	}
	if err := CheckKey(s.Keys.Secret); err != nil {
		return fmt.Errorf("own secret key: %w", err)
	}
	if pub, err := zmq.AuthCurvePublic(s.Keys.Secret); err != nil || pub != s.Keys.Public {
		return errors.New("own public key does not belong to the secret key")
	}
	if listen {
		if len(s.Authorized) == 0 {
			return errors.New("no authorized client keys: nobody could connect")
		}
		for i, k := range s.Authorized {
			if err := CheckKey(k); err != nil {
				return fmt.Errorf("authorized key %d: %w", i+1, err)
			}
		}
		return nil
	}
	if err := CheckKey(s.ServerKey); err != nil {
		return fmt.Errorf("server key: %w", err)
	}
	return nil
}

// InProcess reports whether endpoint is an inproc one: an address
// within one process (`backfill run`), which means nothing outside it.
func InProcess(endpoint string) bool { return strings.HasPrefix(endpoint, "inproc://") }

// Loopback reports whether endpoint stays on this machine: ipc and inproc
// endpoints, and tcp endpoints on a loopback address or "localhost". A
// wildcard ("*", 0.0.0.0, ::) or an interface name is not loopback.
func Loopback(endpoint string) bool {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if !ok {
		return false
	}
	switch scheme {
	case "ipc", "inproc":
		return true
	case "tcp":
	default:
		return false
	}
	// tcp://[source;]host:port
	if i := strings.LastIndexByte(rest, ';'); i >= 0 {
		rest = rest[i+1:]
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return false
	}
	host := strings.TrimSuffix(strings.TrimPrefix(rest[:i], "["), "]")
	if host == "localhost" {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}

// z85Alphabet is ZeroMQ's Z85 encoding alphabet (RFC 32).
const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// CheckKey reports whether k is a CURVE key in Z85 text: 40 characters of
// the Z85 alphabet whose 5-character groups each decode to 32 bits.
func CheckKey(k string) error {
	if len(k) != 40 {
		return fmt.Errorf("key is %d characters, want 40 (Z85 text from backfill keygen)", len(k))
	}
	for g := 0; g < 40; g += 5 {
		var v uint64
		for _, c := range []byte(k[g : g+5]) {
			d := strings.IndexByte(z85Alphabet, c)
			if d < 0 {
				return fmt.Errorf("key has %q, not a Z85 character", c)
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF {
			return fmt.Errorf("key characters %d-%d are not valid Z85", g+1, g+5)
		}
	}
	return nil
}

// Key files, as written by WriteKeys: NAME.key holds the secret key,
// NAME.pub the public one, each on its own line after comment lines
// starting with '#'.
const (
	SecretExt = ".key"
	PublicExt = ".pub"
)

// WriteKeys writes k to name+".key" (mode 0600: the secret) and
// name+".pub" (mode 0644). Existing files are refused unless force.
func WriteKeys(name string, k Keys, force bool) error {
	files := []struct {
		path, body string
		mode       os.FileMode
	}{
		{name + SecretExt, "# backfill CURVE secret key: keep it on this machine only\n" + k.Secret + "\n", 0o600},
		{name + PublicExt, "# backfill CURVE public key: give it to the peers that must trust this one\n" + k.Public + "\n", 0o644},
	}
	if !force {
		for _, f := range files {
			if _, err := os.Lstat(f.path); err == nil {
				return fmt.Errorf("wire: write keys: %s exists (force to overwrite)", f.path)
			}
		}
	}
	for _, f := range files {
		// Remove first: an existing file keeps its mode through a
		// truncating open, and a secret must never be world-readable.
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("wire: write keys: %w", err)
		}
		fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return fmt.Errorf("wire: write keys: %w", err)
		}
		_, err = fh.WriteString(f.body)
		if err2 := fh.Close(); err == nil {
			err = err2
		}
		if err != nil {
			return fmt.Errorf("wire: write keys %s: %w", f.path, err)
		}
	}
	return nil
}

// LoadKeys reads a secret key file written by WriteKeys and derives its
// public key. A secret readable by group or others is refused.
func LoadKeys(path string) (Keys, error) {
	if !HasCurve() {
		return Keys{}, ErrNoCurve
	}
	info, err := os.Stat(path)
	if err != nil {
		return Keys{}, fmt.Errorf("wire: key file: %w", err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0 {
		return Keys{}, fmt.Errorf("wire: key file %s: readable by others (mode %04o); chmod 600 it", path, info.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Keys{}, fmt.Errorf("wire: key file: %w", err)
	}
	keys, err := ParseKeys(path, data)
	if err != nil {
		return Keys{}, err
	}
	if len(keys) != 1 {
		return Keys{}, fmt.Errorf("wire: key file %s: %d keys, want exactly one secret key", path, len(keys))
	}
	pub, err := zmq.AuthCurvePublic(keys[0])
	if err != nil {
		return Keys{}, fmt.Errorf("wire: key file %s: derive public key: %w", path, err)
	}
	return Keys{Public: pub, Secret: keys[0]}, nil
}

// LoadPublicKey reads a public key file (NAME.pub) holding one key.
func LoadPublicKey(path string) (string, error) {
	keys, err := LoadAuthorized(path)
	if err != nil {
		return "", err
	}
	if len(keys) != 1 {
		return "", fmt.Errorf("wire: key file %s: %d keys, want exactly one", path, len(keys))
	}
	return keys[0], nil
}

// LoadAuthorized reads the public keys in path: a file of keys, one a line
// (blank lines and '#' comments skipped), or a directory whose *.pub files
// are read so. Keys are returned sorted and without duplicates. A malformed
// line is an error naming file:line.
func LoadAuthorized(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("wire: authorized keys: %w", err)
	}
	files := []string{path}
	if info.IsDir() {
		files, err = filepath.Glob(filepath.Join(path, "*"+PublicExt))
		if err != nil {
			return nil, fmt.Errorf("wire: authorized keys: %w", err)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("wire: authorized keys: no *%s file in %s", PublicExt, path)
		}
	}
	seen := make(map[string]bool)
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("wire: authorized keys: %w", err)
		}
		keys, err := ParseKeys(f, data)
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("wire: authorized keys: %s holds no key", f)
		}
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// ParseKeys reads keys from data, one a line; blank lines and lines
// starting with '#' are skipped, surrounding space trimmed. name is used
// in errors, which read "name:line: reason".
func ParseKeys(name string, data []byte) ([]string, error) {
	var keys []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 256), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := CheckKey(line); err != nil {
			return nil, fmt.Errorf("wire: %s:%d: %w", name, n, err)
		}
		keys = append(keys, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("wire: %s: %w", name, err)
	}
	return keys, nil
}

// EnsureKeys returns the key pair kept at name+".key" and name+".pub",
// writing a new one first when there is none, so that whoever keeps keys
// between runs (provisioning renders a cluster again and again) makes
// each pair once. created says whether the pair is new.
func EnsureKeys(name string) (k Keys, created bool, err error) {
	k, err = LoadKeys(name + SecretExt)
	if err == nil {
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Keys{}, false, err
	}
	if k, err = NewKeys(); err != nil {
		return Keys{}, false, err
	}
	if err := WriteKeys(name, k, false); err != nil {
		return Keys{}, false, err
	}
	return k, true, nil
}
