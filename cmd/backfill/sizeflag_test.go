package main

import "testing"

func TestSizeFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"0", 0, false},
		{"1GiB", 1 << 30, false},
		{"512MiB", 512 << 20, false},
		{"1.5 GiB", 3 << 29, false},
		{"2GB", 2e9, false},
		{"100MB", 1e8, false},
		{"64KiB", 64 << 10, false},
		{"4096", 4096, false},
		{"10B", 10, false},
		{"-1GiB", 0, true},
		{"lots", 0, true},
		{"1XB", 0, true},
		{"", 0, true},
	} {
		var s sizeFlag
		err := s.Set(c.in)
		if (err != nil) != c.bad || (!c.bad && int64(s) != c.want) {
			t.Errorf("Set(%q) = %d, %v; want %d, error %v", c.in, int64(s), err, c.want, c.bad)
		}
	}
	for _, c := range []struct {
		v    sizeFlag
		want string
	}{{1 << 30, "1GiB"}, {512 << 20, "512MiB"}, {1000, "1000"}, {0, "0"}} {
		if got := c.v.String(); got != c.want {
			t.Errorf("String(%d) = %q, want %q", int64(c.v), got, c.want)
		}
	}
}
