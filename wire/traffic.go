package wire

import "sync/atomic"

// maxKinds bounds the kinds counted one by one; a frame of a kind at or
// past it (a newer peer's) is counted under kind 0.
const maxKinds = 32

// traffic counts this process's frames and their bytes through every
// Receiver and Sender, by direction and kind: a process-wide figure, like
// the bytes a network interface reports, for operators' metrics. Counting
// is two atomic adds per frame.
var traffic struct {
	in, out [maxKinds]struct{ frames, bytes atomic.Int64 }
}

func countFrame(dir *[maxKinds]struct{ frames, bytes atomic.Int64 }, kind Kind, n int) {
	i := int(kind)
	if i >= maxKinds {
		i = 0
	}
	dir[i].frames.Add(1)
	dir[i].bytes.Add(int64(n))
}

// FrameCount is how many frames of one kind went one way, and their bytes.
type FrameCount struct {
	Kind   Kind
	Frames int64
	Bytes  int64
}

// Traffic returns the frames received (in) and sent (out) by this process
// since it started, one entry per kind seen, in kind order. A frame that
// did not decode is counted as received under kind 0.
func Traffic() (in, out []FrameCount) {
	list := func(dir *[maxKinds]struct{ frames, bytes atomic.Int64 }) []FrameCount {
		var l []FrameCount
		for i := range dir {
			if f := dir[i].frames.Load(); f > 0 {
				l = append(l, FrameCount{Kind: Kind(i), Frames: f, Bytes: dir[i].bytes.Load()})
			}
		}
		return l
	}
	return list(&traffic.in), list(&traffic.out)
}
