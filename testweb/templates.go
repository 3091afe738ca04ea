package testweb

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// The templates web: one host per profile template, for learning mappings
// from examples and measuring what was learned against the hand-written
// mappings (templates.json in the bundled mappings). Each template
// is a way real sites publish a person's details, with the decoys real
// pages have: another block labelled like the profile's, the site's own
// contact address, other people's names, rows in another order from one
// profile to the next, and details some profiles leave out.
//
//	directory.example     list:   a <dl> of dt/dd pairs, in varying order
//	registry.example.org  table:  th/td rows, in varying order
//	club.example.net      prose:  "About NAME", "NAME is based in CITY.",
//	                              an email written "name [at] host [dot] tld"
//	spa.example           jsblob: an empty page and a script assigning the
//	                              profile as a JSON object to a variable
//	press.example         jsonld: a schema.org Person in JSON-LD, nested in
//	                              a ProfilePage, beside its Organization
//
// Every host's robots.txt disallows /private/ and sets no Crawl-delay.

// Template names, in the order Templates lists them.
const (
	TemplateList   = "list"
	TemplateTable  = "table"
	TemplateProse  = "prose"
	TemplateJSBlob = "jsblob"
	TemplateJSONLD = "jsonld"
)

// DefaultTemplateProfiles is TemplatesOptions.PerTemplate's default.
const DefaultTemplateProfiles = 50

// TemplatesOptions configures the web started by StartTemplates.
type TemplatesOptions struct {
	PerTemplate int           // profiles per template, default DefaultTemplateProfiles, at most 999
	Latency     time.Duration // added before every response
	Logger      *slog.Logger  // the HTTP server's own errors; nil discards
}

// TemplateProfile is one profile page of the templates web and what it
// shows. An empty Location, Email or Website is absent from the page.
type TemplateProfile struct {
	Template string
	URL      string
	Name     string
	Location string
	Email    string
	Website  string
}

// Templates lists the template names.
func Templates() []string {
	return []string{TemplateList, TemplateTable, TemplateProse, TemplateJSBlob, TemplateJSONLD}
}

// templateSite is where a template's profiles live.
type templateSite struct {
	template string
	host     string
	path     string // the profile path with %s for the slug
}

var templateSites = []templateSite{
	{TemplateList, "directory.example", "/people/%s"},
	{TemplateTable, "registry.example.org", "/members/%s.html"},
	{TemplateProse, "club.example.net", "/m/%s/"},
	{TemplateJSBlob, "spa.example", "/u/%s"},
	{TemplateJSONLD, "press.example", "/authors/%s"},
}

// TemplateProfiles returns the profiles of a templates web with
// perTemplate profiles per template (0 for the default), template by
// template. The same arguments always give the same profiles.
func TemplateProfiles(perTemplate int) []TemplateProfile {
	if perTemplate <= 0 {
		perTemplate = DefaultTemplateProfiles
	}
	var out []TemplateProfile
	for ti, s := range templateSites {
		for i := 1; i <= perTemplate; i++ {
			out = append(out, templateProfile(s, ti, i))
		}
	}
	return out
}

// templateProfile is profile i of template number ti: a person drawn from
// the large web's names and cities, with some details left out: every
// seventh has no email, every fifth no website, every eleventh no location.
func templateProfile(s templateSite, ti, i int) TemplateProfile {
	k := ti*97 + i*13
	first, last := largeFirst[k%len(largeFirst)], largeLast[(k/len(largeFirst)+i)%len(largeLast)]
	slug := fmt.Sprintf("%s-%s-%03d", strings.ToLower(first), strings.ToLower(last), i)
	p := TemplateProfile{
		Template: s.template,
		URL:      "http://" + s.host + fmt.Sprintf(s.path, slug),
		Name:     first + " " + last,
		Location: largeCity[(k+i)%len(largeCity)],
		Email:    fmt.Sprintf("%s.%s%d@mail.example", strings.ToLower(first), strings.ToLower(last), i),
		Website:  fmt.Sprintf("https://%s%s%d.example/", strings.ToLower(first), strings.ToLower(last), i),
	}
	if i%7 == 3 {
		p.Email = ""
	}
	if i%5 == 1 {
		p.Website = ""
	}
	if i%11 == 4 {
		p.Location = ""
	}
	return p
}

// StartTemplates starts the templates web on 127.0.0.1 at a free port.
func StartTemplates(opts TemplatesOptions) (*Web, error) {
	if opts.PerTemplate == 0 {
		opts.PerTemplate = DefaultTemplateProfiles
	}
	if opts.PerTemplate < 0 || opts.PerTemplate > 999 {
		return nil, fmt.Errorf("testweb: %d profiles per template: want 1..999", opts.PerTemplate)
	}
	if opts.Latency < 0 {
		return nil, fmt.Errorf("testweb: negative latency %s", opts.Latency)
	}
	s := &templatesSite{pages: map[string]map[string]TemplateProfile{}}
	for _, ts := range templateSites {
		s.pages[ts.host] = map[string]TemplateProfile{}
	}
	profiles := TemplateProfiles(opts.PerTemplate)
	for _, p := range profiles {
		host, path := splitURL(p.URL)
		s.pages[host][path] = p
	}
	s.profiles = profiles
	return start(s, "", opts.Latency, opts.Logger)
}

// splitURL splits "http://host/path" into host and path.
func splitURL(u string) (host, path string) {
	rest := strings.TrimPrefix(u, "http://")
	i := strings.IndexByte(rest, '/')
	return rest[:i], rest[i:]
}

type templatesSite struct {
	pages    map[string]map[string]TemplateProfile // host → path → profile
	profiles []TemplateProfile
}

func (s *templatesSite) hosts() []string {
	h := make([]string, 0, len(templateSites))
	for _, ts := range templateSites {
		h = append(h, ts.host)
	}
	return h
}

const templatesRobots = "User-agent: *\nDisallow: /private/\n"

func (s *templatesSite) serve(host, path string) (response, bool) {
	pages, ok := s.pages[host]
	if !ok {
		return response{}, false
	}
	if path == "/robots.txt" {
		return response{status: http.StatusOK, ctype: textType, body: []byte(templatesRobots)}, true
	}
	p, ok := pages[path]
	if !ok {
		return notFound(host + path), true
	}
	return response{status: http.StatusOK, ctype: htmlType, body: []byte(s.render(p))}, true
}

// neighbours are two other profiles of the same template, for the "other
// people" decoys every template shows.
func (s *templatesSite) neighbours(p TemplateProfile) []TemplateProfile {
	var same []TemplateProfile
	for _, q := range s.profiles {
		if q.Template == p.Template {
			same = append(same, q)
		}
	}
	for i, q := range same {
		if q.URL == p.URL {
			return []TemplateProfile{same[(i+1)%len(same)], same[(i+len(same)-1)%len(same)]}
		}
	}
	return nil
}

func (s *templatesSite) render(p TemplateProfile) string {
	n := s.neighbours(p)
	switch p.Template {
	case TemplateList:
		return listProfile(p, n)
	case TemplateTable:
		return tableProfile(p, n)
	case TemplateProse:
		return proseProfile(p, n)
	case TemplateJSBlob:
		return jsblobProfile(p, n)
	}
	return jsonldProfile(p, n)
}

// slugOf is the last path segment of a profile URL, without extension.
func slugOf(u string) string {
	u = strings.TrimSuffix(u, "/")
	u = u[strings.LastIndexByte(u, '/')+1:]
	return strings.TrimSuffix(u, ".html")
}

// rows are a profile's labelled details, in an order that turns with the
// profile (so that a rule by position fails where one by label holds),
// without the ones it leaves out.
func rows(p TemplateProfile, website func(string) string) [][2]string {
	all := [][2]string{{"Name", htmlEscape(p.Name)}}
	if p.Location != "" {
		all = append(all, [2]string{"Location", htmlEscape(p.Location)})
	}
	if p.Email != "" {
		all = append(all, [2]string{"Email", htmlEscape(p.Email)})
	}
	if p.Website != "" {
		all = append(all, [2]string{"Website", website(p.Website)})
	}
	turn := len(p.Name) % len(all)
	return append(all[turn:], all[:turn]...)
}

func websiteLink(u string) string {
	shown := strings.TrimSuffix(strings.TrimPrefix(u, "https://"), "/")
	return fmt.Sprintf("<a href=\"%s\">%s</a>", htmlEscape(u), htmlEscape(shown))
}

// listProfile: a labelled list, and the office's own list labelled alike.
func listProfile(p TemplateProfile, others []TemplateProfile) string {
	var b strings.Builder
	b.WriteString("<header><a href=\"/\">The Directory</a></header>\n<main>\n<dl class=\"profile\">\n")
	for _, r := range rows(p, websiteLink) {
		fmt.Fprintf(&b, "  <dt>%s</dt>\n  <dd>%s</dd>\n", r[0], r[1])
	}
	b.WriteString("</dl>\n<h2>Recently joined</h2>\n<ul class=\"recent\">\n")
	for _, o := range others {
		fmt.Fprintf(&b, "  <li><a href=\"/people/%s\">%s</a> (%s)</li>\n", slugOf(o.URL), htmlEscape(o.Name), htmlEscape(o.Location))
	}
	b.WriteString("</ul>\n</main>\n<aside>\n<h2>Our office</h2>\n<dl class=\"office\">\n" +
		"  <dt>Location</dt>\n  <dd>Geneva, Switzerland</dd>\n  <dt>Email</dt>\n  <dd>office@directory.example</dd>\n</dl>\n</aside>")
	return page(p.Name+" – The Directory", b.String())
}

// tableProfile: a two-column table, beside the office's own table.
func tableProfile(p TemplateProfile, others []TemplateProfile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<h1>Member record</h1>\n<table class=\"member\">\n")
	for _, r := range rows(p, websiteLink) {
		fmt.Fprintf(&b, "  <tr><th>%s</th><td>%s</td></tr>\n", r[0], r[1])
	}
	b.WriteString("</table>\n<h2>Registry office</h2>\n<table class=\"office\">\n" +
		"  <tr><th>Location</th><td>Main Street 1, Bern</td></tr>\n  <tr><th>Email</th><td><a href=\"mailto:registrar@registry.example.org\">registrar@registry.example.org</a></td></tr>\n</table>\n")
	b.WriteString("<p>Other members: ")
	for i, o := range others {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "<a href=\"/members/%s.html\">%s</a>", slugOf(o.URL), htmlEscape(o.Name))
	}
	b.WriteString("</p>")
	return page("Registry: "+p.Name, b.String())
}

// obfuscate writes an address the way pages hide it from harvesters:
// "ada.moreno3 [at] mail [dot] example".
func obfuscate(email string) string {
	local, domain, _ := strings.Cut(email, "@")
	return local + " [at] " + strings.ReplaceAll(domain, ".", " [dot] ")
}

// proseProfile: the details in sentences, the address obfuscated, and the
// webmaster's address hidden the same way.
func proseProfile(p TemplateProfile, others []TemplateProfile) string {
	first, _, _ := strings.Cut(p.Name, " ")
	var b strings.Builder
	fmt.Fprintf(&b, "<article>\n<h2>About %s</h2>\n<p>%s joined the club in %d and writes about birds, maps and old bicycles.</p>\n",
		htmlEscape(p.Name), htmlEscape(first), 2001+len(p.Name)%20)
	if p.Location != "" {
		fmt.Fprintf(&b, "<p>%s is based in %s.</p>\n", htmlEscape(first), htmlEscape(p.Location))
	}
	if p.Email != "" {
		fmt.Fprintf(&b, "<p>You can write to %s: %s.</p>\n", htmlEscape(first), htmlEscape(obfuscate(p.Email)))
	}
	if p.Website != "" {
		fmt.Fprintf(&b, "<p>More at <a class=\"homepage\" href=\"%s\">%s's homepage</a>.</p>\n", htmlEscape(p.Website), htmlEscape(first))
	}
	fmt.Fprintf(&b, "<p>%s often rides with %s and %s.</p>\n</article>\n", htmlEscape(first), htmlEscape(others[0].Name), htmlEscape(others[1].Name))
	b.WriteString("<footer><p>Webmaster: webmaster [at] club [dot] example [dot] net</p></footer>")
	return page(p.Name+" | Club", b.String())
}

// jsblobProfile: nothing but a script that hands the profile to the page's
// code as a JavaScript object literal (JSON) assigned to a variable.
func jsblobProfile(p TemplateProfile, others []TemplateProfile) string {
	type contact struct {
		Email    string `json:"email,omitempty"`
		Homepage string `json:"homepage,omitempty"`
	}
	state := map[string]any{
		"user": map[string]any{
			"displayName": p.Name,
			"city":        p.Location,
			"contact":     contact{p.Email, p.Website},
		},
		"suggested": []map[string]string{{"displayName": others[0].Name, "city": others[0].Location}, {"displayName": others[1].Name, "city": others[1].Location}},
		"site":      map[string]string{"support": "help@spa.example", "city": "Berlin, Germany"},
	}
	if p.Location == "" {
		delete(state["user"].(map[string]any), "city")
	}
	data, _ := json.Marshal(state)
	body := "<div id=\"app\">Loading…</div>\n" +
		"<script>var analytics = {\"id\": \"UA-000\", \"page\": \"profile\"};</script>\n" +
		"<script>window.__STATE__ = " + strings.ReplaceAll(string(data), "</", "<\\/") + ";</script>\n" +
		"<script src=\"/static/app.js\"></script>"
	return page("Profile", body)
}

// jsonldProfile: a schema.org Person inside a ProfilePage, next to the
// publisher, an Organization with its own name, address and email.
func jsonldProfile(p TemplateProfile, others []TemplateProfile) string {
	person := map[string]any{"@type": "Person", "name": p.Name}
	if p.Email != "" {
		person["email"] = "mailto:" + p.Email
	}
	if p.Website != "" {
		person["url"] = p.Website
	}
	if p.Location != "" {
		person["homeLocation"] = map[string]any{"@type": "Place", "name": p.Location}
	}
	person["knows"] = []map[string]any{{"@type": "Person", "name": others[0].Name}}
	ld := map[string]any{
		"@context":   "https://schema.org",
		"@type":      "ProfilePage",
		"mainEntity": person,
		"publisher": map[string]any{"@type": "Organization", "name": "Press Example", "email": "desk@press.example",
			"url": "https://press.example/", "location": map[string]any{"@type": "Place", "name": "Leeds, UK"}},
	}
	data, _ := json.MarshalIndent(ld, "", "  ")
	var b strings.Builder
	b.WriteString("<script type=\"application/ld+json\">\n" + strings.ReplaceAll(string(data), "</", "<\\/") + "\n</script>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n<p class=\"byline\">Author at Press Example. Also writing here: %s.</p>", htmlEscape(p.Name), htmlEscape(others[1].Name))
	return page(p.Name+" — Press Example", b.String())
}
