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
// Blocked: a key's bits all lie in one 512-bit block (one cache line, one
// page of the array), so a check is one memory access, and a small crawl
// touches few pages of the array (its resident memory grows with the keys
// it holds, not with filterBytes). With filterBits bits and 7 bits a key,
// about 1 % false positives at 12 million keys, 3 % at 20 million; a false
// positive costs one lookup, never a wrong answer.
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
	filterBits   = 1 << 27 // 16 MiB
	filterBlocks = filterBits / 512
	filterK      = 7
	filterFile   = "seen.filter"
	filterMagic  = "bfseen01"
)

func newSeenFilter() *seenFilter {
	return &seenFilter{blocks: make([][8]uint64, filterBlocks)}
}

// probe returns the key's block and its bits within. Keys are SHA-256
// bytes already: the block comes from the high bits, the bit positions
// from a remix of the whole key, 9 bits each.
func probe(key int64) (block int, mask [8]uint64) {
	u := uint64(key)
	block = int((u >> 32) * filterBlocks >> 32)
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
	b, m := probe(key)
	blk := &f.blocks[b]
	for i := range blk {
		blk[i] |= m[i]
	}
	f.n++
}

func (f *seenFilter) mayHave(key int64) bool {
	b, m := probe(key)
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
	var hdr [24]byte
	copy(hdr[:8], filterMagic)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(stamp))
	binary.LittleEndian.PutUint64(hdr[16:], uint64(f.n))
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
	var hdr [24]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || string(hdr[:8]) != filterMagic ||
		int64(binary.LittleEndian.Uint64(hdr[8:])) != stamp || stamp == 0 {
		return nil, nil
	}
	f := &seenFilter{blocks: make([][8]uint64, filterBlocks), n: int64(binary.LittleEndian.Uint64(hdr[16:]))}
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
		f = newSeenFilter()
		rows, err := d.st.conn.QueryContext(ctx, `SELECT key FROM urls`)
		if err != nil {
			return fmt.Errorf("dispatcher: state seen keys: %w", err)
		}
		for rows.Next() {
			var k int64
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return fmt.Errorf("dispatcher: state seen keys: %w", err)
			}
			f.add(k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("dispatcher: state seen keys: %w", err)
		}
	}
	d.seenKeys = f
	if stamp != 0 {
		return d.st.setMeta(ctx, "filter_stamp", 0)
	}
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
