package etl

import "fmt"

// HTMLParser says how a Set parses HTML pages. The fast builder
// reproduces html.Parse exactly on the pages it takes and hands every
// other page to html.Parse, and its fuzz target holds it to that; the
// standard parser is the switch that takes it out of the way entirely,
// so a page on which the two are ever found to differ is handled by a
// flag (--html-parser standard), not by a new release.
type HTMLParser int

const (
	// ParserFast is the fast tree builder, with html.Parse for the pages
	// it does not take. The default.
	ParserFast HTMLParser = iota
	// ParserStandard is golang.org/x/net/html's Parse for every page.
	ParserStandard
)

// HTMLParserNames are the names ParseHTMLParser reads, in constant order.
var HTMLParserNames = []string{"fast", "standard"}

func (p HTMLParser) String() string {
	if p >= 0 && int(p) < len(HTMLParserNames) {
		return HTMLParserNames[p]
	}
	return fmt.Sprintf("HTMLParser(%d)", int(p))
}

// ParseHTMLParser reads a parser's name: "fast" or "standard".
func ParseHTMLParser(name string) (HTMLParser, error) {
	for i, n := range HTMLParserNames {
		if n == name {
			return HTMLParser(i), nil
		}
	}
	return ParserFast, fmt.Errorf("unknown HTML parser %q (fast or standard)", name)
}

// WithHTMLParser returns a Set with s's mappings (and digest) that parses
// HTML with p. s itself is unchanged; a nil s stays nil.
func (s *Set) WithHTMLParser(p HTMLParser) *Set {
	if s == nil {
		return nil
	}
	c := *s
	c.parser = p
	return &c
}

// HTMLParser is how the set parses HTML.
func (s *Set) HTMLParser() HTMLParser {
	if s == nil {
		return ParserFast
	}
	return s.parser
}
