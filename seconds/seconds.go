// Package seconds owns how backfill writes a duration for machines: a
// number of seconds (fractions allowed), under a name ending in
// "_seconds". Logs, summaries, survey rows and the status and history
// files all follow it, so a log query or a script reads every duration
// alike; text for people ("2m0s") is for terminals and messages only.
//
//	log.Info("dispatcher finished", seconds.Attr("elapsed", d)) // "elapsed_seconds": 12.5
package seconds

import (
	"log/slog"
	"math"
	"time"
)

// Suffix ends the name of every duration written for machines.
const Suffix = "_seconds"

// Attr is a log attribute for d: name+"_seconds" and d in seconds.
func Attr(name string, d time.Duration) slog.Attr {
	return slog.Float64(name+Suffix, Of(d))
}

// Of is d in seconds: what a JSON field named *_seconds holds. It keeps
// every nanosecond a float64 can (all of them for durations under about
// three months), so a duration read back from it is the one written.
func Of(d time.Duration) float64 {
	return d.Seconds()
}

// Duration is s seconds as a duration, to the nanosecond: what Of
// wrote, read back.
func Duration(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}
