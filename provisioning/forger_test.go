package provisioning_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"backfill/etl"
	"backfill/testweb"
	"backfill/wire"
)

// forge plays a cluster member whose key the dispatcher authorizes and
// which answers what it was never given: until stop, it sends Results for
// every seed URL of the sample (their task ids are computable: 8 bytes of
// the normalized URL's SHA-256) under guessed lease tokens, with forged
// values for every field the crawl fills. It prints how many it sent.
// Its environment: BACKFILL_REHEARSAL_ADDR the dispatcher's endpoint,
// BACKFILL_FORGER_KEY its secret key file, BACKFILL_FORGER_DISPATCHER_KEY
// the dispatcher's public key file.
func forge(endpoint string, stop <-chan os.Signal) int {
	keys, err := wire.LoadKeys(os.Getenv("BACKFILL_FORGER_KEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	server, err := wire.LoadPublicKey(os.Getenv("BACKFILL_FORGER_DISPATCHER_KEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out, err := wire.DialSecure(endpoint, wire.Security{Keys: keys, ServerKey: server})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer out.Close()
	records, truth := testweb.Sample()
	var fields []wire.Field
	for _, fs := range truth {
		for name := range fs {
			fields = append(fields, wire.Field{Mapping: "forged", Name: name, Values: []string{"FORGED " + name}})
		}
		break
	}
	rows, err := csv.NewReader(bytes.NewReader(records)).ReadAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var tasks []wire.Result
	for _, row := range rows[1:] {
		for _, v := range row {
			if !strings.HasPrefix(v, "http") {
				continue
			}
			u, err := etl.NormalizeURL(v)
			if err != nil {
				continue
			}
			sum := sha256.Sum256([]byte(u))
			tasks = append(tasks, wire.Result{TaskID: fmt.Sprintf("%016x", binary.BigEndian.Uint64(sum[:8])),
				Supervisor: "sup-1", URL: u, Status: 200, Fields: fields})
		}
	}
	fmt.Fprintln(os.Stderr, "forging", len(tasks), "tasks")
	sent := 0
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			fmt.Println(sent)
			return 0
		case <-tick.C:
		}
		for _, r := range tasks {
			r.Lease, r.FetchedAt = int64(rand.Uint64()), time.Now() // a guess
			if out.Send(wire.KindResult, r, 10*time.Millisecond) == nil {
				sent++
			}
		}
	}
}
