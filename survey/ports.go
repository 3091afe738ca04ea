package survey

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// portLists are the named port lists of --ports. Append only: names are
// part of users' scripts.
var portLists = map[string][]int{
	// top112 is the list of the port-liveness seed, in its order. The
	// seed's list has 112 entries, 1 and 73 twice, so 110 ports.
	"top112": {1, 5, 7, 9, 11, 13, 17, 18, 19, 20, 21, 22, 23, 25, 37, 39, 42, 43, 49, 50, 53, 63, 67, 68, 69, 70, 71, 72, 73,
		79, 80, 88, 95, 101, 102, 105, 107, 109, 110, 111, 113, 115, 117, 119, 123, 137, 138, 139, 143, 161, 162, 163, 164, 174,
		177, 178, 179, 191, 194, 201, 202, 204, 206, 209, 210, 213, 220, 245, 347, 363, 369, 370, 372, 389, 427, 434, 435, 443,
		444, 445, 464, 468, 487, 488, 496, 500, 535, 538, 546, 547, 554, 563, 565, 587, 610, 611, 612, 631, 636, 674, 694, 749,
		750, 765, 767, 873, 992, 993, 994, 995},
	"web":    {80, 443, 8000, 8008, 8080, 8443, 8888},
	"mail":   {25, 110, 143, 465, 587, 993, 995},
	"remote": {22, 23, 3389, 5900},
	"db":     {1433, 1521, 3306, 5432, 6379, 9200, 11211, 27017},
	"dns":    {53},
	"ftp":    {20, 21},
}

// webPorts are where a banner grab asks with an HTTP request rather than
// waiting for the server to speak first.
var webPorts = map[int]bool{80: true, 8000: true, 8008: true, 8080: true, 8888: true}

// ParsePorts reads a --ports value: names of lists (top112, web, mail,
// remote, db, dns, ftp), numbers and ranges (8000-8100), comma-separated.
// The result keeps the first occurrence of each port, in order.
func ParsePorts(spec string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	add := func(p int) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(strings.ToLower(item))
		if item == "" {
			continue
		}
		if list, ok := portLists[item]; ok {
			for _, p := range list {
				add(p)
			}
			continue
		}
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := port(lo)
		if err != nil {
			return nil, fmt.Errorf("ports %q: %w (lists: %s)", item, err, strings.Join(PortListNames(), ", "))
		}
		b := a
		if isRange {
			if b, err = port(hi); err != nil {
				return nil, fmt.Errorf("ports %q: %w", item, err)
			}
			if b < a {
				return nil, fmt.Errorf("ports %q: range ends before it starts", item)
			}
		}
		for p := a; p <= b; p++ {
			add(p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ports %q: no port", spec)
	}
	return out, nil
}

func port(s string) (int, error) {
	p, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("%q is not a port (1-65535) or a list name", s)
	}
	return p, nil
}

// PortListNames lists the named port lists.
func PortListNames() []string {
	var names []string
	for n := range portLists {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
