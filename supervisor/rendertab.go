package supervisor

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"
)

// A tab is a page target of the browser, kept from one render to the next:
// opening a target, a browser context for it and a renderer process to
// run it costs more CPU than most pages' own scripts, and the processes of
// closed tabs linger while the browser reclaims them.
//
// Each tab has a browser context of its own (an incognito profile), so two
// tabs share no cookie, storage or cache, and a page that crashes its
// renderer takes only its own tab down. Between two pages of one tab the
// tab goes to about:blank and the storage of every origin the page's
// documents came from is cleared (cookies, local storage, IndexedDB, cache
// storage, service workers...): no state passes from one page to the
// next. The HTTP cache is off in every tab, and every answer the browser
// gets is handed to it by the interceptor anyway. A tab whose page failed
// in any way (its deadline, a crash, a broken call) is closed rather than
// reused, and so is one that has rendered renderTabPages pages, so that
// whatever a renderer leaks is bounded.

const (
	// renderTabPages is how many pages a tab renders before it is closed
	// and a fresh one opened.
	renderTabPages = 200
	// renderTabReset bounds taking a tab back to about:blank and clearing
	// its storage; a tab that takes longer is closed.
	renderTabReset = 5 * time.Second
)

// tab is one reused page target of a browser.
type tab struct {
	b      *browserProc
	ctx    context.Context    // the target's chromedp context
	cancel context.CancelFunc // closes the target and disposes of its browser context
	pages  int                // pages rendered in it
	ready  bool               // its target is open and set up

	mu      sync.Mutex
	origins map[string]bool // origins of the current page's documents, to clear
}

// newTab makes a tab of b; its target opens on first use (open).
func newTab(b *browserProc) *tab {
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	return &tab{b: b, ctx: ctx, cancel: cancel, origins: make(map[string]bool)}
}

// open opens the tab's target, if not yet, with the HTTP cache off. The
// target lives as long as the context of the call that opens it, so it is
// opened with the tab's own context; ctx (the render's) bounds the wait,
// and a tab that did not open in time is closed.
func (t *tab) open(ctx context.Context) error {
	if t.ready {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := chromedp.Call(t.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		t.cancel()
		<-done
		return context.Cause(ctx)
	}
	t.ready = true
	return nil
}

// touched notes an origin a document of the current page came from.
func (t *tab) touched(rawURL string) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return
	}
	t.mu.Lock()
	t.origins[u.Scheme+"://"+u.Host] = true
	t.mu.Unlock()
}

// reset makes the tab ready for another page: it leaves the page for
// about:blank and clears the cookies of its browser context and the
// storage of every origin its documents came from.
func (t *tab) reset() error {
	ctx, cancel := context.WithTimeout(t.ctx, renderTabReset)
	defer cancel()
	// No wait for a load event: about:blank has none to wait for once
	// the navigation is committed, which the call's answer says.
	if _, err := chromedp.Call(ctx, cdppage.Navigate, cdppage.NavigateParams{URL: "about:blank"}); err != nil {
		return fmt.Errorf("to about:blank: %w", err)
	}
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		return fmt.Errorf("clearing cookies: %w", err)
	}
	t.mu.Lock()
	origins := t.origins
	t.origins = make(map[string]bool)
	t.mu.Unlock()
	for o := range origins {
		if _, err := chromedp.Call(ctx, storage.ClearDataForOrigin, storage.ClearDataForOriginParams{Origin: o, StorageTypes: "all"}); err != nil {
			return fmt.Errorf("clearing the storage of %s: %w", o, err)
		}
	}
	return nil
}
