/* SPDX-License-Identifier: MIT */
/*
 * CRC32C (Castagnoli, the polynomial of iSCSI, ext4 and the SSE4.2 crc32 instruction): the
 * checksum of every spool record and blob. The CPU's instruction where it has one (checked at run
 * time), a table otherwise; both give the same value, so a spool written on one machine is checked
 * on another.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Set by p2pg_crc32c_init: the CPU has SSE4.2's crc32 instruction. */
extern bool p2pg_crc32c_hw;
/* The tables of the software path: slice k advances a byte k + 1 bytes further. */
extern uint32_t p2pg_crc32c_table[8][256];

/* Detects the instruction and fills the tables; idempotent, thread-safe. Every writer and reader
 * of checksums calls it before its first one (the spool's creation and mapping do). */
void p2pg_crc32c_init(void);

/* Continues crc (0 for a new checksum) over len bytes: the standard CRC32C, pre- and
 * post-inverted, so p2pg_crc32c(p2pg_crc32c(0, a, n), b, m) is the checksum of a then b. */
uint32_t p2pg_crc32c(uint32_t crc, const void *buf, size_t len);

static inline uint32_t p2pg_crc32c_soft_word(uint32_t crc, uint64_t word)
{
	uint64_t x = word ^ crc;
	return p2pg_crc32c_table[7][x & 0xff] ^ p2pg_crc32c_table[6][(x >> 8) & 0xff] ^
	       p2pg_crc32c_table[5][(x >> 16) & 0xff] ^ p2pg_crc32c_table[4][(x >> 24) & 0xff] ^
	       p2pg_crc32c_table[3][(x >> 32) & 0xff] ^ p2pg_crc32c_table[2][(x >> 40) & 0xff] ^
	       p2pg_crc32c_table[1][(x >> 48) & 0xff] ^ p2pg_crc32c_table[0][x >> 56];
}

/*
 * The checksum of a 64-byte block (a spool record), inline for the recorder's hot path: eight
 * crc32 instructions (inline assembly, so no compiler target flag is needed and nothing is called),
 * or eight table steps. Equal to p2pg_crc32c(0, block, 64). Little-endian machines only, as the
 * spool is.
 */
typedef uint64_t __attribute__((may_alias, aligned(1))) p2pg_crc32c_word;

static inline uint32_t p2pg_crc32c_64(const void *block)
{
	/* Read in place, word by word: a copy first costs more than the checksum (the copy's wide
	 * stores do not forward to the instruction's 8-byte loads). */
	const p2pg_crc32c_word *w = block;
	uint64_t crc = 0xffffffffu;
#if defined(__x86_64__)
	if (__builtin_expect(p2pg_crc32c_hw, 1)) {
		__asm__("crc32q %1, %0" : "+r"(crc) : "m"(w[0]));
		__asm__("crc32q %1, %0" : "+r"(crc) : "m"(w[1]));
		__asm__("crc32q %1, %0" : "+r"(crc) : "m"(w[2]));
		__asm__("crc32q %1, %0" : "+r"(crc) : "m"(w[3]));
		__asm__("crc32q %1, %0" : "+r"(crc) : "m"(w[4]));
		__asm__("crc32q %1, %0" : "+r"(crc) : "m"(w[5]));
		__asm__("crc32q %1, %0" : "+r"(crc) : "m"(w[6]));
		__asm__("crc32q %1, %0" : "+r"(crc) : "m"(w[7]));
		return (uint32_t)crc ^ 0xffffffffu;
	}
#endif
	for (int k = 0; k < 8; k++)
		crc = p2pg_crc32c_soft_word((uint32_t)crc, w[k]);
	return (uint32_t)crc ^ 0xffffffffu;
}
