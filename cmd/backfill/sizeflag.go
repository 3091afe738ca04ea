package main

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeFlag is a flag.Value of a size in bytes, written with a unit
// (1GiB, 512MiB, 64KiB, 2GB, 100MB, 0) or as a plain number of bytes.
type sizeFlag int64

// sizeUnits are the units a sizeFlag reads, longest first.
var sizeUnits = []struct {
	suffix string
	n      int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

func (s *sizeFlag) Set(v string) error {
	t := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.n
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(mult) > 1<<62 {
		return fmt.Errorf("%q is not a size: a number of bytes, or with a unit (512MiB, 1GiB, 2GB)", v)
	}
	*s = sizeFlag(f * float64(mult))
	return nil
}

func (s *sizeFlag) String() string {
	n := int64(*s)
	for _, u := range sizeUnits[:4] {
		if n >= u.n && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
