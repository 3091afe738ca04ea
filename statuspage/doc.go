// Package statuspage serves a dispatcher's live status page: one HTML
// page, its script and its style sheet, embedded in the binary (no CDN,
// so it works on a machine without internet access), and the JSON it
// polls.
//
// Handler serves "/" (the page), "/app.js", "/style.css" and
// "/status.json", the dispatcher's Status with its timeline
// (dispatcher.Dispatcher.Status). The page fetches the JSON every
// dispatcher.StatusEvery and draws it: records complete over time with an
// ETA, pages per second over time and per supervisor, failures by class,
// the slowest hosts and the hosts in back-off, the members and their last
// heartbeat, the render queue, robots.txt outcomes and the latest errors.
// `backfill status --from URL` reads the same JSON, and `export --follow`
// reads "/settled.json?after=N", the records the crawl completed after
// feed position N (dispatcher.Dispatcher.Settled).
//
// Numbers the page shows carry their element's id or a data-key, so a
// browser test can read them back and compare them with the JSON.
package statuspage
