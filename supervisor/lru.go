package supervisor

// lru is a map from host (or address) to V that holds at most max entries:
// putting one more forgets the least recently used, after handing it to
// evicted (when set). It is how every per-host table of the supervisor
// stays bounded by configuration however many hosts a crawl meets. Not
// safe for concurrent use: its owner's mutex guards it.
type lru[V any] struct {
	max     int
	m       map[string]*lruEntry[V]
	head    lruEntry[V] // sentinel: head.next is the most recent, head.prev the least
	evicted func(key string, v V)
}

type lruEntry[V any] struct {
	key        string
	v          V
	prev, next *lruEntry[V]
}

func newLRU[V any](max int, evicted func(string, V)) *lru[V] {
	c := &lru[V]{max: max, m: make(map[string]*lruEntry[V]), evicted: evicted}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (c *lru[V]) unlink(e *lruEntry[V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *lru[V]) pushFront(e *lruEntry[V]) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// get returns key's value and makes it the most recently used.
func (c *lru[V]) get(key string) (V, bool) {
	e, ok := c.m[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.v, true
}

// put sets key's value, makes it the most recently used, and forgets the
// least recently used entries beyond max.
func (c *lru[V]) put(key string, v V) {
	if e, ok := c.m[key]; ok {
		e.v = v
		c.unlink(e)
		c.pushFront(e)
		return
	}
	e := &lruEntry[V]{key: key, v: v}
	c.m[key] = e
	c.pushFront(e)
	for len(c.m) > c.max {
		old := c.head.prev
		c.unlink(old)
		delete(c.m, old.key)
		if c.evicted != nil {
			c.evicted(old.key, old.v)
		}
	}
}

// remove forgets key, without calling evicted.
func (c *lru[V]) remove(key string) {
	if e, ok := c.m[key]; ok {
		c.unlink(e)
		delete(c.m, key)
	}
}

func (c *lru[V]) len() int { return len(c.m) }

// oldest returns the least recently used entry, if any.
func (c *lru[V]) oldest() (key string, v V, ok bool) {
	if e := c.head.prev; e != &c.head {
		return e.key, e.v, true
	}
	return "", v, false
}

// each calls f for every entry, most recently used first, until f
// returns false. f must not change c.
func (c *lru[V]) each(f func(key string, v V) bool) {
	for e := c.head.next; e != &c.head; e = e.next {
		if !f(e.key, e.v) {
			return
		}
	}
}
