// Package keylayout is the single implementation of the operator's Redis key layout: key
// templates with ${variable} placeholders, the encoding of untrusted variable values into key
// text, and Redis Cluster hash-slot math. The limiter (per request), the admission webhook and
// the controller all use it, so that a template accepted by the webhook expands to exactly the
// keys the limiter touches and lands on exactly the slots the controller predicts.
//
// Three properties hold for every template accepted by Parse and every Values:
//
//   - Expand never lets a value change the structure of a key: every value goes through
//     EncodeValue, whose output contains no '{', '}', ':' or other separator bytes, so the
//     hash tag of an expanded key is always the expansion of the template's literal tag.
//   - For a fixed template and fixed other values, distinct identities expand to distinct
//     keys (EncodeValue is injective, up to SHA-256 collisions for very long values).
//   - Slot computes the same hash slot as Redis's keyHashSlot (CRC16-XMODEM of the hash tag,
//     modulo 16384), so all keys expanded from one template with the same tag values share a
//     slot and can be used together in one Lua script on a Redis Cluster.
package keylayout
