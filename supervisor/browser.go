package supervisor

// FindBrowser returns the browser a render node starts when
// RenderConfig.Exec is empty: the first on PATH of chromium-headless-shell,
// chrome-headless-shell, chromium, chromium-browser, google-chrome and
// google-chrome-stable.
func FindBrowser() (string, error) { return findBrowser() }
