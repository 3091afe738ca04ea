package statuspage

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strconv"

	"backfill/dispatcher"
)

//go:embed assets
var assets embed.FS

// Source returns the status to serve, or false while there is none yet
// (the dispatcher is still being made).
type Source func() (dispatcher.Status, bool)

// FeedSource returns the records settled after a feed position, at most
// limit (dispatcher.Dispatcher.Settled), or false while there is no
// dispatcher yet.
type FeedSource func(after int64, limit int) (dispatcher.Feed, bool)

// Where Handler serves the status and the feed of settled records as JSON.
const (
	JSONPath = "/status.json"
	FeedPath = "/settled.json"
)

// feedLimit bounds the records one feed request returns.
const feedLimit = 1024

// Handler serves the page, its assets, the status JSON from src and the
// settled records from feed (?after=N: those after position N).
func Handler(src Source, feed FeedSource) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+JSONPath, func(w http.ResponseWriter, r *http.Request) {
		s, ok := src()
		if !ok {
			http.Error(w, "the dispatcher is starting", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		enc.Encode(s) // a write error is the client's going away
	})
	mux.HandleFunc("GET "+FeedPath, func(w http.ResponseWriter, r *http.Request) {
		after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		if err != nil && r.URL.Query().Get("after") != "" {
			http.Error(w, "after: want a feed position", http.StatusBadRequest)
			return
		}
		f, ok := feed(after, feedLimit)
		if !ok {
			http.Error(w, "the dispatcher is starting", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(f)
	})
	mux.Handle("GET /{$}", files)
	mux.Handle("GET /app.js", files)
	mux.Handle("GET /style.css", files)
	return securityHeaders(mux)
}

// securityHeaders keeps the page to its own assets: no script, style or
// connection elsewhere, and no framing.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}
