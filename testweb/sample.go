package testweb

import (
	_ "embed"
)

// sampleCSV is the bundled sample dataset, also shipped as a file for the
// demo and for users who want to try their own run against Start's web.
//
//go:embed testdata/sample.csv
var sampleCSV []byte

// Sample returns the bundled sample dataset as CSV (header id, name,
// location, email, homepage, profile; an empty cell is a missing value) and,
// per record id, the exact values a correct crawl of the small web at depth
// limit 1 ends with for each of the record's target fields: the fields
// among name, location and email that the record lacks. "" marks a target
// that must stay unfilled. Fields the record already has are not in its
// truth (they are not targets and must not change); a complete record has an
// empty map. Each call returns fresh copies.
//
// A correct crawl follows these rules, which the truth below is written
// against: a page's values go to a record only when the record's known name
// equals the page's name after folding case, whitespace and accents (name
// is the mappings' match key); when pages disagree on a field, the one
// nearer to the record's own links wins; robots.txt is obeyed; a complete
// record crawls no further.
func Sample() (records []byte, truth map[string]map[string]string) {
	records = append([]byte(nil), sampleCSV...)
	truth = map[string]map[string]string{
		// Homepage on another host (depth 0, no mapping matches it) links
		// to her profile (depth 1), whose name matches.
		"r1": {"location": alice.Location, "email": alice.Email},
		// Name unknown, so no match key constrains attribution; the profile
		// at depth 0 completes the record at once, and its links (the
		// people index, no data) change nothing.
		"r2": {"name": carol.Name, "location": carol.Location},
		// The team page (depth 0) links to four colleagues' profiles
		// (depth 1). Only Hana's name matches; Bob's, Gus's and Erin's
		// values are decoys that must never land here.
		"r3": {"location": hana.Location, "email": hana.Email},
		// His profile (depth 0) has a location but no email. It links to
		// Carol's profile (depth 1, with an email): a decoy. His contact
		// page is under /private/. So the email stays unfilled.
		"r4": {"location": bob.Location, "email": ""},
		// Two links. Her current profile (depth 0) says Kraków and has her
		// email; her blog (depth 0, no data) links to her old staff page
		// (depth 1) saying Warsaw with no email. The nearer page wins even
		// when the farther one is fetched first, and since the staff page
		// has no email, the record cannot complete before the profile is
		// seen.
		"r5": {"location": dana.Location, "email": dana.Email},
		// Layout B at depth 0. Its link to a home address is under
		// /private/ and never fetched.
		"r6": {"location": erin.Location, "email": erin.Email},
		// Known as "zoe  laurent"; the page says "Zoë Laurent". Equal once
		// case, whitespace and accents are folded.
		"r7": {"location": zoe.Location, "email": zoe.Email},
		// Already complete: nothing to crawl, its homepage is never fetched.
		"r8": {},
		// Its only link is a 404.
		"r9": {"location": "", "email": ""},
		// A page with no data; its one link is under /private/.
		"r10": {"location": "", "email": ""},
		// Its only link is under /private/ (a staff profile the mapping
		// would match, with his real values): blocked by robots.txt.
		"r11": {"location": "", "email": ""},
		// Her blog links to Alice's and Erin's profiles (depth 1): both
		// decoys. Her drafts are under /private/.
		"r12": {"location": "", "email": ""},
		// No links at all.
		"r13": {"location": "", "email": ""},
		// Name unknown, location known; the staff profile at depth 0 gives
		// the name and email. Its link to the team page (depth 1) has no
		// data and the team page's own links are at depth 2.
		"r14": {"name": nora.Name, "email": nora.Email},
		// The same person as r1 with another email already known: only the
		// location is a target, and the known email must stay as it is.
		// The profile is also r1's depth-1 page: fetched once, used twice.
		"r15": {"location": alice.Location},
	}
	return records, truth
}

//go:embed testdata/sample-js.csv
var sampleJSCSV []byte

// SampleJS returns records for the pages of app.example, whose data only a
// browser sees (a script writes it into the DOM), in Sample's CSV format,
// and the truth a crawl at depth limit 1 ends with when a render-capable
// supervisor takes part: the bundled mapping testweb-app matches the
// profiles, finds none of its fields in their HTML, and the dispatcher
// sends them again to be rendered. Without a render-capable supervisor
// every target stays unfilled. They are kept apart from Sample, whose
// truth the crawls without a browser check. Each call returns fresh
// copies.
func SampleJS() (records []byte, truth map[string]map[string]string) {
	records = append([]byte(nil), sampleJSCSV...)
	truth = map[string]map[string]string{
		// Her profile at depth 0. The rendered page is layout A.
		"j1": {"location": maya.Location, "email": maya.Email},
		// The app's index (depth 0, static, no mapping matches it) links
		// to three profiles (depth 1). Only Omar's name matches: Maya's
		// and Pia's values are decoys.
		"j2": {"location": omar.Location, "email": omar.Email},
		// Her rendered profile gives a location and no email.
		"j3": {"location": pia.Location, "email": ""},
	}
	return records, truth
}

// NeverFetched lists the URLs of the small web that a correct crawl of
// Sample at depth limit 1 never requests: every robots.txt-disallowed page
// linked from a reachable one (each holds tempting values), the staff
// directory (linked only from pages at depth 1, so at depth 2 for every
// record) and the homepage of the already complete record r8. Each of them
// is served with status 200, so a crawler that breaks a rule is caught by
// Log.
func NeverFetched() []string {
	return []string{
		"http://people.example/private/bob",
		"http://staff.example.org/private/erin.html",
		"http://staff.example.org/private/kim.html",
		"http://blog.example.net/private/drafts",
		"http://team.example/private/salaries",
		"http://quiet.example/private/staff.html",
		"http://staff.example.org/",
		"http://blog.example.net/~yuki/",
	}
}
