package provisioning

import (
	"fmt"
	"strings"
)

// ExecLine joins a command line for a systemd unit's ExecStart: a word
// made only of safe characters stays bare, others are double-quoted with
// '"' and '\' escaped; '%' (a specifier) is doubled everywhere. A word
// that is exactly "${NAME}" stays bare, so systemd replaces it by the
// variable's value as one word.
func ExecLine(args []string) (string, error) {
	if len(args) == 0 || !strings.HasPrefix(args[0], "/") {
		return "", fmt.Errorf("provisioning: ExecStart needs an absolute program path, got %q", args)
	}
	words := make([]string, len(args))
	for i, a := range args {
		switch {
		case a == "":
			words[i] = `""`
		case isEnvRef(a):
			words[i] = a
		case strings.ContainsAny(a, "\n\r"):
			return "", fmt.Errorf("provisioning: ExecStart argument %q holds a line break", a)
		case strings.IndexFunc(a, unsafeExecRune) < 0:
			words[i] = strings.ReplaceAll(a, "%", "%%")
		default:
			r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$")
			words[i] = `"` + r.Replace(a) + `"`
		}
	}
	return strings.Join(words, " "), nil
}

// isEnvRef reports whether w is "${NAME}".
func isEnvRef(w string) bool {
	if !strings.HasPrefix(w, "${") || !strings.HasSuffix(w, "}") || len(w) < 4 {
		return false
	}
	for _, r := range w[2 : len(w)-1] {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func unsafeExecRune(r rune) bool {
	return r <= ' ' || r == '"' || r == '\'' || r == '\\' || r == '$' || r == ';' || r >= 0x7f
}
