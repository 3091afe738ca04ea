// Package browsertest starts headless Chromium for tests that look at
// pages as a person would: the dispatcher's status page, the run report.
// The browser is the one a render node would start (supervisor.FindBrowser);
// a test is skipped, saying why, on a machine without one.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"backfill/proctest"
	"backfill/supervisor"
)

// screenshotWait bounds taking a screenshot of a failed test's page.
const screenshotWait = 10 * time.Second

// Start starts a headless Chromium for t, with a profile under t's temp
// directory and opts added to the defaults (a proxy, resolver rules), and
// returns the context of a tab in it. The browser is stopped when t ends.
// When t fails, a screenshot of the tab is written under its temp
// directory (name.png) and its path logged.
func Start(t testing.TB, name string, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	proctest.Short(t, "starts a browser")
	browser, err := supervisor.FindBrowser()
	if err != nil {
		proctest.NoChromium(t, fmt.Sprintf("%v (Debian package chromium; `make deps-render` installs it): this test needs a browser", err))
	}
	dir := t.TempDir()
	all := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser),
		chromedp.UserDataDir(filepath.Join(dir, "profile")))
	if os.Getuid() == 0 {
		all = append(all, chromedp.NoSandbox) // the sandbox refuses to run as root
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), append(all, opts...)...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		bcancel()
		acancel()
	})
	t.Cleanup(func() { // runs first: the tab is still there
		if !t.Failed() {
			return
		}
		sctx, cancel := context.WithTimeout(bctx, screenshotWait)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)) // 100: PNG, not JPEG
		if err != nil {
			t.Logf("no screenshot: %v", err)
			return
		}
		path := filepath.Join(dir, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Logf("no screenshot: %v", err)
			return
		}
		t.Logf("screenshot of the page: %s", path)
	})
	return bctx
}
