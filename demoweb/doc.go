// Package demoweb serves the web `backfill demo` crawls: the small
// fixture web of package testweb (people.example, staff.example.org,
// blog.example.net, team.example, quiet.example, app.example) as a static
// snapshot, with the sample records and the truth a correct crawl ends
// with. The snapshot (snapshot.json, embedded) is what testweb serves, so
// the binary carries the demo's pages without carrying testweb, its
// generated webs and their code; TestSnapshot holds it to testweb page by
// page, and `go test ./demoweb -update` writes it anew from there.
//
//	web, err := demoweb.Start(1) // every robots.txt asks for Crawl-delay: 1
//	if err != nil { … }
//	defer web.Close()
//	f := fetch.New(fetch.Config{UserAgent: ua, Resolve: web.Resolve(), AllowLoopback: true})
//	records, truth := demoweb.Sample()
//
// One listener on 127.0.0.1 answers for every host by the Host header, as
// testweb's does: a page, a 301 to a directory named without its slash, a
// 404 for anything else. A Web is safe for concurrent use; Close stops it
// and leaves no goroutine behind.
package demoweb
