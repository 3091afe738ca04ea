package statuspage

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"

	"backfill/dispatcher"
)

//go:embed assets
var assets embed.FS

// Source returns the status to serve, or false while there is none yet
// (the dispatcher is still being made).
type Source func() (dispatcher.Status, bool)

// JSONPath is where Handler serves the status as JSON.
const JSONPath = "/status.json"

// Handler serves the page, its assets and the status JSON from src.
func Handler(src Source) http.Handler {
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
