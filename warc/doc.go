// Package warc writes pages as WARC files (ISO 28500:2017, WARC/1.1),
// the web archive format other tools read (replay, indexing, analysis).
//
// A Writer starts a file with a warcinfo record naming the software
// that wrote it, then writes each page as one record: a response record
// (application/http;msgtype=response) whose block is an HTTP response
// made of the page's status, its content type and its body, or, for a
// page a browser rendered, a resource record of the DOM it ended with
// (it was never an HTTP response). Every record carries a random
// WARC-Record-ID, its WARC-Date (when the page was fetched), its
// WARC-Target-URI and the SHA-1 of its block and payload; records refer
// to the file's warcinfo record.
//
//	w, err := warc.NewWriter(out, warc.Options{Software: "backfill/0.1", Gzip: true})
//	…
//	err = w.Write(warc.Page{URL: u, Status: 200, ContentType: "text/html", Body: b, Date: at})
//	…
//	err = w.Close() // flushes; does not close out
//
// With Options.Gzip each record is its own gzip member (a .warc.gz
// file), so a reader may seek to any record. Bodies are written as the
// crawl kept them: text decoded to UTF-8, so the content type written
// says charset=utf-8 for text. A Writer is for one goroutine.
package warc
