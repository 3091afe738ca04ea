package etl

// urlProc makes each value an absolute, normalized http(s) URL, resolved
// against the page (or its <base href>); values that are not URLs are
// dropped.
type urlProc struct{}

func init() {
	registerProc(procSpec{
		name:    "url",
		group:   groupTyped,
		summary: "Resolves each value against the page URL (or <base href>) and normalizes it; values that are not http(s) URLs are dropped. No parameters.",
	}, func(noParameters) (Processor, error) { return urlProc{}, nil })
}

func (urlProc) Process(in []Value, doc *Document) ([]Value, error) {
	return mapText(in, func(s string) (string, bool) {
		u, err := doc.resolve(s)
		return u, err == nil
	}), nil
}
