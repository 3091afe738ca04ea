// Package etl runs site mappings on fetched pages: it owns the mapping
// model, the processors, extraction and link discovery.
//
// A mapping (see docs/mappings.md) says which pages it applies to
// (url_patterns, regular expressions over the page URL), which links on
// them are worth following (url_parsers) and which values to take
// (fields). url_parsers and fields are chains of processors: the first
// processor works on the parsed document, each next one on the values the
// previous one returned.
//
// Loading compiles everything once. LoadDir (or LoadFS for the bundled
// mappings) reads every *.json file, validates it against the format's
// JSON Schema (mappings/schema.json, embedded in the mappings package),
// builds each processor from its JSON parameters through a registry of
// processor types, compiles XPath, regular expressions and JSONPath, and
// refuses the whole set if anything is wrong, with one LoadError per
// problem naming file:line:col, mapping, field, processor, the JSON pointer
// of the offending value and a hint drawn from the schema:
//
//	set, err := etl.LoadDir("mappings")
//	if err != nil {
//		for _, e := range etl.Unjoin(err) { fmt.Println(e) }
//		os.Exit(1)
//	}
//
// Extraction parses the page once — HTML into a golang.org/x/net/html tree,
// or JSON when the content type says so — and runs every matching mapping
// on the same tree. HTML goes through a fast tree builder that reproduces
// html.Parse exactly on the common shape of pages and hands anything else
// (foster parenting, misnested formatting, foreign content, …) to
// html.Parse. The tree, its attributes and the page's scratch live in a
// pooled arena that the next page reuses once extraction is done, and the
// tree's strings share the body's memory for the length of the call, so
// nothing of the tree outlives Extract: what it returns is strings, and
// those that lie in the body are copied out before it returns. XPath of
// the common //tag[@attr='value']… shape is answered from a per-document
// index of elements by tag, which the parser fills as it goes.
// Set.WithHTMLParser(ParserStandard) turns the fast builder off and parses
// every page with html.Parse (the --html-parser flag):
//
//	ex := set.Extract("https://site.example/people/ada", body, "text/html")
//	// ex.Fields: values per mapping field; ex.Links: from url_parsers;
//	// ex.OutLinks: every http(s) link on the page, ex.Anchors the text of
//	// each one's anchor (AnchorText); ex.Errors: what failed.
//
// A processor that fails on a page leaves a FieldError and the other
// fields go on; a panic inside a mapping is recovered and reported the same
// way, so Extract never panics. Links are resolved against the page URL
// (or its <base href>) and normalized with NormalizeURL, the one URL
// normalization the project uses; MatchKey is the normalization used to
// compare attribution match keys.
//
// Fixtures (saved pages with expected fields and links) run through
// Set.TestFixtures; UpdateFixtures rewrites a file's expectations with what
// its mappings produce now.
//
// Adding a processor is adding one file: a type with a Process method, a
// parameter struct whose fields and tags (json name, doc, required, enum,
// …) are its parameters, and an init that registers both with registerProc
// and a procSpec saying what the processor does. The loader decodes
// exactly that struct, refusing unknown parameters, and the build function
// rejects bad values at load. `go generate ./etl` writes the processor's
// entry in mappings/schema.json and its section of docs/mappings.md from
// the same struct and spec; a test fails while either file is stale, and
// others check the schema, the docs and the structs against each other
// both ways.
//
// A Set is immutable after loading and safe for concurrent use: many
// workers may call Extract at once.
package etl
