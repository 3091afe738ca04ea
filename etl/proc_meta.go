package etl

import (
	"errors"
	"strings"
)

// metaProc reads <meta> values: OpenGraph (property="og:title"), Twitter
// (name="twitter:creator") and plain <meta name="description">. "name" is
// matched case-insensitively against both the property and the name
// attribute; every content value is returned in document order. A JSON
// document has none.
type metaProc struct{ name string }

// metaParams are the meta processor's parameters.
type metaParams struct {
	Name string `json:"name" required:"true" pattern:"\\S" doc:"Meta name, case-insensitive, e.g. og:title."`
}

func init() {
	registerProc(procSpec{
		name:    "meta",
		group:   groupSelect,
		summary: "The content of every <meta> whose property, name or itemprop is name: OpenGraph (og:title), Twitter (twitter:creator) or plain (description).",
		example: `{"name": "og:title"}`,
	}, func(p metaParams) (Processor, error) {
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
