package admin

import "net/http"

// FrameHeaders sets, on every answer of h, the headers that keep a page out of another site's
// frame and a body from being sniffed as another type: "Content-Security-Policy:
// frame-ancestors 'none'", "X-Frame-Options: DENY" (browsers without CSP level 2) and
// "X-Content-Type-Options: nosniff". A handler that sets its own Content-Security-Policy
// replaces the first and must keep frame-ancestors 'none' in it (internal/web does). The
// admin listener is wrapped in it as a whole: the pages, the login form, the status endpoint,
// the metrics and every 401.
func FrameHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "frame-ancestors 'none'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}
