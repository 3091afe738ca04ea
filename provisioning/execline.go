package provisioning

import (
	"fmt"
	"strings"
)

// ExecLine joins a command line for a systemd unit's ExecStart: a word
// made only of safe characters stays bare, others are double-quoted with
// '"' and '\' escaped and '$' doubled; '%' (a specifier) is doubled
// everywhere. So no word is a variable reference: a secret does not reach
// a command line that way, where every local user could read it.
func ExecLine(args []string) (string, error) {
	if len(args) == 0 || !strings.HasPrefix(args[0], "/") {
		return "", fmt.Errorf("provisioning: ExecStart needs an absolute program path, got %q", args)
	}
	words := make([]string, len(args))
	for i, a := range args {
		switch {
		case a == "":
			words[i] = `""`
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

func unsafeExecRune(r rune) bool {
	return r <= ' ' || r == '"' || r == '\'' || r == '\\' || r == '$' || r == ';' || r >= 0x7f
}
