package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLabel bounds a name taken from a frame: what a member calls itself
// is chosen by whoever sends it, and is kept, logged and shown cut to
// this many bytes.
const MaxLabel = 64

// Label is s as a name from a frame may be kept or logged: cut to
// MaxLabel bytes at a rune boundary, with what was cut said
// ("…+N bytes"), and control characters and invalid bytes replaced by
// '?'.
func Label(s string) string {
	cut := 0
	if len(s) > MaxLabel {
		end := MaxLabel
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		cut, s = len(s)-end, s[:end]
	}
	clean := true
	for i, r := range s {
		if r < 0x20 || r == 0x7f || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			clean = false
			break
		}
	}
	if !clean {
		s = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || r == utf8.RuneError {
				return '?'
			}
			return r
		}, strings.ToValidUTF8(s, "?"))
	}
	if cut > 0 {
		s = fmt.Sprintf("%s…+%d bytes", s, cut)
	}
	return s
}

// KeyName is the name of a member whose key the authorized keys do not
// name: "key-" and the first 8 hex digits of the key's SHA-256. It is
// the key's alone: no Hello can choose it.
func KeyName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "key-" + hex.EncodeToString(sum[:4])
}

// Name is who the member holding key is: its name among the authorized
// keys (Admission.Names), else KeyName. A plaintext sender (key "") has
// no name but the one it sends: "".
func (a Admission) Name(key string) string {
	if key == "" {
		return ""
	}
	if n := a.Names[key]; n != "" {
		return Label(n)
	}
	return KeyName(key)
}
