package wire

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadRoster: names come from NAME.pub files, as provisioning writes
// them, or from the line; a list without names leaves keys unnamed; a
// name given twice, two names for one key, or a bad name is an error
// naming file:line.
func TestLoadRoster(t *testing.T) {
	const (
		k1 = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
		k2 = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
		k3 = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
	)
	write := func(t *testing.T, dir, name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dir := t.TempDir()
	write(t, dir, "crawler-1.pub", "# backfill CURVE public key of supervisor crawler-1\n"+k1+"\n")
	write(t, dir, "crawler-2.pub", k2+"\n"+k3+" spare\n")
	got, err := LoadRoster(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{k1: "crawler-1", k2: "crawler-2", k3: "spare"}
	if n := Names(got); len(n) != 3 || n[k1] != want[k1] || n[k2] != want[k2] || n[k3] != want[k3] {
		t.Errorf("names %v, want %v", n, want)
	}

	list := write(t, t.TempDir(), "authorized", k1+"\n"+k2+"\tsecond\n")
	if got, err := LoadRoster(list); err != nil || len(got) != 2 || Names(got)[k1] != "" || Names(got)[k2] != "second" {
		t.Errorf("LoadRoster(list) = %+v, %v: want k1 unnamed, k2 second", got, err)
	}
	for _, c := range []struct{ name, data, want string }{
		{"name twice", k1 + " a\n" + k2 + " a\n", ":2: name \"a\" given to another key"},
		{"two names", k1 + " a\n" + k1 + " b\n", ":2: key named \"b\", and \"a\""},
		{"bad name", k1 + " ../x\n", ":1: member name"},
		{"three words", k1 + " a b\n", ":1: 3 words"},
		{"bad key", "nope a\n", ":1:"},
	} {
		p := write(t, t.TempDir(), "authorized", c.data)
		if _, err := LoadRoster(p); err == nil || !strings.Contains(err.Error(), p+c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, p+c.want)
		}
	}
}

func FuzzParseRoster(f *testing.F) {
	f.Add([]byte("# comment\nrq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7 crawler-1\n"))
	f.Add([]byte("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\t\tx\n"))
	f.Add([]byte("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7 a b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := parseRoster("fuzz", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "wire: fuzz:") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		for _, k := range keys {
			if CheckKey(k.Key) != nil {
				t.Fatalf("parsed an invalid key %q", k.Key)
			}
			if k.Name != "" && !memberName.MatchString(k.Name) {
				t.Fatalf("parsed a bad name %q", k.Name)
			}
		}
	})
}
