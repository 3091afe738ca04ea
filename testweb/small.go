package testweb

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"
)

// The small web: five hosts, written by hand so that every page has a
// reason to exist. Sample's comments say which record reaches which page.
//
//	people.example     profile layout A (h1.fn, p.location, a.email) under
//	                   /p/NAME, an index at /, a private page under /private/
//	staff.example.org  profile layout B (dl of dt/dd pairs) under
//	                   /staff/NAME.html, a directory at /, private profiles
//	                   under /private/ that the staff mapping would match
//	blog.example.net   personal homepages /~NAME/ linking to profiles on the
//	                   other hosts
//	team.example       one team page linking to four colleagues' profiles
//	                   (the attribution decoy)
//	quiet.example      a page with no data; everything else is 404
//	app.example        profiles under /u/NAME whose data a script loads
//	                   from /api/u/NAME.json and writes into the DOM (layout
//	                   A once rendered; the HTML itself holds none of it),
//	                   an index of them at /
//
// Every host's robots.txt disallows /private/, and some reachable pages
// link there; the private pages hold values a correct crawl never sees.

// Host names of the small web.
const (
	hostPeople = "people.example"
	hostStaff  = "staff.example.org"
	hostBlog   = "blog.example.net"
	hostTeam   = "team.example"
	hostQuiet  = "quiet.example"
	hostApp    = "app.example"
)

// person is what a profile page shows. An empty Email leaves the email
// out of the page altogether.
type person struct {
	Name, Location, Email string
}

// link is an anchor on a page.
type link struct {
	Href, Text string
}

type smallSite struct {
	robots map[string]string            // host → robots.txt
	pages  map[string]map[string]string // host → path → HTML
}

func (s *smallSite) hosts() []string {
	h := make([]string, 0, len(s.pages))
	for host := range s.pages {
		h = append(h, host)
	}
	return h
}

func (s *smallSite) serve(host, path string) (response, bool) {
	pages, ok := s.pages[host]
	if !ok {
		return response{}, false
	}
	if path == "/robots.txt" {
		return response{status: http.StatusOK, ctype: textType, body: []byte(s.robots[host])}, true
	}
	body, ok := pages[path]
	if !ok {
		// As a real server does for a directory named without its slash.
		// Costs a request, so a crawler that mangles URLs shows in the log.
		if _, dir := pages[path+"/"]; dir {
			return response{status: http.StatusMovedPermanently, ctype: htmlType, location: path + "/",
				body: []byte(movedPage(htmlEscape(path + "/")))}, true
		}
		return notFound(host + path), true
	}
	ctype := htmlType
	if strings.HasSuffix(path, ".json") {
		ctype = jsonType
	}
	return response{status: http.StatusOK, ctype: ctype, body: []byte(body)}, true
}

// robotsTxt is one host's robots.txt; extra is prepended as groups for
// other agents, which a crawler must not confuse with its own.
func robotsTxt(host string, crawlDelay int, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# robots.txt for %s\n", host)
	b.WriteString(extra)
	b.WriteString("User-agent: *\n")
	if crawlDelay > 0 {
		fmt.Fprintf(&b, "Crawl-delay: %d\n", crawlDelay)
	}
	b.WriteString("Disallow: /private/\n")
	return b.String()
}

// The people of the small web. Values appear on pages exactly as written
// here; Sample's truth refers to these variables so the two cannot drift.
var (
	alice = person{"Alice Moreau", "Lyon, France", "alice.moreau@mail.example"}
	bob   = person{"Bob Okafor", "Leeds, UK", ""} // no email on his page
	carol = person{"Carol Nguyen", "Hanoi, Vietnam", "carol.nguyen@mail.example"}
	dana  = person{"Dana Kowalski", "Kraków, Poland", "dana.kowalski@mail.example"}
	hana  = person{"Hana Sato", "Osaka, Japan", "hana.sato@mail.example"}
	zoe   = person{"Zoë Laurent", "Montréal, Canada", "zoe.laurent@mail.example"}

	erin = person{"Erin Walsh", "Cork, Ireland", "erin.walsh@staff.example.org"}
	gus  = person{"Gus Tanaka", "Nagoya, Japan", "gus.tanaka@staff.example.org"}
	nora = person{"Nora Lind", "Oslo, Norway", "nora.lind@staff.example.org"}
	// Dana's old staff page: another city and no email (see record r5).
	danaStaff = person{"Dana Kowalski", "Warsaw, Poland", ""}

	// On app.example, where only a browser sees them (see SampleJS). Pia
	// gives no email.
	maya = person{"Maya Ruiz", "São Paulo, Brazil", "maya.ruiz@mail.example"}
	omar = person{"Omar Haddad", "Beirut, Lebanon", "omar.haddad@mail.example"}
	pia  = person{"Pia Berg", "Tromsø, Norway", ""}

	// Behind robots.txt: values a polite crawler never sees.
	bobPrivate   = person{"Bob Okafor", "7 Mill Road, Leeds", "bob.okafor@home.example"}
	erinPrivate  = person{"Erin Walsh", "14 Quay Street, Cork", "erin@home.example"}
	kimPrivate   = person{"Kim Lee", "Busan, South Korea", "kim.lee@staff.example.org"}
	jonasPrivate = person{"Jonas Berg", "Bergen, Norway", "jonas.berg@quiet.example"}
)

func newSmallSite(crawlDelay int) *smallSite {
	return &smallSite{
		robots: map[string]string{
			// An agent-specific group first: a crawler must pick the *
			// group for itself, not the first one it reads.
			hostPeople: robotsTxt(hostPeople, crawlDelay, "User-agent: archiver\nDisallow: /\n\n"),
			hostStaff:  robotsTxt(hostStaff, crawlDelay, ""),
			hostBlog:   robotsTxt(hostBlog, crawlDelay, ""),
			hostTeam:   robotsTxt(hostTeam, crawlDelay, ""),
			hostQuiet:  robotsTxt(hostQuiet, crawlDelay, ""),
			hostApp:    robotsTxt(hostApp, crawlDelay, ""),
		},
		pages: map[string]map[string]string{
			hostPeople: {
				"/": peopleIndex(),
				"/p/alice": peopleProfile(hostPeople, alice, "Urban planner.",
					link{"http://blog.example.net/~alice/", "Alice's notebook"}),
				"/p/bob": peopleProfile(hostPeople, bob, "Statistician. Contact details are for members only.",
					link{"/p/carol", "My colleague Carol"},
					link{"/private/bob", "Contact details (members only)"}),
				"/p/carol": peopleProfile(hostPeople, carol, "Data engineer.",
					link{"/", "All profiles"}),
				"/p/dana": peopleProfile(hostPeople, dana, "Architect.",
					link{"/", "All profiles"}),
				"/p/hana": peopleProfile(hostPeople, hana, "Product designer.",
					link{"http://team.example/", "My team"}),
				"/p/zoe": peopleProfile(hostPeople, zoe, "Translator.",
					link{"../", "All profiles"}),
				"/private/bob": peopleProfile(hostPeople, bobPrivate, "Members only."),
			},
			hostStaff: {
				"/": staffDirectory(),
				"/staff/erin.html": staffProfile(erin,
					link{"/private/erin.html", "Home address (staff only)"}),
				"/staff/gus.html": staffProfile(gus,
					link{"/", "Staff directory"},
					link{"http://team.example/", "Team page"}),
				"/staff/dana.html": staffProfile(danaStaff,
					link{"/", "Staff directory"},
					link{"http://people.example/p/dana", "Dana's current profile"}),
				"/staff/nora.html": staffProfile(nora,
					link{"http://team.example/", "Team page"}),
				"/private/erin.html": staffProfile(erinPrivate),
				"/private/kim.html":  staffProfile(kimPrivate),
			},
			hostBlog: {
				"/~alice/": homepage("Alice's notebook",
					"Notes on cities, trains and public space.",
					link{"http://people.example/p/alice", "My profile"}),
				"/~dana/": homepage("Dana builds things",
					"Sketches and site visits.",
					link{"http://staff.example.org/staff/dana.html", "My staff page"}),
				"/~zoe/": homepage("Zoë translates",
					"Literary translation, French and English.",
					link{"http://people.example/p/zoe", "About me"}),
				"/~lena/": homepage("Lena's blog",
					"Posts about running. Friends of this blog:",
					link{"http://people.example/p/alice", "Alice"},
					link{"http://staff.example.org/staff/erin.html", "Erin"},
					link{"/private/drafts", "Drafts"}),
				"/~yuki/": homepage("Yuki's page",
					"Photographs of snow festivals.",
					link{"http://people.example/p/hana", "A friend"}),
				"/private/drafts": homepage("Drafts",
					"Lena Fischer is moving to Berlin, Germany; write to lena@drafts.example."),
			},
			hostTeam: {
				"/":                 teamPage(),
				"/private/salaries": homepage("Salaries", "Hana Sato, Osaka office: confidential."),
			},
			hostQuiet: {
				"/": homepage("Under construction",
					"This site is being rebuilt. Come back later.",
					link{"/private/staff.html", "Staff area"}),
				"/private/staff.html": staffProfile(jonasPrivate),
			},
			hostApp: {
				"/": page("App", "<h1>Profiles</h1>\n<ul class=\"index\">\n"+anchors([]link{
					{"/u/maya", maya.Name}, {"/u/omar", omar.Name}, {"/u/pia", pia.Name},
				})+"</ul>"),
				"/u/maya":          appShell("maya"),
				"/u/omar":          appShell("omar"),
				"/u/pia":           appShell("pia"),
				"/api/u/maya.json": appData(maya),
				"/api/u/omar.json": appData(omar),
				"/api/u/pia.json":  appData(pia),
			},
		},
	}
}

// page wraps a body in a complete HTML document.
func page(title, body string) string {
	return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
		htmlEscape(title) + "</title>\n</head>\n<body>\n" + body + "\n</body>\n</html>\n"
}

func htmlEscape(s string) string { return html.EscapeString(s) }

func anchors(links []link) string {
	var b strings.Builder
	for _, l := range links {
		fmt.Fprintf(&b, "  <li><a href=\"%s\">%s</a></li>\n", htmlEscape(l.Href), htmlEscape(l.Text))
	}
	return b.String()
}

// peopleProfile is layout A. The name sits between line breaks and spaces
// as hand-written HTML often does; the mapping trims it.
func peopleProfile(host string, p person, about string, seeAlso ...link) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<header><a href=\"/\">%s</a></header>\n<div class=\"profile\">\n", host)
	fmt.Fprintf(&b, "  <h1 class=\"fn\">\n    %s\n  </h1>\n", htmlEscape(p.Name))
	fmt.Fprintf(&b, "  <p class=\"location\">%s</p>\n", htmlEscape(p.Location))
	if p.Email != "" {
		fmt.Fprintf(&b, "  <p>Write to <a class=\"email\" href=\"mailto:%s\">%s</a></p>\n",
			htmlEscape(p.Email), htmlEscape(p.Email))
	}
	fmt.Fprintf(&b, "  <p class=\"about\">%s</p>\n</div>\n", htmlEscape(about))
	if len(seeAlso) > 0 {
		b.WriteString("<h2>See also</h2>\n<ul class=\"see-also\">\n" + anchors(seeAlso) + "</ul>\n")
	}
	return page(p.Name+" · "+host, b.String())
}

// peopleIndex lists every public profile of people.example; the header of
// each profile links here.
func peopleIndex() string {
	return page("People", "<h1>People</h1>\n<ul class=\"index\">\n"+anchors([]link{
		{"/p/alice", alice.Name}, {"/p/bob", bob.Name}, {"/p/carol", carol.Name},
		{"/p/dana", dana.Name}, {"/p/hana", hana.Name}, {"/p/zoe", zoe.Name},
	})+"</ul>")
}

// staffProfile is layout B: a definition list. A missing email leaves out
// the whole dt/dd pair.
func staffProfile(p person, links ...link) string {
	var b strings.Builder
	b.WriteString("<h2>Staff profile</h2>\n<dl class=\"profile\">\n")
	fmt.Fprintf(&b, "  <dt>Name</dt><dd>%s</dd>\n", htmlEscape(p.Name))
	fmt.Fprintf(&b, "  <dt>Location</dt>\n  <dd> %s </dd>\n", htmlEscape(p.Location))
	if p.Email != "" {
		fmt.Fprintf(&b, "  <dt>Email</dt><dd>%s</dd>\n", htmlEscape(p.Email))
	}
	b.WriteString("</dl>\n")
	if len(links) > 0 {
		b.WriteString("<div class=\"links\"><ul>\n" + anchors(links) + "</ul></div>\n")
	}
	return page(p.Name+" · Staff", b.String())
}

func staffDirectory() string {
	return page("Staff directory", "<h1>Staff directory</h1>\n<ul>\n"+anchors([]link{
		{"/staff/dana.html", danaStaff.Name}, {"/staff/erin.html", erin.Name},
		{"/staff/gus.html", gus.Name}, {"/staff/nora.html", nora.Name},
	})+"</ul>")
}

// homepage is a personal page with no profile layout: no mapping matches
// it, so it only contributes links.
func homepage(title, text string, links ...link) string {
	body := "<h1>" + htmlEscape(title) + "</h1>\n<p>" + htmlEscape(text) + "</p>\n"
	if len(links) > 0 {
		body += "<ul>\n" + anchors(links) + "</ul>"
	}
	return page(title, body)
}

// teamPage names four colleagues and links to each one's profile: a record
// reaching it must take values only from its own person's profile.
func teamPage() string {
	var b strings.Builder
	b.WriteString("<h1>Our team</h1>\n<ul class=\"team\">\n")
	for _, m := range []struct {
		p    person
		href string
	}{
		{hana, "http://people.example/p/hana"},
		{bob, "http://people.example/p/bob"},
		{gus, "http://staff.example.org/staff/gus.html"},
		{erin, "http://staff.example.org/staff/erin.html"},
	} {
		fmt.Fprintf(&b, "  <li><span class=\"member\">%s</span> (%s) <a href=\"%s\">profile</a></li>\n",
			htmlEscape(m.p.Name), htmlEscape(m.p.Location), htmlEscape(m.href))
	}
	b.WriteString("</ul>\n<p><a href=\"/private/salaries\">Salaries</a></p>")
	return page("Our team", b.String())
}

// appShell is an app.example profile as served: a placeholder and a
// script that loads the person's data and writes the profile, in layout
// A, into the DOM. Only a crawler that runs the script sees any value.
func appShell(slug string) string {
	return page("Profile · "+hostApp, `<div id="app"><p class="loading">Loading…</p></div>
<script>
fetch('/api/u/`+slug+`.json').then(function (r) { return r.json(); }).then(function (p) {
  var app = document.getElementById('app');
  var div = document.createElement('div');
  div.className = 'profile';
  var h = document.createElement('h1');
  h.className = 'fn';
  h.textContent = p.name;
  div.appendChild(h);
  var loc = document.createElement('p');
  loc.className = 'location';
  loc.textContent = p.location;
  div.appendChild(loc);
  if (p.email) {
    var w = document.createElement('p');
    w.appendChild(document.createTextNode('Write to '));
    var a = document.createElement('a');
    a.className = 'email';
    a.href = 'mailto:' + p.email;
    a.textContent = p.email;
    w.appendChild(a);
    div.appendChild(w);
  }
  app.replaceChildren(div);
});
</script>`)
}

// appData is the JSON an app.example profile's script loads.
func appData(p person) string {
	b, _ := json.Marshal(map[string]string{"name": p.Name, "location": p.Location, "email": p.Email})
	return string(b) + "\n"
}

// movedPage is the body of a 301 to href (escaped).
func movedPage(href string) string {
	return page("Moved", "<p>Moved to <a href=\""+href+"\">here</a>.</p>")
}

// SitePlaceholder stands, in SmallSite's NotFound and Moved bodies, for
// what each answer names (escaped for HTML).
const SitePlaceholder = "{{.}}"

// SmallSite returns the small web's content as Start serves it at
// crawlDelay: each host's robots.txt, and its pages by path; and the
// bodies of its answers to a path it lacks (notFoundBody, naming
// "host/path", or "unknown host HOST") and to a directory named without
// its slash (movedBody, naming the path with its slash), with
// SitePlaceholder where those go. The demo serves a snapshot of it
// (package demoweb), which a test holds to this.
func SmallSite(crawlDelay int) (robots map[string]string, pages map[string]map[string]string, notFoundBody, movedBody string) {
	s := newSmallSite(crawlDelay)
	return s.robots, s.pages, string(notFound(SitePlaceholder).body), movedPage(SitePlaceholder)
}
