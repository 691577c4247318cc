// Package transport is xroce's RoCEv2 Reliable Connected transport engine (IBTA Vol 1
// chapter 9) with a verbs-like API: Device, ProtectionDomain, MemoryRegion,
// CompletionQueue and QueuePair, with PostSend, PostRecv and Poll.
//
// A Device runs on a Link (AF_XDP, kernel UDP, an in-memory Pipe for tests, or a pcap
// tap around any of them). All protocol state is owned by the device's engine loop:
// Progress does one non-blocking pass (take in posted work, receive a batch and run
// the responder and completer on it, run due timers, let the QPs that have work send,
// transmit a batch), and Run calls it until its context ends. Only QPs with work are
// visited: a ready list fed by posts, frames, timers and Modify, and a timer heap, so
// idle QPs cost nothing per pass. The user API hands work to the loop through per-QP
// pending lists that never wait for a pass, and completions come back through
// completion queues (docs/engine.md).
//
// Protocol tests drive Progress directly with a FakeClock, so they are deterministic
// and take milliseconds even when they cover seconds of retransmission timers.
package transport
