// Package robots owns robots.txt: reading a file as RFC 9309 says and
// deciding whether a crawler with a given product token may fetch a URL.
// Where the RFC is silent it behaves as Google's open-source robots.txt
// parser, the reference site operators test their files against.
//
// # Data flow
//
// A supervisor fetches a host's /robots.txt and hands the body to Parse
// with its product token (ProductToken of its User-Agent). Parse reads the
// first MaxSize bytes line by line and keeps only what applies to that
// token: the rules of every group naming it, merged, or, when no group
// names it, those of the "*" groups; and the largest Crawl-delay among the
// same groups. The returned Rules answer Allowed for each URL of the host
// and CrawlDelay for the delay between requests.
//
// # Reading a file
//
//   - Lines end in LF, CR or CRLF; a UTF-8 byte order mark (or a prefix of
//     one) at the start is skipped; a line longer than maxLine bytes is cut
//     there.
//   - "#" starts a comment anywhere in a line (so "Disallow: /logs#old"
//     disallows /logs). Space before and after the colon is not
//     significant ("Disallow : /x"). A line without a colon is read when
//     it is exactly two words separated by spaces or tabs
//     ("Disallow /private/"); any other line without one is ignored.
//   - Keys are case-insensitive and recognised by their start, as Google
//     does: "user-agent" (also "useragent" and "user agent"), "allow",
//     "disallow" (also the misspellings "dissallow", "dissalow", "disalow",
//     "diasllow" and "disallaw"), "crawl-delay" (also "crawldelay"). Other
//     records, such as Sitemap, are ignored and do not end a group.
//   - A group is a run of User-agent lines followed by rules; the first
//     Allow or Disallow line after the run ends it, so the next User-agent
//     line starts a new group. Other records between User-agent lines
//     (Crawl-delay, Sitemap) leave them in one group. Rules before any
//     User-agent line belong to no group and are ignored.
//   - A User-agent value names a product token: it is cut at the first
//     character that is not a letter, "_" or "-" ("ExampleBot/2.1" names
//     ExampleBot) and compared with ours whole and case-insensitively
//     ("Example" does not name ExampleBot). "*", alone or followed by
//     space, names every crawler.
//   - A group that names our token applies even with no rules: it then
//     allows everything, and the "*" groups are not consulted.
//   - Crawl-delay is a non-negative number of seconds (fractions allowed);
//     any other value is ignored.
//
// # Matching
//
// A URL is matched by its path and query as sent on the request line. A
// rule's path must start with "/" or "*", else it never matches; an empty
// one matches nothing. "*" matches any run of octets, and "$" anchors the
// end only as a pattern's last character (elsewhere it is a literal "$").
// Comparison is case-sensitive, with percent-encoding normalised as RFC
// 9309 asks:
//
//   - Hex digits are either case: "/%e3%83%84" is "/%E3%83%84".
//   - Octets outside ASCII in a rule stand for their UTF-8
//     percent-encoding: "Allow: /ツ" matches "/%E3%83%84". A target is
//     expected encoded, as every request line is: a raw "/ツ" matches
//     neither rule.
//   - "%2F" and "%3F" in a path are not "/" and "?" ("/a%2Fb" is not
//     "/a/b", "/q%3Fx" is not "/q?x"); in the query they are.
//   - Other encoded ASCII octets that are not unreserved are the octet:
//     "%2A" or "%24" in a rule is a literal "*" or "$", and "%3A%2F%2F" in
//     a query is "://".
//   - An unreserved character (letter, digit, "-", ".", "_", "~") encoded
//     in a target matches a rule spelling it plainly ("/%61dmin" is
//     "/admin"); one encoded in a rule, which URIs should never do,
//     matches only a target encoding it too ("Allow: /%62%61%7A" allows
//     "/%62%61%7A", not "/baz").
//
// The most specific matching rule decides: the one whose pattern has the
// most octets, counted on the normalised pattern (an octet that a URL may
// carry as it is counts one; any other counts three, as its %XX form).
// When an Allow and a Disallow rule are equally specific, Allow wins,
// whatever their order. No matching rule allows, and /robots.txt is
// always allowed. As in Google's parser, "Allow: /dir/index.html" (or
// index.htm…) also allows "/dir/" itself.
package robots
