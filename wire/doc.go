// Package wire is the only package that speaks ZeroMQ. It owns the messages
// exchanged by the dispatcher and its supervisors, their framing and the
// sockets that carry them.
//
// The topology is two one-way pipes per supervisor:
//
//	supervisor ──PUSH (Sender)──► dispatcher intake (Receiver, bound PULL)
//	dispatcher ──PUSH (Sender)──► supervisor task socket (Receiver, bound PULL)
//
// A supervisor binds its task socket, dials the dispatcher's intake and sends
// Hello (and then Heartbeats) naming its task endpoint; the dispatcher dials
// that endpoint and answers Welcome, then Tasks. Results travel back on the
// intake. Because each supervisor has its own task socket, the dispatcher
// chooses which supervisor gets a URL (by its domain), never ZeroMQ.
//
// A frame is one ZeroMQ message: a version byte, a Kind byte and a body:
// compact tagged fields for Tasks and Results, which are most of the
// traffic, and JSON for the rest. Decode refuses anything else with an error wrapping ErrBadFrame, so
// a foreign or buggy peer costs a counter, never a crash.
package wire
