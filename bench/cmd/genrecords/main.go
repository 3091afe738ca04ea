// Command genrecords writes a JSON Lines records file of any size for the
// scale benchmarks: -n records over -hosts hosts, deterministic for a given
// -seed, so runs on different days compare.
//
// Each record has an id, a name and the empty fields the bundled people
// mappings fill (location, email), and one homepage link; a share of them
// (-second) has a second link on another host. Links go to two kinds of
// host:
//
//   - the first -web hosts are the fixture web's (people-0001.example …,
//     as testweb.StartLarge serves them, -pages profiles each): a crawl
//     that points those names at the web (--resolve) fetches real pages;
//   - every other host is a loopback address (127.x.y.z) on -port, where
//     nothing listens: the connection is refused at once, so a crawl of
//     millions of records spends its time in the dispatcher, not waiting
//     on the network.
//
// With -web 0 every link is refused, which is what an intake benchmark
// wants (nothing is fetched while the records are taken in).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
)

func main() {
	n := flag.Int("n", 1_000_000, "records")
	hosts := flag.Int("hosts", 0, "distinct hosts (default n/5)")
	web := flag.Int("web", 0, "hosts of the fixture web among them (people-0001.example …)")
	pages := flag.Int("pages", 100, "profile pages per fixture web host")
	second := flag.Float64("second", 0.18, "share of records with a second link")
	port := flag.Int("port", 9, "port of the loopback hosts (nothing should listen there)")
	seed := flag.Uint64("seed", 1, "random seed")
	out := flag.String("o", "-", "output file (- for stdout)")
	flag.Parse()
	if *hosts <= 0 {
		*hosts = max(*n/5, 1)
	}
	if *web > *hosts || *web > 9999 || *pages < 1 || *pages > 9999 {
		fmt.Fprintln(os.Stderr, "genrecords: -web must be at most -hosts and 9999, -pages 1..9999")
		os.Exit(2)
	}
	f := os.Stdout
	if *out != "-" {
		var err error
		if f, err = os.Create(*out); err != nil {
			fmt.Fprintln(os.Stderr, "genrecords:", err)
			os.Exit(1)
		}
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(*seed, 0x5ca1e))
	var b []byte
	for i := 1; i <= *n; i++ {
		b = b[:0]
		b = append(b, `{"id":"r`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","name":"Person `...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","location":"","email":"","homepage":"`...)
		b = link(b, rng, *hosts, *web, *pages, *port, i)
		b = append(b, '"')
		if rng.Float64() < *second {
			b = append(b, `,"profile":"`...)
			b = link(b, rng, *hosts, *web, *pages, *port, i+*n)
			b = append(b, '"')
		}
		b = append(b, "}\n"...)
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "genrecords:", err)
		os.Exit(1)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "genrecords:", err)
		os.Exit(1)
	}
}

// link appends one URL: a page of a fixture web host, or a path on a
// loopback host where nothing listens.
func link(b []byte, rng *rand.Rand, hosts, web, pages, port, i int) []byte {
	h := rng.IntN(hosts)
	if h < web {
		return fmt.Appendf(b, "http://people-%04d.example/p/%04d", h+1, 1+rng.IntN(pages))
	}
	// 127.0.0.0/8 less 127.0.0.0/24: 16M addresses, one per host.
	h += 256
	return fmt.Appendf(b, "http://127.%d.%d.%d:%d/people/%d", h>>16&255, h>>8&255, h&255, port, i)
}
