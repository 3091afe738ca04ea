// Package fetch owns getting one page off the web without letting the web
// hang, flood or fool the process that asked.
//
// A Fetcher is built once per process from a Config and shared by every
// worker; it is safe for concurrent use:
//
//	f := fetch.New(fetch.Config{UserAgent: "backfill/1.0 (+https://backfill.example/about)"})
//	defer f.Close()
//	resp, err := f.Get(ctx, "https://people.example/staff/ada")
//	switch fetch.ClassOf(err) {
//	case "":                  // resp.Body is UTF-8 text
//	case fetch.ClassStatus:   // resp is set too: status, headers, body
//	case fetch.ClassNotHTML:  // resp.Body is the raw binary, resp.ContentType what it really is
//	default:                  // resp is nil; the class says what failed
//	}
//
// # How a request flows
//
// Get checks the URL (its host put in its ASCII form by package hostname,
// the form HostKey and the blacklist use too) and starts the total
// deadline (Config.Timeout), then for each hop:
//
//  1. The transport dials through the Fetcher's own dialer. The host is
//     resolved (Config.Resolve first, then IP literals, then localhost
//     names, then DNS within DNSTimeout), and
//     every address is put to the address guard: loopback, private,
//     CGNAT, link-local, multicast, unspecified and reserved ranges are
//     refused (ClassBlocked) unless AllowLoopback or AllowPrivate admit
//     them. Because the guard sits at dial time it judges DNS answers and
//     redirect targets alike. From the moment a request takes a
//     connection (just before it is written) to its body's end, every
//     read must make progress within IdleTimeout, so a server that stalls
//     mid-stream is cut off; a kept-alive connection waiting in the pool
//     has no deadline, so a deadline never falls on the next request
//     (conn.go). Nothing below the Fetcher sends a request twice
//     (exchange.go); Stats counts any repeat all the same.
//  2. TLS is verified (TLSTimeout) unless InsecureTLS, in which case the
//     problem is recorded in Response.TLSError. A server that offers
//     HTTP/2 in the handshake (ALPN) is spoken to in HTTP/2, any other in
//     HTTP/1.1, under the same limits. The response header must
//     arrive within HeaderTimeout and stay under MaxHeaderBytes and
//     MaxHeaders.
//  3. A 3xx with a Location is a hop: resolved against the current URL,
//     checked against the visited set (loops) and MaxRedirects, and
//     dialed again through the guard. A 3xx without Location is
//     ClassRedirect.
//  4. The body is read in chunks to at most MaxBody bytes (Truncated says
//     there was more). gzip, deflate and br are decoded here, under the
//     same cap; a body that expands past it at more than MaxRatio is a
//     decompression bomb (ClassTooLarge).
//  5. The bytes are sniffed: magic numbers and net/http's sniffer unmask
//     images, PDFs and archives whatever their declared type
//     (ClassNotHTML). Text is decoded to UTF-8 from the byte order mark,
//     the Content-Type charset or <meta>, unless the bytes contradict the
//     declaration; undeclared text is detected (windows-1251 and
//     Shift_JIS among others). Invalid bytes and NULs become U+FFFD.
//  6. A 2xx page whose <meta http-equiv=refresh> (or Refresh header)
//     points elsewhere within MaxRefreshWait is a hop like a redirect.
//
// Every failure is an *Error whose Class callers branch on (retry, back
// off, count in the run summary); the message names the URL and the stage.
// The caller's cancellation is ClassCanceled; any deadline is ClassTimeout,
// except one that passes while the resolver is silent: a name that cannot
// be resolved is ClassDNS however the lookup failed.
//
// IsBinaryPath lets link discovery drop links to binary files before a
// request is spent on them.
//
// The transport keeps connections alive (one per host, in use or idle, so
// one TCP and TLS handshake per host), since the supervisor sends one
// request per host at a time, for the first Config.KeptHosts hosts; a
// request to any other host asks for its connection to be closed after
// the answer and goes through a transport that keeps nothing, so idle
// connections are bounded whatever the hosts in the crawl's round
// (keepalive.go). Such a host's connections after its first resume the
// TLS session its server handed out, for the first Config.KeptSessions
// hosts: one full handshake per host (sessions.go). Close releases the
// idle ones. An http.Transport also keeps state for every host it was
// ever asked for, which a crawl of millions of failing hosts would pile
// up, so after Config.MaxTransportHosts distinct hosts the Fetcher moves
// on to a fresh one; requests under way on the old one finish there
// (transport.go). A DNS lookup abandoned at DNSTimeout finishes in the
// background within the system resolver's own timeout.
package fetch
