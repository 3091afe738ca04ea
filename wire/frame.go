package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrBadFrame classifies a frame that could not be decoded (truncated,
// wrong version, unknown kind, garbage, too large).
var ErrBadFrame = errors.New("wire: bad frame")

// MaxFrame is the largest frame accepted; ZeroMQ drops larger ones
// (ZMQ_MAXMSGSIZE) before they reach memory, and Decode refuses them too.
const MaxFrame = 8 << 20

// Encode frames v as kind. v must be the type Decode returns for kind, as a
// value or a pointer.
func Encode(kind Kind, v any) ([]byte, error) {
	if !kindMatches(kind, v) {
		return nil, fmt.Errorf("wire: encode %s: value of type %T", kind, v)
	}
	var buf bytes.Buffer
	buf.WriteByte(Version)
	buf.WriteByte(byte(kind))
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return nil, fmt.Errorf("wire: encode %s: %w", kind, err)
	}
	if buf.Len() > MaxFrame {
		return nil, fmt.Errorf("wire: encode %s: %d bytes is over the %d-byte frame limit", kind, buf.Len(), MaxFrame)
	}
	return buf.Bytes(), nil
}

// Decode parses one frame. It returns a pointer to the message (*Hello,
// *Heartbeat, *Welcome, *Task or *Result). Every failure wraps ErrBadFrame.
func Decode(frame []byte) (Kind, any, error) {
	if len(frame) > MaxFrame {
		return 0, nil, fmt.Errorf("%w: %d bytes is over the %d-byte limit", ErrBadFrame, len(frame), MaxFrame)
	}
	if len(frame) < 2 {
		return 0, nil, fmt.Errorf("%w: %d bytes is too short for a header", ErrBadFrame, len(frame))
	}
	if frame[0] != Version {
		return 0, nil, fmt.Errorf("%w: version %d, want %d", ErrBadFrame, frame[0], Version)
	}
	kind := Kind(frame[1])
	var v any
	switch kind {
	case KindHello:
		v = new(Hello)
	case KindHeartbeat:
		v = new(Heartbeat)
	case KindWelcome:
		v = new(Welcome)
	case KindTask:
		v = new(Task)
	case KindResult:
		v = new(Result)
	default:
		return 0, nil, fmt.Errorf("%w: unknown kind %d", ErrBadFrame, frame[1])
	}
	dec := json.NewDecoder(bytes.NewReader(frame[2:]))
	if err := dec.Decode(v); err != nil {
		return 0, nil, fmt.Errorf("%w: %s body: %v", ErrBadFrame, kind, err)
	}
	if dec.More() {
		return 0, nil, fmt.Errorf("%w: %s body: trailing data", ErrBadFrame, kind)
	}
	return kind, v, nil
}

func kindMatches(kind Kind, v any) bool {
	switch v.(type) {
	case Hello, *Hello:
		return kind == KindHello
	case Heartbeat, *Heartbeat:
		return kind == KindHeartbeat
	case Welcome, *Welcome:
		return kind == KindWelcome
	case Task, *Task:
		return kind == KindTask
	case Result, *Result:
		return kind == KindResult
	}
	return false
}
