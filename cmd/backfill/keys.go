package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"backfill/wire"
)

// cmdKeygen writes CURVE key pairs: NAME.key (the secret, mode 0600) and
// NAME.pub (the public key) for each NAME, and prints the public keys.
func cmdKeygen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keygen", stderr)
	force := fs.Bool("force", false, "overwrite existing key files")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: backfill keygen [--force] NAME...\n\nwrites NAME.key (secret, mode 0600) and NAME.pub (public) for each NAME, e.g. keys/dispatcher keys/crawler-1")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: name the key pairs to write, e.g. keys/dispatcher keys/crawler-1", errUsage)
	}
	if !wire.HasCurve() {
		return wire.ErrNoCurve
	}
	for _, name := range fs.Args() {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, err := wire.NewKeys()
		if err != nil {
			return err
		}
		if err := wire.WriteKeys(name, k, *force); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s%s %s\n", name, wire.PublicExt, k.Public)
	}
	return nil
}

// securityFlags are the CURVE settings of dispatcher and supervisor.
type securityFlags struct {
	key        string // this process's secret key file
	authorized string // dispatcher: supervisors' public keys, a file or a directory of .pub files
	peer       string // supervisor: the dispatcher's public key, a .pub file or the key itself
	insecure   bool
}

func (s *securityFlags) registerDispatcher(fs *flag.FlagSet) {
	fs.StringVar(&s.key, "key", "", "this dispatcher's secret key file (from backfill keygen): supervisors must present a key from --authorized-keys")
	fs.StringVar(&s.authorized, "authorized-keys", "", "with --key: the supervisors' public keys, a file of keys one a line or a directory of .pub files")
	fs.BoolVar(&s.insecure, "insecure", false, "allow plaintext on endpoints that are not loopback (anyone who can reach the port can join or read tasks)")
}

func (s *securityFlags) registerSupervisor(fs *flag.FlagSet) {
	fs.StringVar(&s.key, "key", "", "this supervisor's secret key file (from backfill keygen); its public key must be in the dispatcher's --authorized-keys")
	fs.StringVar(&s.peer, "dispatcher-key", "", "with --key: the dispatcher's public key, a .pub file or the key itself")
	fs.BoolVar(&s.insecure, "insecure", false, "allow plaintext on endpoints that are not loopback (anyone who can reach the port can send tasks or read results)")
}

// dispatcherSecurity loads the dispatcher's key pair and the authorized keys.
func (s *securityFlags) dispatcherSecurity() (keys wire.Keys, authorized []string, err error) {
	if s.peer != "" {
		return keys, nil, fmt.Errorf("%w: --dispatcher-key is a supervisor flag", errUsage)
	}
	if (s.key == "") != (s.authorized == "") {
		return keys, nil, fmt.Errorf("%w: --key and --authorized-keys go together", errUsage)
	}
	if s.key == "" {
		return keys, nil, nil
	}
	if s.insecure {
		return keys, nil, fmt.Errorf("%w: --insecure contradicts --key", errUsage)
	}
	if keys, err = wire.LoadKeys(s.key); err != nil {
		return keys, nil, fmt.Errorf("--key: %w", err)
	}
	if authorized, err = wire.LoadAuthorized(s.authorized); err != nil {
		return keys, nil, fmt.Errorf("--authorized-keys: %w", err)
	}
	return keys, authorized, nil
}

// supervisorSecurity loads the supervisor's key pair and the dispatcher's
// public key.
func (s *securityFlags) supervisorSecurity() (keys wire.Keys, dispatcherKey string, err error) {
	if (s.key == "") != (s.peer == "") {
		return keys, "", fmt.Errorf("%w: --key and --dispatcher-key go together", errUsage)
	}
	if s.key == "" {
		return keys, "", nil
	}
	if s.insecure {
		return keys, "", fmt.Errorf("%w: --insecure contradicts --key", errUsage)
	}
	if keys, err = wire.LoadKeys(s.key); err != nil {
		return keys, "", fmt.Errorf("--key: %w", err)
	}
	dispatcherKey, err = wire.LoadPublicKey(s.peer)
	if errors.Is(err, os.ErrNotExist) && wire.CheckKey(s.peer) == nil {
		return keys, s.peer, nil // the key itself
	}
	if err != nil {
		return keys, "", fmt.Errorf("--dispatcher-key: %w", err)
	}
	return keys, dispatcherKey, nil
}
