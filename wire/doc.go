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
// that endpoint and answers Welcome, then Tasks, and Bye when its run is
// finished. Results travel back on the intake. Because each supervisor has its own task socket, the dispatcher
// chooses which supervisor gets a URL (by its domain), never ZeroMQ.
//
// Security is CURVE (ZeroMQ RFC 26), one key pair per process, made by
// NewKeys and kept in files by WriteKeys/LoadKeys. Trust runs both ways:
//
//	supervisor (client, own pair) ──► dispatcher intake (CURVE server):
//	    the supervisor must know the dispatcher's public key, and the
//	    dispatcher accepts only the supervisor keys it lists (ZAP);
//	dispatcher (client, own pair) ──► supervisor task socket (CURVE server,
//	    the supervisor's pair): the dispatcher learns the supervisor's public
//	    key from its Hello (Hello.Key), and the supervisor accepts only the
//	    dispatcher's key.
//
// ListenSecure and DialSecure take a Security; its zero value is plaintext,
// which they refuse (ErrPlaintext) on any endpoint that is not loopback
// unless Security.Insecure says otherwise. Listen and Dial are plaintext
// without that check. A refused handshake delivers nothing: a client whose
// key is not listed, one dialling with the wrong server key and a
// plaintext peer of a CURVE socket never get a frame through (see zap.go
// for how keys are checked per socket). Since the peer cannot tell such a
// refusal from silence, a CURVE Receiver keeps what it refused, by reason
// and peer (Refusals; refusals.go), for its owner to log and show.
//
// Host surveys use the same pipes: a survey's dispatcher sends
// SurveyTasks on a supervisor's task socket and gets SurveyResults on its
// intake (survey.go).
//
// A frame is one ZeroMQ message: a version byte, a Kind byte and a body:
// compact tagged fields for Tasks and Results, which are most of the
// traffic, and JSON for the rest. Decode refuses anything else with an error wrapping ErrBadFrame, so
// a foreign or buggy peer costs a counter, never a crash.
package wire
