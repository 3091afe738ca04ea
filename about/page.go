// Package about renders the page that tells site operators what the
// crawler does and how to reach the person who runs it: the page its
// contact URL, sent in every request's User-Agent, points to. The page is
// a template the operator of a crawl fills with Page's values (`backfill
// about`, or `backfill provision render` from the inventory's [about]
// table), served at the contact URL as a static file.
//
//	p := about.Page{Contact: "https://example.org/crawler", Operator: "Example Lab", Email: "crawl@example.org"}
//	if err := p.Validate(); err != nil { … }
//	err := about.Render(w, nil, p) // nil: the bundled template
package about

import (
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/mail"
	"net/url"
	"strings"
)

// Template is the bundled page, an html/template over Page: a copy may be
// edited and given to Render instead.
//
//go:embed page.html
var Template []byte

// Page is what the page says.
type Page struct {
	Contact   string // the URL the page is served at, sent in the User-Agent
	Operator  string // who runs the crawl: a person or an organisation
	Email     string // how to reach them
	Purpose   string // why they crawl, in their words; optional
	UserAgent string // the User-Agent the crawler sends; default derived from Contact
}

// ErrPlaceholderContact is wrapped by Validate's error for a contact URL
// still on the reserved .invalid domain of the defaults: no site operator
// could reach it.
var ErrPlaceholderContact = errors.New("the contact URL is still the .invalid placeholder")

// Validate refuses a page that would not let a site operator reach the
// crawl's operator: no usable contact URL (or the .invalid placeholder),
// no operator, no email address.
func (p Page) Validate() error {
	var errs []error
	u, err := url.Parse(p.Contact)
	switch {
	case p.Contact == "":
		errs = append(errs, errors.New("contact: missing: the URL the page is served at (--contact)"))
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		errs = append(errs, fmt.Errorf("contact %q: want an absolute http or https URL", p.Contact))
	case IsPlaceholder(p.Contact):
		errs = append(errs, fmt.Errorf("contact %q: %w; give the URL where you will host this page", p.Contact, ErrPlaceholderContact))
	}
	if strings.TrimSpace(p.Operator) == "" {
		errs = append(errs, errors.New("operator: missing: who runs the crawl"))
	}
	if a, err := mail.ParseAddress(p.Email); err != nil || a.Name != "" {
		errs = append(errs, fmt.Errorf("email %q: want an address site operators can write to, like crawl@example.org", p.Email))
	}
	return errors.Join(errs...)
}

// IsPlaceholder reports a contact URL on the reserved .invalid domain.
func IsPlaceholder(contact string) bool {
	u, err := url.Parse(contact)
	if err != nil {
		return false
	}
	h := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	return h == "invalid" || strings.HasSuffix(h, ".invalid")
}

// Render validates p and writes the page from tmpl (nil: Template).
func Render(w io.Writer, tmpl []byte, p Page) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("about page: %w", err)
	}
	if tmpl == nil {
		tmpl = Template
	}
	t, err := template.New("about").Option("missingkey=error").Parse(string(tmpl))
	if err != nil {
		return fmt.Errorf("about page: template: %w", err)
	}
	if p.UserAgent == "" {
		p.UserAgent = "backfill (+" + p.Contact + ")"
	}
	if err := t.Execute(w, p); err != nil {
		return fmt.Errorf("about page: template: %w", err)
	}
	return nil
}
