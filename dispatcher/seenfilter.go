package dispatcher

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
)

// seenFilter is the seen store's front: a blocked Bloom filter of every
// key in the urls table. A link whose key the filter rules out is new to
// the crawl for certain and goes straight to the insert; only keys it may
// hold (those seen, and about one in a hundred others) are looked up in
// SQLite. Taking in a records file or a page of new links is then one
// B-tree insert per URL instead of a lookup and an insert.
//
// Blocked: a key's bits all lie in one 512-bit block (one cache line),
// so a check is one memory access. Sized to the keys: a filter has about
// filterBitsPerKey bits a key it holds (about 1 % false positives), from
// filterMinBits for a small crawl; when its keys outgrow it, grow rebuilds
// it four times larger from the urls table, up to filterMaxBits, where it
// keeps taking keys (about 1 % false positives at 12 million keys, 3 % at
// 20 million). A false positive costs one lookup, never a wrong answer.
//
// A filter that lacks a key would make a known URL look new, so it must
// always hold every key of the table: add is called for each key inserted
// (before the transaction commits: a key of a rolled-back insert is a
// harmless false positive). Close saves it to seen.filter with a random
// stamp that meta also records; New loads it only when the stamps agree,
// and clears meta's stamp at once, so a filter saved before a crash is
// never taken for one that holds the keys inserted since. Without a valid
// file (a crash, or a state written by an earlier build) New rebuilds the
// filter from the table.
type seenFilter struct {
	blocks [][8]uint64
	n      int64 // keys added
}

const (
	filterMinBits    = 1 << 16 // 8 KiB
	filterMaxBits    = 1 << 27 // 16 MiB
	filterBitsPerKey = 11
	filterK          = 7
	filterFile       = "seen.filter"
	filterMagic      = "bfseen02"
	maxFilterBlocks  = filterMaxBits / 512
)

// newSeenFilter returns an empty filter sized for keys keys.
func newSeenFilter(keys int64) *seenFilter {
	return &seenFilter{blocks: make([][8]uint64, filterBlocksFor(keys))}
}

// filterBlocksFor is the blocks of a filter for keys keys: a power of two
// of at least filterBitsPerKey bits a key, within the bounds.
func filterBlocksFor(keys int64) int {
	b := filterMinBits / 512
	for int64(b)*512 < keys*filterBitsPerKey && b < maxFilterBlocks {
		b *= 2
	}
	return b
}

// full reports whether the filter holds more keys than its size is for,
// and may grow.
func (f *seenFilter) full() bool {
	return len(f.blocks) < maxFilterBlocks && f.n*filterBitsPerKey > int64(len(f.blocks))*512
}

// probe returns the key's block among blocks and its bits within. Keys
// are SHA-256 bytes already: the block comes from the high bits, the bit
// positions from a remix of the whole key, 9 bits each.
func probe(key int64, blocks int) (block int, mask [8]uint64) {
	u := uint64(key)
	block = int((u >> 32) * uint64(blocks) >> 32)
	h := u * 0x9e3779b97f4a7c15
	h ^= h >> 29
	for range filterK {
		bit := h & 511
		mask[bit>>6] |= 1 << (bit & 63)
		h = bits.RotateLeft64(h, 9)
	}
	return block, mask
}

func (f *seenFilter) add(key int64) {
	b, m := probe(key, len(f.blocks))
	blk := &f.blocks[b]
	for i := range blk {
		blk[i] |= m[i]
	}
	f.n++
}

func (f *seenFilter) mayHave(key int64) bool {
	b, m := probe(key, len(f.blocks))
	blk := &f.blocks[b]
	for i := range blk {
		if blk[i]&m[i] != m[i] {
			return false
		}
	}
	return true
}

// save writes the filter to path with stamp, and syncs it.
func (f *seenFilter) save(path string, stamp int64) error {
	tmp := path + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	var hdr [32]byte
	copy(hdr[:8], filterMagic)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(stamp))
	binary.LittleEndian.PutUint64(hdr[16:], uint64(f.n))
	binary.LittleEndian.PutUint64(hdr[24:], uint64(len(f.blocks)))
	w.Write(hdr[:])
	var buf [64]byte
	for _, blk := range f.blocks {
		for i, v := range blk {
			binary.LittleEndian.PutUint64(buf[i*8:], v)
		}
		w.Write(buf[:])
	}
	err = errors.Join(w.Flush(), out.Sync(), out.Close())
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// loadSeenFilter reads the filter saved at path with stamp; nil (and no
// error) when there is none or it is of another stamp.
func loadSeenFilter(path string, stamp int64) (*seenFilter, error) {
	in, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer in.Close()
	r := bufio.NewReaderSize(in, 1<<20)
	var hdr [32]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || string(hdr[:8]) != filterMagic ||
		int64(binary.LittleEndian.Uint64(hdr[8:])) != stamp || stamp == 0 {
		return nil, nil
	}
	blocks := binary.LittleEndian.Uint64(hdr[24:])
	if blocks == 0 || blocks > maxFilterBlocks || blocks&(blocks-1) != 0 {
		return nil, nil // not a size this build writes: rebuild
	}
	f := &seenFilter{blocks: make([][8]uint64, blocks), n: int64(binary.LittleEndian.Uint64(hdr[16:]))}
	var buf [64]byte
	for b := range f.blocks {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return nil, nil // cut short: rebuild
		}
		for i := range f.blocks[b] {
			f.blocks[b][i] = binary.LittleEndian.Uint64(buf[i*8:])
		}
	}
	return f, nil
}

// setupSeenFilter loads the filter a clean Close saved, or rebuilds it
// from the urls table, and clears the stamp (see seenFilter). Called by
// resume.
func (d *Dispatcher) setupSeenFilter(ctx context.Context) error {
	stamp, err := d.st.meta(ctx, "filter_stamp")
	if err != nil {
		return err
	}
	path := d.filterPath()
	f, err := loadSeenFilter(path, stamp)
	if err != nil {
		d.log.Warn("seen filter unreadable; rebuilding it from the state", "file", path, "error", err)
	}
	if f == nil {
		var keys int64
		if err := d.st.conn.QueryRowContext(ctx, `SELECT count(*) FROM urls`).Scan(&keys); err != nil {
			return fmt.Errorf("dispatcher: state seen keys: %w", err)
		}
		if f, err = d.st.seenKeysFilter(ctx, keys); err != nil {
			return err
		}
	}
	d.seenKeys = f
	if stamp != 0 {
		return d.st.setMeta(ctx, "filter_stamp", 0)
	}
	return nil
}

// seenKeysFilter builds a filter sized for keys from every key of the urls
// table (those of the transaction under way included: it runs on the
// state's one connection).
func (s *state) seenKeysFilter(ctx context.Context, keys int64) (*seenFilter, error) {
	f := newSeenFilter(keys)
	rows, err := s.conn.QueryContext(ctx, `SELECT key FROM urls`)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state seen keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k int64
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("dispatcher: state seen keys: %w", err)
		}
		f.add(k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dispatcher: state seen keys: %w", err)
	}
	return f, nil
}

// growSeenFilter rebuilds a full filter four times larger (within
// filterMaxBits), after keys were inserted: each key is read again once
// per growth, so growing costs a constant share of the inserts.
func (d *Dispatcher) growSeenFilter(ctx context.Context) error {
	if !d.seenKeys.full() {
		return nil
	}
	f, err := d.st.seenKeysFilter(ctx, 4*d.seenKeys.n)
	if err != nil {
		return err
	}
	d.seenKeys = f
	return nil
}

// saveSeenFilter saves the filter and records its stamp; the caller
// commits. A failure only costs the next start a rebuild.
func (d *Dispatcher) saveSeenFilter(ctx context.Context) error {
	var b [8]byte
	rand.Read(b[:])
	stamp := int64(binary.BigEndian.Uint64(b[:])>>1) | 1
	if err := d.seenKeys.save(d.filterPath(), stamp); err != nil {
		return fmt.Errorf("dispatcher: save seen filter: %w", err)
	}
	return d.st.setMeta(ctx, "filter_stamp", stamp)
}

func (d *Dispatcher) filterPath() string {
	return d.cfg.StateDir + string(os.PathSeparator) + filterFile
}
