// Package transport is xroce's RoCEv2 Reliable Connected transport engine (IBTA Vol 1
// chapter 9) with a verbs-like API: Device, ProtectionDomain, MemoryRegion,
// CompletionQueue and QueuePair, with PostSend, PostRecv and Poll.
//
// A Device runs on a Link (AF_XDP, kernel UDP, an in-memory Pipe for tests, or a pcap
// tap around any of them). All protocol state is owned by the device's engine loop:
// Progress does one non-blocking pass (receive a batch, run the responder and
// completer, run the requesters, check timers, transmit a batch), and Run calls it
// until its context ends. The user API hands work to the loop through per-QP queues
// taken in batches, and completions come back through completion queues.
//
// Protocol tests drive Progress directly with a FakeClock, so they are deterministic
// and take milliseconds even when they cover seconds of retransmission timers.
package transport
