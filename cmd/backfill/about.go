package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"backfill/about"
)

// cmdAbout renders the page the User-Agent's contact URL points to.
func cmdAbout(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("about", stderr)
	var p about.Page
	fs.StringVar(&p.Contact, "contact", defaultContact, "the URL where you will host the page: the one your crawls send in the User-Agent (--contact of run)")
	fs.StringVar(&p.Operator, "operator", "", "who runs the crawl: your name or your organisation's (required)")
	fs.StringVar(&p.Email, "email", "", "the address site operators write to (required)")
	fs.StringVar(&p.Purpose, "purpose", "", "why you crawl, in a sentence or two (default: a general description)")
	fs.StringVar(&p.UserAgent, "user-agent", "", "the User-Agent your crawls send, if you set --user-agent (default: backfill's, with --contact)")
	tmpl := fs.String("template", "", "your own copy of the page's template to fill instead of the bundled one (--write-template writes one)")
	writeTmpl := fs.String("write-template", "", "write the bundled template to this file, to edit, and exit")
	out := fs.String("o", "-", "the page's file, or - for standard output")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *writeTmpl != "" {
		if err := os.WriteFile(*writeTmpl, about.Template, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s: edit it, then: backfill about --template %s --contact URL --operator NAME --email ADDRESS -o about.html\n", *writeTmpl, *writeTmpl)
		return nil
	}
	if p.UserAgent == "" {
		p.UserAgent = "backfill/" + version + " (+" + p.Contact + ")"
	}
	var t []byte
	if *tmpl != "" {
		var err error
		if t, err = os.ReadFile(*tmpl); err != nil {
			return fmt.Errorf("--template: %w", err)
		}
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *out == "-" {
		return about.Render(stdout, t, p)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	err = about.Render(f, t, p)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(*out)
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: host it at %s (the URL in your crawls' User-Agent)\n", *out, p.Contact)
	return nil
}
