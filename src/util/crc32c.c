/* SPDX-License-Identifier: MIT */
#include "crc32c.h"

#include <pthread.h>

bool p2pg_crc32c_hw;
uint32_t p2pg_crc32c_table[8][256];

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
		p2pg_crc32c_table[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++)
		for (int k = 1; k < 8; k++)
			p2pg_crc32c_table[k][n] =
			    (p2pg_crc32c_table[k - 1][n] >> 8) ^
			    p2pg_crc32c_table[0][p2pg_crc32c_table[k - 1][n] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	p2pg_crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

void p2pg_crc32c_init(void)
{
	pthread_once(&once, fill);
}

uint32_t p2pg_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t c = crc ^ 0xffffffffu;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, sizeof(w));
#if defined(__x86_64__)
		if (p2pg_crc32c_hw)
			__asm__("crc32q %1, %0" : "+r"(c) : "rm"(w));
		else
#endif
			c = p2pg_crc32c_soft_word((uint32_t)c, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = (c >> 8) ^ p2pg_crc32c_table[0][(c ^ *p++) & 0xff];
	return (uint32_t)c ^ 0xffffffffu;
}
