package provisioning

import (
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// positions maps a field's path to the line it is on: "name",
// "binary.url", "hosts[2]" (the line of the second [[hosts]] header),
// "hosts[2].roles", "admin_ssh_keys[1]" (an element of an array).
// Indexes count from 1, as a person counts [[hosts]] tables.
type positions map[string]int

// keyPositions walks the document's syntax tree, which keeps where every
// key and value is, while the decoder fills the Inventory.
func keyPositions(data []byte) (positions, error) {
	var p unstable.Parser
	p.Reset(data)
	pos := positions{}
	arrays := map[string]int{} // [[x]] headers seen, by path
	table := ""
	line := func(n *unstable.Node) int { return p.Shape(n.Raw).Start.Line }
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			k, first := keyOf(e.Key())
			table = k
			pos[table] = line(first)
		case unstable.ArrayTable:
			k, first := keyOf(e.Key())
			arrays[k]++
			table = fmt.Sprintf("%s[%d]", k, arrays[k])
			pos[table] = line(first)
			if arrays[k] == 1 {
				pos[k] = pos[table] // the array as a whole: its first table
			}
		case unstable.KeyValue:
			walkKeyValue(&p, pos, table, e)
		}
	}
	return pos, p.Error()
}

// walkKeyValue records a key and, inside its value, every inline table's
// keys and every array element.
func walkKeyValue(p *unstable.Parser, pos positions, table string, kv *unstable.Node) {
	k, first := keyOf(kv.Key())
	path := joinPath(table, k)
	pos[path] = p.Shape(first.Raw).Start.Line
	walkValue(p, pos, path, kv.Value(), pos[path])
}

func walkValue(p *unstable.Parser, pos positions, path string, v *unstable.Node, line int) {
	switch v.Kind {
	case unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				walkKeyValue(p, pos, path, c)
			}
		}
	case unstable.Array:
		i := 0
		for it := v.Children(); it.Next(); {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			i++
			el := fmt.Sprintf("%s[%d]", path, i)
			l := line
			if c.Raw.Length > 0 {
				l = p.Shape(c.Raw).Start.Line
			}
			pos[el] = l
			walkValue(p, pos, el, c, l)
		}
	}
}

// keyOf joins a dotted key and returns its first part's node.
func keyOf(it unstable.Iterator) (string, *unstable.Node) {
	var parts []string
	var first *unstable.Node
	for it.Next() {
		n := it.Node()
		if first == nil {
			first = n
		}
		parts = append(parts, string(n.Data))
	}
	return strings.Join(parts, "."), first
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// line is the line of field, or of the nearest enclosing field or table
// that is in the file; 0 when none is.
func (p positions) line(field string) int {
	for field != "" {
		if l, ok := p[field]; ok {
			return l
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return 0
}
