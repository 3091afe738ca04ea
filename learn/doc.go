// Package learn induces site mappings from examples: records whose fields
// are already known (the teachers) and their own pages. Its output is
// ordinary mapping files, in the format etl loads, for a person to review
// and a crawl to use only when told to (run --use-learned).
//
// Data flows in five steps:
//
//   - Pages. Learn takes each teacher's links (minus those that are values
//     of the fields being learned: a record lacking the field would not
//     have them), groups them by host, leaves out hosts with fewer teachers
//     than Options.MinTeachers, and fetches at most Options.PagesPerHost
//     pages of each host through a Source, one page at a time per host.
//     PoliteSource is the Source a command uses: robots.txt first, then the
//     Crawl-delay (or its own Delay) between two requests to a host, as a
//     crawl would. Given a crawl's host cache (the store's), its delay also
//     runs from the crawl's last request to the host, and its own requests
//     are recorded there for the crawl. KeptSource puts a PageCache in
//     front of it: a page kept there (PageCacheFile in a state directory:
//     compressed bodies keyed by URL with their fetch time, bounded per
//     host and in bytes) is read rather than fetched while younger than
//     the recrawl age. Nothing of the crawl's own state is read, so
//     learning works beside a running crawl.
//     With Options.Depth, a teacher's page is looked for within that many
//     links of its own links instead (depth.go): level by level through
//     the same Source, the pages of hosts many teachers reach first, a
//     teacher followed no further once a page shows all it knows, a
//     page's parsed document let go once the page is scored. Its page
//     is the one that names it (shows its match key) and shows the most
//     of its other values, and it is its page for the fields it shows:
//     one showing most of them teaches, one showing a value or two
//     teaches where its group's learned match key reads the teacher's
//     name (members.go, fields.go).
//   - Groups. The pages are grouped by host (numbered hosts of one site,
//     folk-0001 and folk-0002, as one; hosts reached by address never)
//     and the shape of their URL (group.go); each group's url_pattern is
//     induced from its URLs (shared segments literal, the page's own
//     segments generalized). A group learns its match key first, then
//     every other field from the pages that show it, each field on its
//     own: one that cannot be learned says why and stops none of the
//     others (fields.go).
//   - Locating. For each field, each teacher page is parsed as etl parses
//     it (html.Parse's tree) and searched for the teacher's value
//     (locate.go): the deepest elements whose text holds it, text nodes,
//     attributes (an href, a mailto:, a meta content), JSON-LD, JSON in
//     scripts, or the JSON of a JSON response. Values are compared under
//     the field's kind (value.go): text with white space folded, a phone
//     number as its digits and + (phone.go), a date at its own precision
//     and a number as a number (quantity.go), an address, a URL; the
//     match key as attribution compares it; Options.Types declares a
//     kind. Addresses are found obfuscated too ("name [at] host [dot]
//     org"), and a text the page holds nowhere whole in its pieces, a
//     city and a country in two JSON-LD properties (composite.go).
//   - Inducing. Every place proposes candidate rules in the processor
//     language (candidate.go) in families, from the most stable
//     (rule.go): what the site publishes for machines (JSON-LD,
//     microdata and RDFa, JSON in a script, meta tags), then a label the
//     page prints (a dt, a th, "Location:", the words before the value),
//     stable ids, classes and attributes, and last the element's
//     position; a regular expression (or the email processor) takes the
//     value out of a longer text, after every rule that takes a whole
//     element or value; a concat joins the rules of a value's pieces.
//     Words of the teacher's own values never serve as anchors: they are
//     the record's, not the template's. Candidates run through etl on the
//     teacher pages in preference order, in growing batches, as far as
//     the choice needs (induce.go), and the preferred one that yields
//     exactly the teacher's value on every page showing it, as the page
//     writes it, and nothing else where it is absent, is the rule. When
//     none fits every page (one URL shape, several layouts), several
//     rules cover them, each never wrong on any teacher page, and the
//     group writes one mapping per layout (write.go). A field whose
//     values are lists is compared as sets of items, whatever separates
//     them (list.go).
//   - Validating. k-fold cross-validation repeats the choice without each
//     fold's teachers and scores the rule on them; when the rule learned
//     without a fold errs or misses on it, each family is chosen and
//     cross-validated on its own, and the best held-out precision, then
//     recall, then the earlier family wins. A field is written unless a
//     held-out teacher got a wrong value; a held-out miss is reported
//     (fewer teachers would have learned less) but does not refuse the
//     rule learned from all, so more teachers never learn less. A group
//     whose match key was not learned writes no mapping unless no key
//     was asked for. Too few teachers, a value never found, a value found
//     with no rule that takes exactly it: each is reported per field with
//     the reason, and each teacher that taught nothing with the page that
//     showed the most of it (report.go).
//
// Result.Write writes one mapping file per group that learned a field —
// the evidence (teacher pages, held-out precision and recall, the kind of
// rule) in the descriptions of the mapping and its fields, since JSON has
// no comments — with fixtures made of teacher pages for `mappings test`,
// each expecting what its page says, and the whole report (fields not
// learned included) in ReportFile. Everything written is loaded and its
// fixtures run before it is written.
//
//	res, err := learn.Learn(ctx, teachers, &learn.PoliteSource{…}, learn.Options{
//		Fields: []string{"location", "email"}, MatchKey: "name"})
//	if err != nil { … }
//	res.Report(os.Stdout)
//	files, err := res.Write("learned")
//
// Learn is safe to call concurrently; a Result is not modified after Learn
// returns.
package learn
