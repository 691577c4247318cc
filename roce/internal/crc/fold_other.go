//go:build !amd64

package crc

const hasFold = false

func fold(uint32, []byte, *[16]byte) { panic("crc: fold without AVX-512") }

func foldCopy(uint32, []byte, []byte, *[16]byte) { panic("crc: fold without AVX-512") }
