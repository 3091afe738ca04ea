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

// Frames of the kinds a member sends besides its results are small: a
// Hello says who it is in a few hundred bytes, a Heartbeat adds bounded
// lists of hosts. Decode refuses larger ones before it decodes anything,
// so a member that sends megabytes of name costs a copy, not a parse
// and what the parse would keep.
const (
	MaxHelloFrame     = 64 << 10 // Hello, Welcome, Renew, Bye
	MaxHeartbeatFrame = 1 << 20
)

// maxFrameOf is the largest frame of kind Decode accepts.
func maxFrameOf(kind Kind) int {
	switch kind {
	case KindHello, KindWelcome, KindRenew, KindBye:
		return MaxHelloFrame
	case KindHeartbeat:
		return MaxHeartbeatFrame
	}
	return MaxFrame
}

// Encode frames v as kind. v must be the type Decode returns for kind, as a
// value or a pointer.
func Encode(kind Kind, v any) ([]byte, error) {
	if !kindMatches(kind, v) {
		return nil, fmt.Errorf("wire: encode %s: value of type %T", kind, v)
	}
	var frame []byte
	switch kind {
	case KindTask:
		frame = append([]byte{Version, byte(kind)}, encodeTask(asTask(v))...)
	case KindResult:
		frame = append([]byte{Version, byte(kind)}, encodeResult(asResult(v))...)
	default:
		var buf bytes.Buffer
		buf.WriteByte(Version)
		buf.WriteByte(byte(kind))
		if err := json.NewEncoder(&buf).Encode(v); err != nil {
			return nil, fmt.Errorf("wire: encode %s: %w", kind, err)
		}
		frame = buf.Bytes()
	}
	if len(frame) > MaxFrame {
		return nil, fmt.Errorf("wire: encode %s: %d bytes is over the %d-byte frame limit", kind, len(frame), MaxFrame)
	}
	return frame, nil
}

// Decode parses one frame. It returns a pointer to the message (*Hello,
// *Heartbeat, *Welcome, *Task, *Result, *SurveyTask or *SurveyResult). Every failure wraps ErrBadFrame.
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
	if limit := maxFrameOf(kind); len(frame) > limit {
		return 0, nil, fmt.Errorf("%w: a %s of %d bytes is over the %d-byte limit of its kind", ErrBadFrame, kind, len(frame), limit)
	}
	switch kind {
	case KindTask:
		t, err := decodeTask(frame[2:])
		if err != nil {
			return 0, nil, fmt.Errorf("%w: task body: %v", ErrBadFrame, err)
		}
		return kind, t, nil
	case KindResult:
		r, err := decodeResult(frame[2:])
		if err != nil {
			return 0, nil, fmt.Errorf("%w: result body: %v", ErrBadFrame, err)
		}
		return kind, r, nil
	}
	var v any
	switch kind {
	case KindHello:
		v = new(Hello)
	case KindHeartbeat:
		v = new(Heartbeat)
	case KindWelcome:
		v = new(Welcome)
	case KindSurveyTask:
		v = new(SurveyTask)
	case KindSurveyResult:
		v = new(SurveyResult)
	case KindBye:
		v = new(Bye)
	case KindRenew:
		v = new(Renew)
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
	if n, ok := v.(interface{ normalize() }); ok {
		n.normalize()
	}
	if c, ok := v.(interface{ check() error }); ok {
		if err := c.check(); err != nil {
			return 0, nil, fmt.Errorf("%w: %s body: %v", ErrBadFrame, kind, err)
		}
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
	case SurveyTask, *SurveyTask:
		return kind == KindSurveyTask
	case SurveyResult, *SurveyResult:
		return kind == KindSurveyResult
	case Bye, *Bye:
		return kind == KindBye
	case Renew, *Renew:
		return kind == KindRenew
	}
	return false
}

func asTask(v any) *Task {
	if t, ok := v.(*Task); ok {
		return t
	}
	t := v.(Task)
	return &t
}

func asResult(v any) *Result {
	if r, ok := v.(*Result); ok {
		return r
	}
	r := v.(Result)
	return &r
}
