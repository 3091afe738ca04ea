package survey

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"backfill/fetch"
)

// userBlocklist is a user's opt-out file on top of the default one.
func userBlocklist(t *testing.T, lines string) Blocklist {
	t.Helper()
	bl, err := fetch.ParseBlacklist(strings.NewReader(lines), "optout.txt")
	if err != nil {
		t.Fatal(err)
	}
	b := DefaultBlocklist()
	b.Add(bl, "optout.txt")
	return b
}

// Ten million draws: none in a special-purpose range or on the blocklist,
// none of the first million twice, and the /8s filled in proportion to their drawable
// addresses (chi-square). Without connecting anywhere.
func TestRandomIsUniformAndExcludes(t *testing.T) {
	draws := 10_000_000
	if testing.Short() {
		draws = 1_000_000
	}
	bl := userBlocklist(t, "6.0.0.0/8\n44.128.0.0/9\n")
	r := NewRandom(7, bl)
	excluded := makeV4Set(append(append([]span(nil), specialSet...), bl.v4...))

	var per8 [256]int
	first := make([]uint32, 0, min(draws, 1_000_000)) // checked for repeats
	for i := range draws {
		a, ok := r.Next()
		if !ok {
			t.Fatalf("space exhausted after %d draws", i)
		}
		x := v4Of(a)
		if excluded.contains(x) {
			t.Fatalf("draw %d: %v is excluded", i, a)
		}
		if len(first) < cap(first) {
			first = append(first, x)
		}
		per8[x>>24]++
	}
	slices.Sort(first)
	for i := 1; i < len(first); i++ {
		if first[i] == first[i-1] {
			t.Fatalf("%v drawn twice", addrOf(first[i]))
		}
	}

	// Expected share of each /8: its drawable addresses over all of them.
	allowed := float64(r.Allowed())
	var chi2 float64
	dof := -1
	for b := range 256 {
		lo := uint32(b) << 24
		in := float64(1 << 24)
		for _, sp := range excluded {
			if sp.hi < lo || sp.lo > lo|0xffffff {
				continue
			}
			in -= float64(min(sp.hi, lo|0xffffff)-max(sp.lo, lo)) + 1
		}
		want := float64(draws) * in / allowed
		if want == 0 {
			if per8[b] != 0 {
				t.Fatalf("%d.0.0.0/8 is wholly excluded but drew %d", b, per8[b])
			}
			continue
		}
		d := float64(per8[b]) - want
		chi2 += d * d / want
		dof++
	}
	// The 0.1% critical value of chi-square, by the Wilson–Hilferty
	// approximation: a fixed seed makes this a fixed verdict, not a
	// flaky one.
	k := float64(dof)
	crit := k * math.Pow(1-2/(9*k)+3.09*math.Sqrt(2/(9*k)), 3)
	t.Logf("chi-square %.1f with %d degrees of freedom (0.1%% critical value %.1f)", chi2, dof, crit)
	if chi2 > crit {
		t.Fatalf("draws are not uniform over the /8s: chi-square %.1f > %.1f", chi2, crit)
	}
	if per8[6] != 0 || per8[127] != 0 || per8[10] != 0 || per8[0] != 0 || per8[230] != 0 {
		t.Fatal("an excluded /8 was drawn")
	}
}

func TestRandomIsReproducible(t *testing.T) {
	bl := DefaultBlocklist()
	a, b, c := NewRandom(42, bl), NewRandom(42, bl), NewRandom(43, bl)
	same := 0
	for range 1000 {
		x, _ := a.Next()
		y, _ := b.Next()
		z, _ := c.Next()
		if x != y {
			t.Fatalf("same seed, different draws: %v %v", x, y)
		}
		if x == z {
			same++
		}
	}
	if same > 5 {
		t.Fatalf("seeds 42 and 43 agree on %d of 1000 draws", same)
	}
}

// The permutation is a bijection: a small walk never meets itself, and
// special ranges are never drawn even when the blocklist is empty.
func TestRandomIgnoresAnEmptyBlocklistForSpecialRanges(t *testing.T) {
	r := NewRandom(1, Blocklist{})
	for range 100000 {
		a, _ := r.Next()
		if _, ok := special(a); ok {
			t.Fatalf("%v drawn with no blocklist", a)
		}
	}
}

func TestBlocklist(t *testing.T) {
	b := userBlocklist(t, "# opt-outs\n93.184.216.0/24\n2001:db9::/32\noptout.example\n")
	for _, c := range []struct {
		ip   string
		want bool
	}{
		{"127.0.0.1", true}, {"10.1.2.3", true}, {"192.0.2.7", true}, {"255.255.255.255", true}, {"224.0.0.1", true},
		{"93.184.216.34", true}, {"93.184.217.1", false}, {"8.8.8.8", false}, {"2001:db9::1", true}, {"2606:4700::1", false},
		{"::1", true}, {"::ffff:10.0.0.1", true},
	} {
		if got := b.Blocks(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("Blocks(%s) = %v, want %v", c.ip, got, c.want)
		}
	}
	if !b.BlocksHost("www.optout.example") || !b.BlocksHost("optout.example.") || b.BlocksHost("notoptout.example") {
		t.Error("host entries do not cover exactly the host and its subdomains")
	}
	if got := b.without(netip.MustParsePrefix("127.0.0.0/8")); got.Blocks(netip.MustParseAddr("127.0.0.9")) || !got.Blocks(netip.MustParseAddr("10.0.0.1")) {
		t.Error("without(127/8) did not cut exactly loopback")
	}
	if (Blocklist{}).Empty() != true || b.Empty() {
		t.Error("Empty is wrong")
	}
	if len(b.Sources()) != 2 {
		t.Errorf("sources %v", b.Sources())
	}
}

func TestParsePorts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  string
	}{
		{"web,22", []int{80, 443, 8000, 8008, 8080, 8443, 8888, 22}, ""},
		{"22,22, 25-27", []int{22, 25, 26, 27}, ""},
		{"mail", []int{25, 110, 143, 465, 587, 993, 995}, ""},
		{"0", nil, "not a port"},
		{"65536", nil, "not a port"},
		{"bogus", nil, "lists: "},
		{"30-20", nil, "ends before"},
		{" , ", nil, "no port"},
	} {
		got, err := ParsePorts(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParsePorts(%q) error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParsePorts(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	top, _ := ParsePorts("top112")
	if len(top) != 110 || top[0] != 1 || top[len(top)-1] != 995 {
		t.Errorf("top112 has %d ports", len(top))
	}
}
