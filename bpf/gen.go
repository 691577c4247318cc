package bpf

// The generated xroce_bpfel.go and xroce_bpfel.o are committed, so building xroce
// needs no clang. `make generate` rebuilds them with Debian's clang, llvm and
// libbpf-dev.
//go:generate go tool bpf2go -tags linux -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror" xroce xroce.c -- -I/usr/include/x86_64-linux-gnu
