package main

// prefill writes every byte of a test's buffer once before the test, as perftest
// initialises its buffer before it measures (perftest_resources.c, perftest
// 4.5-0.17), so that no page is touched for the first time during a measurement:
// the first write to an anonymous page faults it in, about 10 µs a page on the
// development VM, which made a 256 MiB write_bw run at a third of its rate. The
// bytes written are zeros (perftest writes random words): --verify's diagnostics
// tell "nothing arrived" and a shorter peer message by the zeros around them, and
// atomics count from 0. clear writes even over memory that reads as zeros.
func prefill(buf []byte) { clear(buf) }

// bigBuffer is the buffer size from which setup says, on stderr, that it is
// writing the buffer: 1 GiB takes seconds to fault in on the development VM.
const bigBuffer = 1 << 30
