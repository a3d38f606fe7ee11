package keylayout

import (
	"testing"
)

// crc16Bitwise is a table-free CRC16-XMODEM, the reference for the table-driven crc16.
func crc16Bitwise(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func TestCRC16(t *testing.T) {
	// Redis's crc16.c: "Output for "123456789" : 31C3".
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#04x, want 0x31c3", got)
	}
	// Entries of the table in Redis's crc16.c.
	for i, want := range map[int]uint16{0: 0x0000, 1: 0x1021, 2: 0x2042, 16: 0x1231, 255: 0x1ef0} {
		if crc16Table[i] != want {
			t.Errorf("crc16Table[%d] = %#04x, want %#04x", i, crc16Table[i], want)
		}
	}
	for _, s := range []string{"", "a", "foo", "\x00\xff\x80", "{user1000}", string(make([]byte, 300))} {
		if got, want := crc16(s), crc16Bitwise(s); got != want {
			t.Errorf("crc16(%q) = %#04x, bitwise reference %#04x", s, got, want)
		}
	}
}

func TestSlotVectors(t *testing.T) {
	tests := []struct {
		key, hashed string
		slot        uint16
	}{
		{"123456789", "123456789", 12739},
		{"foo", "foo", 12182},
		{"user1000", "user1000", 0}, // slot filled in from crc below
		{"{user1000}.following", "user1000", 0},
		{"{user1000}.followers", "user1000", 0},
		{"foo{}{bar}", "foo{}{bar}", 0}, // empty first tag: the whole key is hashed
		{"foo{{bar}}zap", "{bar", 0},
		{"foo{bar}{zap}", "bar", 0},
		{"{", "{", 0},
		{"}", "}", 0},
		{"{}", "{}", 0},
		{"}{a}", "a", 0},
		{"a{b", "a{b", 0},
		{"", "", 0},
	}
	for _, tc := range tests {
		if got := Tag(tc.key); got != tc.hashed {
			t.Errorf("Tag(%q) = %q, want %q", tc.key, got, tc.hashed)
		}
		want := tc.slot
		if want == 0 {
			want = crc16Bitwise(tc.hashed) % SlotCount
		}
		if got := Slot(tc.key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", tc.key, got, want)
		}
	}
	if a, b, c := Slot("{user1000}.following"), Slot("{user1000}.followers"), Slot("user1000"); a != b || b != c {
		t.Errorf("user1000 keys on slots %d, %d, %d; want one slot", a, b, c)
	}
	if Slot("foo{}{bar}") == Slot("bar") {
		t.Error(`Slot("foo{}{bar}") hashed "bar", want the whole key`)
	}
}
