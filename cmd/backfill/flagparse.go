package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
)

// parseFlags parses args with fs. Help (-h) prints fs's usage and returns
// flag.ErrHelp; any other error is a usage error, and an unknown flag is
// answered with the nearest one (a typo of one, or a prefix) rather than
// the list of every flag, which -h prints.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf) // what Parse prints on an error: the error and every flag
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		out.Write(buf.Bytes())
		return err
	}
	help := fmt.Sprintf("`%s -h` lists every flag", fs.Name())
	name, unknown := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !unknown {
		return fmt.Errorf("%w: %v (%s)", errUsage, err, help)
	}
	name = strings.TrimPrefix(name, "-")
	if near := nearestFlag(fs, name); near != "" {
		return fmt.Errorf("%w: unknown flag --%s: did you mean --%s? (%s)", errUsage, name, near, help)
	}
	return fmt.Errorf("%w: unknown flag --%s (%s)", errUsage, name, help)
}

// nearestFlag is the flag of fs that name most likely meant: the closest
// by edit distance, within a third of the name's length (at least 2), or
// the one flag it is a prefix of; "" when none is near.
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", max(2, len(name)/3)+1
	var prefixed []string
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestD || d == bestD && f.Name < best {
			best, bestD = f.Name, d
		}
		if strings.HasPrefix(f.Name, name) {
			prefixed = append(prefixed, f.Name)
		}
	})
	if best == "" && len(prefixed) == 1 {
		return prefixed[0]
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance of a and b (optimal
// string alignment: an adjacent transposition costs one).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
