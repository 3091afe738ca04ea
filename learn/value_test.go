package learn

import "testing"

// TestKinds: what a field's values are decides how they are compared,
// and a declared type overrides it.
func TestKinds(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   kind
	}{
		{[]string{"+39 02 555 0102", "0161 496 0201"}, kindPhone},
		{[]string{"(0161) 496-0201"}, kindPhone},
		{[]string{"12 345 678"}, kindNumber},
		{[]string{"1,234.50", "12"}, kindNumber},
		{[]string{"June 2010", "2011-03"}, kindDate},
		{[]string{"1995-05-04"}, kindDate},
		{[]string{"02134", "10001"}, kindString},
		{[]string{"Lisbon, Portugal"}, kindString},
		{[]string{"ada@mail.example"}, kindEmail},
	} {
		if got := kindOf(c.values); got != c.want {
			t.Errorf("kindOf(%q) = %d, want %d", c.values, got, c.want)
		}
	}
	for _, c := range []struct {
		k    kind
		a, b string
		same bool
	}{
		{kindPhone, "+39 02 555 0102", "+39 (02) 555-0102", true},
		{kindPhone, "+39 02 555 0102", "39 02 555 0102", false},
		{kindPhone, "0161 496 0201", "tel:01614960201", true},
		{kindDate, "2010-06", "June 2010", true},
		{kindDate, "2010-06", "1 June 2010", false},
		{kindDate, "2010", "2010", true},
		{kindString, "Lisbon,  Portugal", "Lisbon, Portugal", true},
		{kindString, "Lisbon, Portugal", "LISBON, PORTUGAL", false},
		{kindString, "Lisbon, Portugal", "Lisbon Portugal", false},
		{kindKey, "Chloé  Costa", "chloe costa", true},
	} {
		if got := c.k.same(c.a, c.b); got != c.same {
			t.Errorf("kind %d: same(%q, %q) = %v", c.k, c.a, c.b, got)
		}
	}
	o := Options{MatchKey: "name", Lists: []string{"authors"}, Types: map[string]string{"born": "date", "code": "text"}}
	for _, c := range []struct {
		field  string
		values []string
		want   kind
	}{
		{"name", []string{"Ada"}, kindKey},
		{"authors", []string{"Ada, Bruno"}, kindList},
		{"born", []string{"May 1990"}, kindDate},
		{"code", []string{"+39 02 555 0102"}, kindString},
		{"phone", []string{"+39 02 555 0102"}, kindPhone},
	} {
		if got := o.kindOf(c.field, c.values); got != c.want {
			t.Errorf("kindOf(%s, %q) = %d, want %d", c.field, c.values, got, c.want)
		}
	}
}

// TestFindValues: phone numbers and dates are found as pages write them,
// and only there.
func TestFindValues(t *testing.T) {
	for _, c := range []struct {
		k         kind
		value, in string
		want      string // what is found, "" nothing
	}{
		{kindPhone, "+39 02 555 0102", "Call +39 02 555 0102 today", "+39 02 555 0102"},
		{kindPhone, "+39 02 555 0102", "Call 39 02 555 0102 today", ""},
		{kindPhone, "0161 496 0201", "<td>(0161) 496-0201</td>", "(0161) 496-0201"},
		{kindPhone, "0161 496 0201", "ref 90161 496 0201", ""},
		{kindDate, "2010-06", "Published June 2010.", "June 2010"},
		{kindDate, "2010-06", "Published 2010-06-03.", ""},
		{kindDate, "June 2010", "Published 2010-06.", "2010-06"},
		{kindString, "Lisbon, Portugal", "in LISBON, PORTUGAL", ""},
	} {
		loc, _ := newFinder(c.k, c.value).find(c.in)
		got := ""
		if loc != nil {
			got = c.in[loc[0]:loc[1]]
		}
		if got != c.want {
			t.Errorf("find %q in %q: %q, want %q", c.value, c.in, got, c.want)
		}
	}
}
