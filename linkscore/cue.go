package linkscore

import "strings"

// Naming is how much of a record's match-key words a link holds.
type Naming uint8

// Namings, in the order of the model's tables. Append only.
const (
	NameUnknown Naming = iota // the record knows no match key
	NameNone                  // none of its words
	NamePart                  // some of them
	NameFull                  // all of them
)

var namingNames = [...]string{"unknown", "none", "part", "full"}

func (n Naming) String() string {
	if int(n) < len(namingNames) {
		return namingNames[n]
	}
	return "naming?"
}

// Source is what the page a link was found on was to the record.
type Source uint8

// Sources, in the order of the model's tables. Append only.
const (
	SourceOwn     Source = iota // the record's own link, found on no page
	SourceNeutral               // the page gave the record nothing and named no one else
	SourceGave                  // the page gave the record values
	SourceRefused               // the page named someone else (a match key disagreed)
)

var sourceNames = [...]string{"own", "neutral", "gave", "refused"}

func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "source?"
}

// Fanout buckets: how many links the page a link was found on had.
const (
	FanoutNone = iota // found on no page: a record's own link
	FanoutOne         // the page's only link
	FanoutFew         // 2 to 4
	FanoutSome        // 5 to 19
	FanoutMany        // 20 to 99
	FanoutHuge        // 100 or more
	fanoutCount
)

var fanoutNames = [...]string{"none", "1", "2-4", "5-19", "20-99", "100+"}

// FanoutOf is the bucket of a page with n links (0: a record's own link).
func FanoutOf(n int) uint8 {
	switch {
	case n <= 0:
		return FanoutNone
	case n == 1:
		return FanoutOne
	case n < 5:
		return FanoutFew
	case n < 20:
		return FanoutSome
	case n < 100:
		return FanoutMany
	}
	return FanoutHuge
}

// Cue is what is known of a link for one record before it is fetched
// (see the package doc).
type Cue struct {
	Match  bool
	Naming Naming
	Values bool
	Source Source
	Fanout uint8 // a Fanout* bucket
	Last   bool
	Barren bool
}

// The features of a cue, in the order of the model's tables, and the
// values each takes. Last is not one: it decides which heads count.
const (
	featMatch = iota
	featNaming
	featValues
	featSource
	featFanout
	featBarren
	numFeatures
)

// maxValues is the most values a feature takes (Fanout's).
const maxValues = fanoutCount

var featureNames = [numFeatures]string{"match", "naming", "values", "source", "fanout", "barren"}

// featureValues is how many values each feature takes.
var featureValues = [numFeatures]int{2, len(namingNames), 2, len(sourceNames), fanoutCount, 2}

// value is the value of feature f in c, as an index.
func (c Cue) value(f int) int {
	switch f {
	case featMatch:
		return b2i(c.Match)
	case featNaming:
		return min(int(c.Naming), len(namingNames)-1)
	case featValues:
		return b2i(c.Values)
	case featSource:
		return min(int(c.Source), len(sourceNames)-1)
	case featFanout:
		return min(int(c.Fanout), fanoutCount-1)
	case featBarren:
		return b2i(c.Barren)
	}
	return 0
}

// valueName names value v of feature f.
func valueName(f, v int) string {
	switch f {
	case featNaming:
		return namingNames[v]
	case featSource:
		return sourceNames[v]
	case featFanout:
		return fanoutNames[v]
	}
	if v == 1 {
		return "yes"
	}
	return "no"
}

// String is the cue as a debug log line shows it, e.g.
// "match naming=full source=neutral fanout=5-19".
func (c Cue) String() string {
	var b strings.Builder
	if c.Match {
		b.WriteString("match ")
	} else {
		b.WriteString("no-match ")
	}
	b.WriteString("naming=" + c.Naming.String())
	if c.Values {
		b.WriteString(" values")
	}
	b.WriteString(" source=" + c.Source.String())
	b.WriteString(" fanout=" + fanoutNames[min(int(c.Fanout), fanoutCount-1)])
	if c.Last {
		b.WriteString(" last")
	}
	if c.Barren {
		b.WriteString(" barren")
	}
	return b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
