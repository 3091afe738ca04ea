package etl

import (
	"encoding/json"
	"errors"
	"strings"
)

// metaProc reads <meta> values: OpenGraph (property="og:title"), Twitter
// (name="twitter:creator") and plain <meta name="description">. "name" is
// matched case-insensitively against both the property and the name
// attribute; every content value is returned in document order. A JSON
// document has none.
type metaProc struct{ name string }

func init() {
	register("meta", func(raw json.RawMessage) (Processor, error) {
		var p struct {
			Name string `json:"name"`
		}
		if err := decodeParams(raw, &p); err != nil {
			return nil, err
		}
		if strings.TrimSpace(p.Name) == "" {
			return nil, errors.New(`parameter "name" is required (e.g. "og:title", "twitter:creator", "description")`)
		}
		return metaProc{name: strings.ToLower(strings.TrimSpace(p.Name))}, nil
	})
}

func (m metaProc) Process(_ []Value, doc *Document) ([]Value, error) {
	if doc.Root == nil {
		if doc.parseErr != nil {
			return nil, errors.New("document did not parse: " + doc.parseErr.Error())
		}
		return nil, nil // a JSON document has no <meta>
	}
	return TextValues(doc.metaValues()[m.name]...), nil
}

// metaValues indexes the page's <meta> contents by lower-cased name and
// property, built once per document.
func (d *Document) metaValues() map[string][]string {
	d.scan()
	return d.meta
}
