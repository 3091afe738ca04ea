package testweb

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// The pages of the people web, written from its model (people.go):
// profiles in their layouts, host indexes, team pages and homepages.

// A 1×1 PNG, served for every image and the favicon: only browsers ask.
var (
	peopleImage = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x03\x00\x08\xfc\x02\xfe\xa7\x9a\xa0\xa0\x00\x00\x00\x00IEND\xaeB`\x82")
	peopleIcon  = peopleImage
)

// peoplePageHTML wraps a body in a document whose head names the favicon,
// as real sites do.
func peoplePageHTML(title, head, body string) string {
	return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + htmlEscape(title) +
		"</title>\n<link rel=\"icon\" href=\"/favicon.ico\">\n" + head + "</head>\n<body>\n" + body + "\n</body>\n</html>\n"
}

func (s *peopleSite) index(host string, links []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<h1>People of %s</h1>\n<ul class=\"index\">\n", host)
	for _, l := range links {
		fmt.Fprintf(&b, "  <li><a href=\"%s\">%s</a></li>\n", htmlEscape(l[strings.Index(l, "/people/"):]), htmlEscape(s.person(s.bySlug[path.Base(l)]).name))
	}
	b.WriteString("</ul>")
	return peoplePageHTML("People of "+host, "", b.String())
}

func (s *peopleSite) team(host, p string, links []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<h1>Team %s</h1>\n<p>The people of this team, with their profiles.</p>\n<ul class=\"team\">\n", path.Base(p))
	for _, l := range links {
		m := s.person(s.bySlug[path.Base(l)])
		// The team page names each member and their job, but no mapping
		// matches it: its values are no one's.
		fmt.Fprintf(&b, "  <li><span class=\"member\">%s</span>, %s: <a href=\"%s\">profile</a></li>\n",
			htmlEscape(m.name), htmlEscape(m.title), htmlEscape(l))
	}
	b.WriteString("</ul>")
	return peoplePageHTML("Team "+path.Base(p)+" · "+host, "", b.String())
}

func (s *peopleSite) home(p string, links []string) string {
	slug := strings.TrimPrefix(p, "/home/")
	m := s.person(s.bySlug[slug])
	var b strings.Builder
	fmt.Fprintf(&b, "<h1>Welcome</h1>\n<p>This is the homepage of %s. Notes, photographs and a few links.</p>\n<ul class=\"links\">\n", htmlEscape(m.name))
	for _, l := range links {
		fmt.Fprintf(&b, "  <li><a href=\"%s\">%s</a></li>\n", htmlEscape(l), "About me")
	}
	b.WriteString("</ul>")
	return peoplePageHTML(m.name+" · home", "", b.String())
}

// profile renders m's profile in its layout. links are the index and the
// "See also" profiles, in that order.
func (s *peopleSite) profile(m peopleMember, links []string) string {
	var b strings.Builder
	head := ""
	b.WriteString("<header><a href=\"/\">All people</a></header>\n")
	switch m.layout {
	case LayoutList:
		b.WriteString("<dl class=\"person\">\n")
		for _, kv := range [][2]string{{"Name", m.name}, {"Position", m.title}, {"City", m.location}, {"Email", m.email}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, "  <dt>%s</dt>\n  <dd>%s</dd>\n", kv[0], htmlEscape(kv[1]))
			}
		}
		b.WriteString("</dl>\n")
	case LayoutTable:
		b.WriteString("<table class=\"profile\">\n")
		for _, kv := range [][2]string{{"Name", m.name}, {"Role", m.title}, {"Based in", m.location}, {"E-mail", m.email}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, "  <tr><th>%s</th><td> %s </td></tr>\n", kv[0], htmlEscape(kv[1]))
			}
		}
		b.WriteString("</table>\n")
	case LayoutProse:
		article := "a"
		if strings.ContainsRune("aeiou", rune(m.title[0])) {
			article = "an"
		}
		fmt.Fprintf(&b, "<article class=\"bio\">\n  <h1>%s</h1>\n  <p class=\"story\">%s works as %s %s in %s.</p>\n",
			htmlEscape(m.name), htmlEscape(m.name), article, htmlEscape(m.title), htmlEscape(m.location))
		if m.email != "" {
			local, domain, _ := strings.Cut(m.email, "@")
			domain = strings.ReplaceAll(domain, ".", " [dot] ")
			fmt.Fprintf(&b, "  <p class=\"contact\">Write to %s [at] %s.</p>\n", htmlEscape(local), htmlEscape(domain))
		}
		b.WriteString("</article>\n")
	case LayoutJS:
		data, _ := json.Marshal(map[string]string{"name": m.name, "title": m.title, "location": m.location, "email": m.email})
		b.WriteString("<div id=\"root\"></div>\n<noscript><p>This profile needs JavaScript. Please enable JavaScript to see it.</p></noscript>\n")
		b.WriteString("<img class=\"logo\" src=\"/img/logo.png\" alt=\"\">\n")
		fmt.Fprintf(&b, peopleScript, base64.StdEncoding.EncodeToString(data), m.slug)
	case LayoutBlob:
		b.WriteString(s.blob(m))
	case LayoutJSONLD:
		address := map[string]string{"@type": "PostalAddress", "addressLocality": m.location}
		if s.structured {
			address["addressLocality"], address["addressCountry"], _ = strings.Cut(m.location, ", ")
		}
		ld := map[string]any{"@context": "https://schema.org", "@type": "Person", "name": m.name, "jobTitle": m.title, "address": address}
		if m.email != "" {
			ld["email"] = "mailto:" + m.email
		}
		data, _ := json.Marshal(ld)
		head = "<script type=\"application/ld+json\">" + string(data) + "</script>\n"
		fmt.Fprintf(&b, "<main><h1 class=\"headline\">%s</h1>\n<p>Profile page.</p></main>\n", htmlEscape(m.name))
	}
	if len(links) > 1 {
		b.WriteString("<h2>See also</h2>\n<ul class=\"see-also\">\n")
		for _, l := range links[1:] {
			fmt.Fprintf(&b, "  <li><a href=\"%s\">%s</a></li>\n", htmlEscape(l), htmlEscape(s.person(s.bySlug[path.Base(l)]).name))
		}
		b.WriteString("</ul>\n")
	}
	if s.deadSites > 0 {
		site := DeadSiteName(int(mix(uint64(s.bySlug[m.slug])) % uint64(s.deadSites)))
		fmt.Fprintf(&b, "<p class=\"website\">Website: <a href=\"http://%s/\">%s</a></p>\n", site, site)
	}
	title := m.name + " · " + peopleHost(m.host)
	if m.layout == LayoutJS || m.layout == LayoutBlob {
		title = "Profile · " + peopleHost(m.host) // the app's shell names no one
	}
	return peoplePageHTML(title, head, b.String())
}

// blob is the data of a LayoutBlob profile, as a server-rendered app
// sends it: the person (the location in pieces), and the host's office
// in the same shape, a decoy.
func (s *peopleSite) blob(m peopleMember) string {
	city, country, _ := strings.Cut(m.location, ", ")
	hq, hqCountry, _ := strings.Cut(peopleCity[m.host%len(peopleCity)], ", ")
	person := map[string]any{"fullName": m.name, "role": m.title, "city": city, "country": country, "slug": m.slug}
	if m.email != "" {
		person["contact"] = map[string]string{"email": m.email}
	}
	data, _ := json.Marshal(map[string]any{
		"props": map[string]any{"pageProps": map[string]any{"person": person,
			"office": map[string]string{"city": hq, "country": hqCountry, "email": "office@" + peopleHost(m.host)}}},
		"page": "/people/[slug]", "buildId": "b" + strconv.Itoa(m.host%7)})
	return "<div id=\"__next\"></div>\n<script id=\"__NEXT_DATA__\" type=\"application/json\">" + string(data) + "</script>\n"
}

// peopleScript writes a JavaScript profile into the DOM from its data
// (base64 of UTF-8 JSON), with a portrait the browser then loads.
const peopleScript = `<script>
(function () {
  var raw = atob('%s');
  var bytes = new Uint8Array(raw.length);
  for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  var p = JSON.parse(new TextDecoder().decode(bytes));
  var card = document.createElement('section');
  card.className = 'card';
  function add(tag, cls, text) {
    var e = document.createElement(tag);
    e.className = cls;
    e.textContent = text;
    card.appendChild(e);
    return e;
  }
  add('h2', 'card-name', p.name);
  add('p', 'card-role', p.title);
  add('p', 'card-place', p.location);
  if (p.email) add('a', 'card-mail', p.email).href = 'mailto:' + p.email;
  var img = document.createElement('img');
  img.src = '/img/portrait-%s.png';
  img.alt = '';
  card.appendChild(img);
  document.getElementById('root').replaceChildren(card);
})();
</script>`
