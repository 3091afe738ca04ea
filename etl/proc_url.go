package etl

import "encoding/json"

// urlProc makes each value an absolute, normalized http(s) URL, resolved
// against the page (or its <base href>); values that are not URLs are
// dropped.
type urlProc struct{}

func init() {
	register("url", func(raw json.RawMessage) (Processor, error) {
		var p struct{}
		if err := decodeParams(raw, &p); err != nil {
			return nil, err
		}
		return urlProc{}, nil
	})
}

func (urlProc) Process(in []Value, doc *Document) ([]Value, error) {
	return mapText(in, func(s string) (string, bool) {
		u, err := doc.resolve(s)
		return u, err == nil
	}), nil
}
