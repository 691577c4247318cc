//go:build !amd64

package crc

const hasFold = false

func fold(uint32, []byte, *[16]byte) { panic("crc: fold without AVX-512") }
