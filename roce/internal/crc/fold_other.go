//go:build !amd64

package crc

const hasFold = false

func foldCopy(uint32, []byte, []byte, *Mask) uint32 { panic("crc: fold without AVX-512") }
