package keylayout

import "strings"

// SlotCount is the number of hash slots in a Redis Cluster.
const SlotCount = 16384

// crc16Table is the lookup table of CRC16-XMODEM (polynomial 0x1021), as in Redis's crc16.c.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// crc16 returns the CRC16-XMODEM checksum of s (polynomial 0x1021, initial value 0, no
// reflection, no final XOR), the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

// Tag returns the part of key that Redis Cluster hashes: when key contains a '{' and a '}'
// after it with at least one byte between them, the text between the first '{' and the first
// '}' after it; otherwise the whole key.
func Tag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	n := strings.IndexByte(key[open+1:], '}')
	if n <= 0 {
		return key
	}
	return key[open+1 : open+1+n]
}

// Slot returns the Redis Cluster hash slot of key, CRC16-XMODEM(Tag(key)) modulo 16384,
// exactly as Redis's keyHashSlot computes it.
func Slot(key string) uint16 {
	return crc16(Tag(key)) & (SlotCount - 1)
}
