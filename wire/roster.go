package wire

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// AuthorizedKey is one member's public key among the authorized keys,
// and the name it goes by ("" when the list gives none).
type AuthorizedKey struct {
	Key  string
	Name string
}

// memberName is what a name in the authorized keys may be: a host name
// of the inventory, as provisioning writes NAME.pub.
var memberName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// LoadRoster reads the authorized keys in path with their names: a file
// of keys, one a line (blank lines and '#' comments skipped), or a
// directory whose *.pub files are read so. A line may name its key after
// it ("KEY NAME"); a key of a NAME.pub file in a directory, or a .pub
// file given itself, that its line does not name is named NAME (NAME-2,
// NAME-3, … for the file's further keys). Keys come back sorted, each
// once. A malformed line, a bad name, a name given to two keys or two
// names to one key is an error naming file:line.
func LoadRoster(path string) ([]AuthorizedKey, error) {
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
	byKey := make(map[string]AuthorizedKey)
	byName := make(map[string]string) // name → where it was given
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("wire: authorized keys: %w", err)
		}
		keys, err := parseRoster(f, data)
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("wire: authorized keys: %s holds no key", f)
		}
		base, isPub := strings.CutSuffix(filepath.Base(f), PublicExt)
		for i, k := range keys {
			where := fmt.Sprintf("%s:%d", f, k.line)
			if k.Name == "" && isPub && memberName.MatchString(base) {
				k.Name = base
				if i > 0 {
					k.Name = fmt.Sprintf("%s-%d", base, i+1)
				}
			}
			if had, ok := byKey[k.Key]; ok {
				if k.Name != "" && had.Name != "" && k.Name != had.Name {
					return nil, fmt.Errorf("wire: %s: key named %q, and %q by %s", where, k.Name, had.Name, byName[had.Name])
				}
				if had.Name != "" {
					continue
				}
			}
			if k.Name != "" {
				if at, ok := byName[k.Name]; ok {
					return nil, fmt.Errorf("wire: %s: name %q given to another key by %s", where, k.Name, at)
				}
				byName[k.Name] = where
			}
			byKey[k.Key] = k.AuthorizedKey
		}
	}
	out := make([]AuthorizedKey, 0, len(byKey))
	for _, k := range byKey {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// rosterLine is a key of a roster and its line.
type rosterLine struct {
	AuthorizedKey
	line int
}

// parseRoster reads authorized keys from data: "KEY" or "KEY NAME" a
// line, blank lines and lines starting with '#' skipped, surrounding
// space trimmed. file is used in errors, which read "file:line: reason".
func parseRoster(file string, data []byte) ([]rosterLine, error) {
	var out []rosterLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 256), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > 2 {
			return nil, fmt.Errorf("wire: %s:%d: %d words, want a key and at most a name", file, n, len(fields))
		}
		key, name := fields[0], ""
		if len(fields) == 2 {
			name = fields[1]
		}
		if err := CheckKey(key); err != nil {
			return nil, fmt.Errorf("wire: %s:%d: %w", file, n, err)
		}
		if name != "" && !memberName.MatchString(name) {
			return nil, fmt.Errorf("wire: %s:%d: member name %q: want 1 to 64 letters, digits, '.', '_' or '-'", file, n, name)
		}
		out = append(out, rosterLine{AuthorizedKey{Key: key, Name: name}, n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("wire: %s: %w", file, err)
	}
	return out, nil
}

// Names are the roster's names by key (the keys it names).
func Names(roster []AuthorizedKey) map[string]string {
	out := make(map[string]string, len(roster))
	for _, k := range roster {
		if k.Name != "" {
			out[k.Key] = k.Name
		}
	}
	return out
}
