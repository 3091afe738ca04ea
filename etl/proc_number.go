package etl

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// numberProc reads the first number in each value ("1,234.50 €" → 1234.5)
// and writes it plainly. Thousands separators (",", ".", "'", spaces) are
// recognized; which mark is decimal is guessed unless "decimal" says "." or
// ",". Values without a number are dropped.
type numberProc struct{ decimal string }

// numberParams are the number processor's parameters.
type numberParams struct {
	Decimal string `json:"decimal" enum:".|," doc:"Which mark is decimal; guessed when absent."`
}

func init() {
	registerProc(procSpec{
		name:    "number",
		group:   groupTyped,
		summary: "The first number in each value, written plainly (\"1.234,50 €\" becomes 1234.5).",
		example: `{"decimal": ","}`,
	}, func(p numberParams) (Processor, error) {
		if p.Decimal != "" && p.Decimal != "." && p.Decimal != "," {
			return nil, fmt.Errorf(`parameter "decimal" must be "." or ",", got %q`, p.Decimal)
		}
		return numberProc{decimal: p.Decimal}, nil
	})
}

func (n numberProc) Process(in []Value, _ *Document) ([]Value, error) {
	return mapText(in, func(s string) (string, bool) { return parseNumber(s, n.decimal) }), nil
}

var numberRe = regexp.MustCompile(`[-+−]?\d[\d.,'’\x{00a0}\x{202f} ]*`)

// parseNumber finds the first number in s and formats it canonically.
func parseNumber(s, decimal string) (string, bool) {
	m := numberRe.FindString(s)
	if m == "" {
		return "", false
	}
	m = strings.TrimRight(m, ".,'’\u00a0\u202f ")
	neg := false
	switch {
	case strings.HasPrefix(m, "-"), strings.HasPrefix(m, "+"):
		neg = m[0] == '-'
		m = m[1:]
	case strings.HasPrefix(m, "−"):
		neg = true
		m = strings.TrimPrefix(m, "−")
	}
	m = strings.NewReplacer("'", "", "’", "", "\u00a0", "", "\u202f", "", " ", "").Replace(m)
	if decimal == "" {
		decimal = guessDecimal(m)
	}
	thousands := ","
	if decimal == "," {
		thousands = "."
	}
	m = strings.ReplaceAll(m, thousands, "")
	if decimal == "," {
		m = strings.Replace(m, ",", ".", 1)
	}
	if strings.Count(m, ".") > 1 {
		return "", false
	}
	f, err := strconv.ParseFloat(m, 64)
	if err != nil {
		return "", false
	}
	if neg {
		f = -f
	}
	return strconv.FormatFloat(f, 'f', -1, 64), true
}

// guessDecimal decides which of "." and "," is the decimal mark in m.
func guessDecimal(m string) string {
	dot, comma := strings.LastIndexByte(m, '.'), strings.LastIndexByte(m, ',')
	switch {
	case dot >= 0 && comma >= 0:
		if dot > comma {
			return "."
		}
		return ","
	case comma >= 0:
		// "1,234" and "1,234,567" group thousands; "3,5" is a decimal.
		if strings.Count(m, ",") == 1 && len(m)-comma-1 != 3 {
			return ","
		}
		return "."
	case dot >= 0:
		// "1.234.567" groups thousands; a single dot is a decimal.
		if strings.Count(m, ".") > 1 {
			return ","
		}
	}
	return "."
}
