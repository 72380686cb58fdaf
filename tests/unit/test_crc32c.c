/* SPDX-License-Identifier: MIT */
/*
 * CRC32C, the spool's checksum: the check value of the standard, the instruction and the table
 * agree on every length and alignment, and the 64-byte form the recorder inlines equals the
 * general one.
 */
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "tap.h"

int main(void)
{
	p2pg_crc32c_init();
	bool hw = p2pg_crc32c_hw;
	printf("# SSE4.2 crc32 instruction: %s\n", hw ? "yes" : "no");

	for (int pass = 0; pass < 2; pass++) {
		p2pg_crc32c_hw = pass == 0 ? hw : false;
		const char *how = p2pg_crc32c_hw ? "instruction" : "table";
		CHECK(p2pg_crc32c(0, "123456789", 9) == 0xe3069283u,
		      "%s: the check value of \"123456789\" is 0xe3069283", how);
		CHECK(p2pg_crc32c(0, "", 0) == 0, "%s: nothing checks as 0", how);
		CHECK(p2pg_crc32c(p2pg_crc32c(0, "1234", 4), "56789", 5) == 0xe3069283u,
		      "%s: a checksum continues", how);
		static const unsigned char zeros[32];
		CHECK(p2pg_crc32c(0, zeros, 32) == 0x8a9136aau,
		      "%s: 32 zero bytes check as 0x8a9136aa (RFC 3720, B.4)", how);
	}

	unsigned char buf[300];
	srand(7);
	for (size_t k = 0; k < sizeof(buf); k++)
		buf[k] = (unsigned char)rand();
	int differ = 0;
	for (size_t start = 0; start < 9; start++)
		for (size_t len = 0; len + start <= sizeof(buf); len++) {
			p2pg_crc32c_hw = false;
			uint32_t soft = p2pg_crc32c(0, buf + start, len);
			p2pg_crc32c_hw = hw;
			differ += soft != p2pg_crc32c(0, buf + start, len);
		}
	CHECK(differ == 0, "instruction and table agree on every length and alignment (%d differ)",
	      differ);

	int wrong = 0;
	for (int n = 0; n < 1000; n++) {
		unsigned char block[64];
		for (int k = 0; k < 64; k++)
			block[k] = (unsigned char)rand();
		p2pg_crc32c_hw = hw;
		uint32_t want = p2pg_crc32c(0, block, 64);
		wrong += p2pg_crc32c_64(block) != want;
		p2pg_crc32c_hw = false;
		wrong += p2pg_crc32c_64(block) != want;
	}
	CHECK(wrong == 0, "the inline 64-byte form equals the general one, both ways (%d wrong)",
	      wrong);
	return TAP_DONE();
}
