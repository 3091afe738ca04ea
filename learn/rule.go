package learn

import (
	"encoding/json"
	"sort"
	"strings"
)

// rank orders the kinds of rule, the families, from the most to the
// least stable. What a site publishes for machines comes first: JSON-LD,
// microdata and RDFa attributes, the JSON a page's script carries, meta
// tags; they change less than its HTML, and are preferred when they
// explain the teachers as well. Then a rule anchored on a label the page
// prints survives redesigns that move things around; ids and classes are
// stable on most sites; a position in the tree breaks with the first new
// element.
type rank int

const (
	rankLD rank = iota
	rankMicrodata
	rankBlob
	rankMeta
	rankLabel
	rankAttr
	rankStructural
	ranks // how many there are
)

var rankNames = [...]string{
	rankLD:         "JSON-LD property",
	rankMicrodata:  "microdata or RDFa property",
	rankBlob:       "JSON path in a script",
	rankMeta:       "meta tag",
	rankLabel:      "label-anchored XPath",
	rankAttr:       "XPath anchored on a stable id, class or attribute",
	rankStructural: "XPath by position in the page",
}

func (r rank) String() string { return rankNames[r] }

// step is one processor of a learned chain, as the mapping file says it.
type step struct {
	Type       string         `json:"type"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

// rule is a candidate chain for a field.
type rule struct {
	rank rank
	// cut marks a rule that takes the value out of a longer text with a
	// regular expression: it holds only as long as the words around the
	// value do (and a value holding them is cut short: a title's own
	// " to "), so any rule taking a whole element, attribute or JSON
	// value comes first.
	cut bool
	// cost orders rules of one rank: more steps and more anchoring cost
	// more, and the simpler rule is the more general.
	cost  int
	steps []step
	key   string // the chain as JSON: identity and the last tie-break
}

func newRule(r rank, cost int, steps ...step) *rule {
	b, _ := json.Marshal(steps)
	return &rule{rank: r, cost: cost + len(steps), steps: steps, key: string(b)}
}

// family is the kind of a rule for choosing among kinds (induce.go): its
// rank, and whether it cuts.
func (a *rule) family() int {
	f := int(a.rank) * 2
	if a.cut {
		f++
	}
	return f
}

// less orders rules by preference.
func (a *rule) less(b *rule) bool {
	if a.cut != b.cut {
		return !a.cut
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if a.cost != b.cost {
		return a.cost < b.cost
	}
	if len(a.key) != len(b.key) {
		return len(a.key) < len(b.key)
	}
	return a.key < b.key
}

// sortRules orders rules by preference.
func sortRules(rs []*rule) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].less(rs[j]) })
}

// String is the chain in a line, for reports.
func (a *rule) String() string {
	parts := make([]string, len(a.steps))
	for i, s := range a.steps {
		switch {
		case s.Parameters["expression"] != nil:
			parts[i] = s.Type + " " + s.Parameters["expression"].(string)
		case s.Parameters["pattern"] != nil:
			parts[i] = s.Type + " " + s.Parameters["pattern"].(string)
		case s.Type == "jsonld" && s.Parameters["property"] != nil:
			parts[i] = "jsonld " + s.Parameters["type"].(string) + "." + s.Parameters["property"].(string)
		case s.Type == "jsonld":
			parts[i] = "jsonld " + s.Parameters["type"].(string)
		case s.Type == "concat":
			parts[i] = concatString(s)
		case s.Type == "meta":
			parts[i] = "meta " + s.Parameters["name"].(string)
		default:
			parts[i] = s.Type
		}
	}
	return strings.Join(parts, " → ")
}

func xpathStep(expr string) step {
	return step{Type: "xpath", Parameters: map[string]any{"expression": expr}}
}

func regexStep(pattern string) step {
	return step{Type: "regex", Parameters: map[string]any{"pattern": pattern}}
}

func trimStep() step { return step{Type: "trim"} }
