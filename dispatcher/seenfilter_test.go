package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestSeenFilterSizedToKeys: the seen filter of a small crawl is small,
// grows with the keys inserted (every one of them still reported, the
// false positives near 1 %), and a state reopened after a clean close
// loads it as saved, while one reopened after a crash rebuilds it, sized
// to the table.
func TestSeenFilterSizedToKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := openState(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{st: st, w: newWindow(), cfg: Config{StateDir: dir}, log: slog.New(slog.DiscardHandler)}
	if err := d.setupSeenFilter(ctx); err != nil {
		t.Fatal(err)
	}
	url := func(i int) string { return fmt.Sprintf("https://host-%d.example/p/%d", i%97, i) }
	insert := func(from, to int) {
		t.Helper()
		ts := make([]*task, 0, to-from)
		for i := from; i < to; i++ {
			ts = append(ts, &task{key: urlKey(url(i)), url: url(i), depth: 1, seq: int64(i)})
		}
		if err := st.begin(ctx); err != nil {
			t.Fatal(err)
		}
		if err := d.insertURLs(ctx, ts); err != nil {
			t.Fatal(err)
		}
		if err := st.commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each size is for filterBitsPerKey bits a key; growing four times
	// over from a full filter, one holds at most 16 times that.
	sizes := []int{8, 5_000, 30_000, 100_000}
	done := 0
	for _, keys := range sizes {
		for done < keys {
			next := min(done+4096, keys)
			insert(done, next)
			done = next
		}
		bits := int64(len(d.seenKeys.blocks)) * 512
		if bits < int64(keys)*filterBitsPerKey || bits > max(filterMinBits, int64(keys)*filterBitsPerKey*16) {
			t.Errorf("%d keys: a filter of %d bits, want %d to %d bits a key", keys, bits, filterBitsPerKey, 16*filterBitsPerKey)
		}
		for i := range keys {
			if !d.seenKeys.mayHave(urlKey(url(i))) {
				t.Fatalf("%d keys: key %d inserted and not in the filter", keys, i)
			}
		}
		fp := 0
		for i := range 100_000 {
			if d.seenKeys.mayHave(urlKey(url(1_000_000_000 + i))) {
				fp++
			}
		}
		if fp > 3_000 {
			t.Errorf("%d keys: %d false positives in 100,000, want about 1 %%", keys, fp)
		}
	}

	// A clean close saves it; a reopen loads it as it was.
	if err := st.begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.saveSeenFilter(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.commit(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, filterFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(d.seenKeys.blocks))*64 + 32; info.Size() != want {
		t.Errorf("seen.filter of %d bytes, want %d", info.Size(), want)
	}
	saved := d.seenKeys
	d.seenKeys = nil
	if err := d.setupSeenFilter(ctx); err != nil {
		t.Fatal(err)
	}
	if len(d.seenKeys.blocks) != len(saved.blocks) || d.seenKeys.n != saved.n || d.seenKeys.blocks[7] != saved.blocks[7] {
		t.Errorf("the saved filter was not loaded as saved")
	}
	// The stamp is cleared on load: a second setup (as after a crash)
	// rebuilds from the table, sized to it.
	d.seenKeys = nil
	if err := d.setupSeenFilter(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := len(d.seenKeys.blocks), filterBlocksFor(int64(done)); got != want || d.seenKeys.n != int64(done) {
		t.Errorf("rebuilt filter: %d blocks and %d keys, want %d and %d", got, d.seenKeys.n, want, done)
	}
	if err := st.close(); err != nil {
		t.Fatal(err)
	}
}

// TestSeenFilterBlocks: sizes are powers of two within the bounds.
func TestSeenFilterBlocks(t *testing.T) {
	for _, c := range []struct {
		keys int64
		want int
	}{
		{0, filterMinBits / 512},
		{8, filterMinBits / 512},
		{filterMinBits / filterBitsPerKey, filterMinBits / 512},
		{filterMinBits/filterBitsPerKey + 1, 2 * filterMinBits / 512},
		{1 << 40, maxFilterBlocks},
	} {
		if got := filterBlocksFor(c.keys); got != c.want {
			t.Errorf("filterBlocksFor(%d) = %d, want %d", c.keys, got, c.want)
		}
	}
}
