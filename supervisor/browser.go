package supervisor

// FindBrowser returns the browser a render node starts when
// RenderConfig.Exec is empty: the first of chromium, chromium-browser,
// google-chrome and google-chrome-stable on PATH.
func FindBrowser() (string, error) { return findBrowser() }
