package mongotest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ferretdbModule is the module of the embedded server and of the command.
const ferretdbModule = "github.com/FerretDB/FerretDB"

// BuildCommand builds FerretDB's own server program, from the module
// version the embedded server comes from, into dir and returns its path.
// The command serves in a process of its own and can require SCRAM
// authentication, which the embedded server cannot: FerretDB's embedding
// API (package ferretdb) has no setting for it, while the command turns it
// on with its --test-enable-new-auth flag. It needs the go tool and the
// module's download (go.mod names the command as a tool, so `go mod
// download` fetches all it needs).
//
// The command refuses to start without the release version file that
// FerretDB's release build generates and its module download lacks, so
// the module is copied into dir, given that file, and built in place of
// the download (a replace directive in a copy of this module's go.mod).
// It is a plain go build, as a test's build of backfill is: the
// dependencies they share (SQLite's, the largest) come from the build
// cache, and only the copied module's own packages are compiled each time
// (some seconds).
func BuildCommand(ctx context.Context, dir string) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("mongotest: build the FerretDB command: %w", err)
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-json", ferretdbModule).Output()
	if err != nil {
		return fail(fmt.Errorf("go list -m %s: %w%s", ferretdbModule, err, stderrOf(err)))
	}
	var mod struct{ Version, Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return fail(fmt.Errorf("go list -m %s: no module directory (go mod download fetches it): %v", ferretdbModule, err))
	}
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fail(fmt.Errorf("go env GOMOD: %w", err))
	}
	mainMod := strings.TrimSpace(string(gomod))

	src := filepath.Join(dir, "ferretdb-src")
	if err := copyModule(mod.Dir, src); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(src, "build", "version", "version.txt"), []byte(mod.Version+"\n"), 0o644); err != nil {
		return fail(err)
	}
	modfile := filepath.Join(dir, "build.mod")
	b, err := os.ReadFile(mainMod)
	if err != nil {
		return fail(err)
	}
	b = fmt.Appendf(b, "\nreplace %s => %s\n", ferretdbModule, src)
	if err := os.WriteFile(modfile, b, 0o644); err != nil {
		return fail(err)
	}
	sum, err := os.ReadFile(strings.TrimSuffix(mainMod, ".mod") + ".sum")
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(strings.TrimSuffix(modfile, ".mod")+".sum", sum, 0o644); err != nil {
		return fail(err)
	}
	bin := filepath.Join(dir, "ferretdb")
	cmd := exec.CommandContext(ctx, "go", "build", "-modfile", modfile, "-o", bin, ferretdbModule+"/cmd/ferretdb")
	cmd.Dir = filepath.Dir(mainMod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("go build: %w\n%s", err, out))
	}
	return bin, nil
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return "\n" + string(bytes.TrimSpace(ee.Stderr))
	}
	return ""
}

// copyModule copies a module download (read-only files) into dst,
// writable.
func copyModule(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// CommandConfig is how the command built by BuildCommand serves: TLS
// only, with client certificates signed by the CA, and a user it makes
// in the admin database at the first start and requires from then on
// (SCRAM-SHA-256 or SCRAM-SHA-1, authSource=admin).
type CommandConfig struct {
	Addr     string // host:port of the TLS listener
	TLS      ServerTLS
	DataDir  string // the databases (SQLite files) and the server's state
	User     string
	Password string
}

// CommandListening is what the command logs once it accepts
// connections, its user made.
const CommandListening = "Listening on TLS"

// Args are the command's arguments: no plaintext listener, no debug
// listener, no telemetry.
func (c CommandConfig) Args() []string {
	return []string{
		"--handler=sqlite", "--sqlite-url=file:" + c.DataDir + "/", "--state-dir=" + c.DataDir,
		"--listen-addr=", "--listen-tls=" + c.Addr,
		"--listen-tls-cert-file=" + c.TLS.CertFile, "--listen-tls-key-file=" + c.TLS.KeyFile, "--listen-tls-ca-file=" + c.TLS.CAFile,
		"--test-enable-new-auth", "--setup-database=admin", "--setup-username=" + c.User,
		"--debug-addr=", "--telemetry=disable", "--log-level=info",
	}
}

// Env is what the command's environment needs besides: the password,
// which stays out of its command line.
func (c CommandConfig) Env() []string {
	return []string{"FERRETDB_SETUP_PASSWORD=" + c.Password}
}
